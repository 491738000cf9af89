import { canonicalAddress, isValidAddress } from '@mailfleet/kit';
import addressparser from 'nodemailer/lib/addressparser/index.js';

/** One mailbox: the bare address and an optional display name. */
export interface Mailbox {
  readonly address: string;
  readonly name: string;
}

// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const CONTROL = /[\u0000-\u001f\u007f]/;

/** The one RFC 5321 address check (the kit's): campaigns refuse at accept what would be refused here. */
export { isValidAddress };

export class AddressError extends Error {}

/**
 * Parses one public address field entry (`a@x.com`, `Name <a@x.com>`, or a
 * comma list of those). Refuses anything that could smuggle a header (line
 * breaks, control characters), groups, and malformed addresses.
 */
export function parseMailboxes(value: string): Mailbox[] {
  if (CONTROL.test(value)) throw new AddressError('must not contain line breaks or control characters');
  const trimmed = value.trim();
  if (trimmed === '') throw new AddressError('must not be empty');
  const parsed = addressparser(trimmed);
  const out: Mailbox[] = [];
  for (const p of parsed) {
    if ('group' in p) throw new AddressError(`${JSON.stringify(trimmed)} is not an email address (groups are not supported)`);
    const address = p.address.trim();
    if (!isValidAddress(address)) throw new AddressError(`${JSON.stringify(address || trimmed)} is not a valid email address`);
    out.push({ address, name: p.name.trim() });
  }
  if (out.length === 0) throw new AddressError(`${JSON.stringify(trimmed)} is not a valid email address`);
  return out;
}

/** Exactly one mailbox (the From field). */
export function parseSingleMailbox(value: string): Mailbox {
  const list = parseMailboxes(value);
  if (list.length !== 1) throw new AddressError('must be exactly one address');
  return list[0] as Mailbox;
}

/** Lower-case domain of an address. */
export function domainOf(address: string): string {
  return address.slice(address.lastIndexOf('@') + 1).toLowerCase();
}

/** Canonical form used for envelopes and suppression checks: the platform's one normalisation. */
export function normaliseAddress(address: string): string {
  return canonicalAddress(address);
}

/** `Name <a@x.com>` or `a@x.com`, as the public API shows it and as headers carry it. */
export function formatMailbox(m: Mailbox): string {
  if (!m.name) return m.address;
  const needsQuotes = /[()<>[\]:;@\\,."]/.test(m.name);
  return needsQuotes ? `"${m.name.replace(/(["\\])/g, '\\$1')}" <${m.address}>` : `${m.name} <${m.address}>`;
}

/** Distinct lower-cased addresses, first occurrence order. */
export function uniqueAddresses(mailboxes: readonly Mailbox[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const m of mailboxes) {
    const a = normaliseAddress(m.address);
    if (!seen.has(a)) {
      seen.add(a);
      out.push(a);
    }
  }
  return out;
}
