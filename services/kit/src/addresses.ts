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

/*
 * Address syntax for what is handed on to the emails service later
 * (campaigns' replyTo, cc, bcc): refusing at accept what the emails service
 * would refuse at send time: `isValidAddress` is the one the emails service
 * checks with too (RFC 5321, ASCII dot-atom local part, a domain of at least
 * two labels): stricter than `normaliseAddress`, because
 * the SMTP relay path takes ASCII addresses only.
 */

const LOCAL = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+$/;
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const CONTROL = /[\u0000-\u001f\u007f]/;

/** A plain RFC 5321 address (ASCII, dot-atom local part, a domain with at least two labels). */
export function isValidAddress(address: string): boolean {
  if (address.length > 254) return false;
  const at = address.lastIndexOf('@');
  if (at <= 0 || at === address.length - 1) return false;
  const local = address.slice(0, at);
  const domain = address.slice(at + 1);
  if (local.length > 64 || !LOCAL.test(local) || local.startsWith('.') || local.endsWith('.') || local.includes('..')) return false;
  const labels = domain.split('.');
  return labels.length >= 2 && labels.every((l) => LABEL.test(l)) && !/^\d+$/.test(labels[labels.length - 1] ?? '');
}

/** Splits a header-style list on the commas outside quotes and angle brackets. */
function splitList(value: string): string[] | undefined {
  const parts: string[] = [];
  let current = '';
  let quoted = false;
  let angle = false;
  for (let i = 0; i < value.length; i++) {
    const ch = value[i] as string;
    if (quoted) {
      current += ch;
      if (ch === '\\' && i + 1 < value.length) current += value[++i] as string;
      else if (ch === '"') quoted = false;
    } else if (ch === '"') {
      quoted = true;
      current += ch;
    } else if (ch === '<') {
      if (angle) return undefined;
      angle = true;
      current += ch;
    } else if (ch === '>') {
      if (!angle) return undefined;
      angle = false;
      current += ch;
    } else if (ch === ',' && !angle) {
      parts.push(current);
      current = '';
    } else {
      current += ch;
    }
  }
  if (quoted || angle) return undefined;
  parts.push(current);
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

/** The bare address of one mailbox (`a@x.com`, `Name <a@x.com>`, `"Last, First" <a@x.com>`), or undefined. */
function mailboxAddress(part: string): string | undefined {
  const m = /^(.*)<([^<>]*)>$/.exec(part);
  if (!m) return part;
  const name = (m[1] as string).trim();
  // A group (`team: a@x.com;`) or a second address in the display name is not one mailbox.
  const unquoted = name.replace(/"(?:[^"\\]|\\.)*"/g, '');
  if (/[:;@<>]/.test(unquoted)) return undefined;
  return (m[2] as string).trim();
}

/**
 * Why one address field entry (`a@x.com`, `Name <a@x.com>` or a comma list
 * of those) would be refused, or undefined when every address in it is valid.
 */
export function addressEntryProblem(value: string): string | undefined {
  if (CONTROL.test(value)) return 'must not contain line breaks or control characters';
  const trimmed = value.trim();
  if (trimmed === '') return 'must not be empty';
  const parts = splitList(trimmed);
  if (!parts || parts.length === 0) return `${JSON.stringify(trimmed)} is not a valid email address`;
  for (const part of parts) {
    const address = mailboxAddress(part);
    if (address === undefined || !isValidAddress(address)) return `${JSON.stringify(address || part)} is not a valid email address`;
  }
  return undefined;
}
