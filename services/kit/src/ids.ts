import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Base62 text of n random bytes' worth of entropy (rejection sampling: no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < 248) out += ALPHABET[b % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** Opaque resource id with a readable prefix, e.g. `team_3kT9...` (22 base62 chars, ~131 bits). */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase62(22)}`;
}
