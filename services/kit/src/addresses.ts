/**
 * The one address normalisation of the platform. Every service that stores,
 * looks up or compares addresses (contacts, suppressions, emails, campaigns)
 * keys them with `canonicalAddress`, so an address that one service accepted
 * is the same string in every other: an unsubscribe of `Jürgen@Example.com`
 * in contacts suppresses exactly what the emails service later checks.
 *
 * Canonical form: surrounding spaces dropped, Unicode NFC (a composed `ü` and
 * `u` + combining diaeresis are one address), lower case as a whole. Mailbox
 * providers treat local parts case-insensitively in practice, so one list key
 * per mailbox is worth the theoretical loss.
 *
 * Validation is the pragmatic kind mail platforms use, not the full RFC 5322
 * grammar: a dot-atom local part of letters (any script), digits and RFC 5322
 * atext symbols; a domain of two or more labels with a top-level label of
 * letters or an `xn--` A-label; RFC 5321 lengths. Quoted local parts and
 * address literals are refused: no mailbox provider hands them out.
 */

/** RFC 5321: a path holds at most 254 characters of address. */
export const MAX_ADDRESS_LENGTH = 254;
/** RFC 5321: a local part holds at most 64 characters. */
export const MAX_LOCAL_PART_LENGTH = 64;

const LOCAL_PART = /^[\p{L}\p{M}\p{N}!#$%&'*+/=?^_`{|}~-]+(?:\.[\p{L}\p{M}\p{N}!#$%&'*+/=?^_`{|}~-]+)*$/u;
const DOMAIN_LABEL = /^[\p{L}\p{N}](?:[\p{L}\p{M}\p{N}-]{0,61}[\p{L}\p{M}\p{N}])?$/u;
const TOP_LEVEL = /^(?:\p{L}[\p{L}\p{M}]{1,62}|xn--[a-z0-9-]{1,59})$/u;

/** The key form of an address (see above), without validation. */
export function canonicalAddress(raw: string): string {
  return raw.trim().normalize('NFC').toLowerCase();
}

/** The canonical form of a valid address, or undefined when it is not one. */
export function normaliseAddress(raw: string): string | undefined {
  const email = canonicalAddress(raw);
  if (email.length === 0 || email.length > MAX_ADDRESS_LENGTH) return undefined;
  const at = email.indexOf('@');
  if (at <= 0 || at !== email.lastIndexOf('@')) return undefined;
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  if (local.length > MAX_LOCAL_PART_LENGTH || !LOCAL_PART.test(local)) return undefined;
  const labels = domain.split('.');
  if (labels.length < 2 || !labels.every((l) => DOMAIN_LABEL.test(l))) return undefined;
  if (!TOP_LEVEL.test(labels[labels.length - 1] ?? '')) return undefined;
  return email;
}

/**
 * The canonical address of a recipient as events and headers carry it: a
 * bare address or a `Name <address>` mailbox. Undefined when no valid address
 * is in it.
 */
export function addressOfRecipient(raw: string): string | undefined {
  const angle = /<([^<>]+)>\s*$/.exec(raw);
  return normaliseAddress(angle?.[1] ?? raw);
}
