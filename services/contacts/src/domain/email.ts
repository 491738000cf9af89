/**
 * Email addresses of contacts. An address is stored normalised: trimmed and
 * lower-cased as a whole, so "Ann@Example.com" and "ann@example.com" are one
 * contact (the unique index is on the normalised form). Validation is the
 * pragmatic kind mail platforms use (one @, a dotted domain of valid labels,
 * RFC 5321 lengths), not the full RFC 5322 grammar: quoted local parts and IP
 * literals are refused, internationalised letters are accepted.
 */
export const MAX_EMAIL_LENGTH = 254;
const MAX_LOCAL_LENGTH = 64;

const LOCAL_PART = /^[\p{L}\p{N}!#$%&'*+/=?^_`{|}~-]+(?:\.[\p{L}\p{N}!#$%&'*+/=?^_`{|}~-]+)*$/u;
const DOMAIN_LABEL = /^[\p{L}\p{N}](?:[\p{L}\p{N}-]{0,61}[\p{L}\p{N}])?$/u;
const TOP_LEVEL = /^(?:[\p{L}]{2,63}|xn--[a-z0-9-]{1,59})$/u;

/** The stored form of an address: trimmed, lower case. No validation. */
export function emailKey(raw: string): string {
  return raw.trim().toLowerCase();
}

/** The normalised address, or undefined when it is not a valid address. */
export function normaliseEmail(raw: string): string | undefined {
  const email = emailKey(raw);
  if (email.length === 0 || email.length > MAX_EMAIL_LENGTH) return undefined;
  const at = email.lastIndexOf('@');
  if (at <= 0 || at !== email.indexOf('@')) return undefined;
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  if (local.length > MAX_LOCAL_LENGTH || !LOCAL_PART.test(local)) return undefined;
  const labels = domain.split('.');
  if (labels.length < 2 || !labels.every((l) => DOMAIN_LABEL.test(l))) return undefined;
  if (!TOP_LEVEL.test(labels[labels.length - 1] ?? '')) return undefined;
  return email;
}

/**
 * The bare address of a recipient as events carry it: either `a@b.c` or a
 * display form `Name <a@b.c>`. Undefined when no valid address is in it.
 */
export function recipientAddress(raw: string): string | undefined {
  const angle = /<([^<>]+)>\s*$/.exec(raw);
  return normaliseEmail(angle?.[1] ?? raw);
}
