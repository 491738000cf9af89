import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * VERP (variable envelope return path): every email goes out with its own
 * envelope sender `bounces+<emailId>-<sig>@<bounceDomain>`, so a delivery
 * status notification or a feedback report that comes back names the email it
 * is about, whatever the reporting MTA writes in its body. The signature keeps
 * the inbound listener from being a target for made-up addresses (no
 * backscatter, no way to attribute a report to someone else's email).
 */

const LOCAL_PREFIX = 'bounces';
const SIGNATURE_LENGTH = 10;
const EMAIL_ID = /^[A-Za-z0-9_]+$/;
/** RFC 5321 section 4.5.3.1.1. */
const MAX_LOCAL_PART = 64;
const VERP_LOCAL_PART = new RegExp(`^${LOCAL_PREFIX}\\+([A-Za-z0-9_]+)-([A-Za-z2-7]{${SIGNATURE_LENGTH}})$`, 'i');
const BASE32_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

export function verpAddress(opts: { secret: string; emailId: string; bounceDomain: string }): string {
  if (opts.secret === '') throw new Error('verpAddress: the signing secret is empty');
  if (!EMAIL_ID.test(opts.emailId)) throw new Error(`verpAddress: email id must match ${EMAIL_ID.source}`);
  const domain = normaliseDomain(opts.bounceDomain);
  if (domain === '') throw new Error('verpAddress: bounce domain is empty');
  const local = `${LOCAL_PREFIX}+${opts.emailId}-${signature(opts.secret, opts.emailId)}`;
  if (local.length > MAX_LOCAL_PART) throw new Error(`verpAddress: email id too long for a ${MAX_LOCAL_PART}-character local part`);
  return `${local}@${domain}`;
}

/**
 * The email id a bounce address stands for, or undefined when the address is
 * not one of ours: another form, another domain (compared case-insensitively)
 * or a signature that does not verify (compared in constant time). Accepts the
 * address with or without angle brackets.
 */
export function parseVerpAddress(opts: { secret: string; address: string; bounceDomain: string }): string | undefined {
  if (opts.secret === '') return undefined;
  let address = opts.address.trim();
  if (address.startsWith('<') && address.endsWith('>')) address = address.slice(1, -1).trim();
  const at = address.lastIndexOf('@');
  if (at <= 0) return undefined;
  const domain = normaliseDomain(address.slice(at + 1));
  if (domain === '' || domain !== normaliseDomain(opts.bounceDomain)) return undefined;
  const match = VERP_LOCAL_PART.exec(address.slice(0, at));
  if (!match) return undefined;
  const emailId = match[1] as string;
  const given = Buffer.from((match[2] as string).toLowerCase());
  const expected = Buffer.from(signature(opts.secret, emailId));
  return given.length === expected.length && timingSafeEqual(given, expected) ? emailId : undefined;
}

function signature(secret: string, emailId: string): string {
  return base32(createHmac('sha256', secret).update(emailId).digest()).slice(0, SIGNATURE_LENGTH);
}

/** RFC 4648 base32, lower case, no padding. */
function base32(bytes: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32_ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  if (bits > 0) out += BASE32_ALPHABET[(value << (5 - bits)) & 31];
  return out;
}

function normaliseDomain(domain: string): string {
  return domain.trim().toLowerCase().replace(/\.$/, '');
}
