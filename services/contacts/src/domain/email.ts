import { addressOfRecipient, canonicalAddress, MAX_ADDRESS_LENGTH, normaliseAddress } from '@mailfleet/kit';

/**
 * Email addresses of contacts, normalised by the platform's one address
 * function (`@mailfleet/kit` addresses.ts): trimmed, NFC, lower case, so
 * "Ann@Example.com" and "ann@example.com" are one contact (the unique index is
 * on the normalised form) and the suppressions service keys the same address
 * the same way. Internationalised local parts and domains are accepted.
 */
export const MAX_EMAIL_LENGTH = MAX_ADDRESS_LENGTH;

/** The stored form of an address. No validation. */
export function emailKey(raw: string): string {
  return canonicalAddress(raw);
}

/** The normalised address, or undefined when it is not a valid address. */
export function normaliseEmail(raw: string): string | undefined {
  return normaliseAddress(raw);
}

/** The bare address of a recipient (`a@b.c` or `Name <a@b.c>`), or undefined. */
export function recipientAddress(raw: string): string | undefined {
  return addressOfRecipient(raw);
}
