import { createHash, randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * Random bytes drawn from one buffer refilled from the CSPRNG when used up (as `crypto.randomUUID` does): one
 * call into the CSPRNG per ~180 ids, where each id made one (and allocated a buffer), on every write path.
 */
const POOL = Buffer.alloc(4096);
let poolAt = POOL.length;

function randomByte(): number {
  if (poolAt === POOL.length) {
    randomFillSync(POOL);
    poolAt = 0;
  }
  return POOL[poolAt++]!;
}

/** `bytes` random bytes as hexadecimal text (twice as many digits). */
export function randomHex(bytes: number): string {
  let out = '';
  for (let i = 0; i < bytes; i++) out += randomByte().toString(16).padStart(2, '0');
  return out;
}

/** Base62 text of `length` characters drawn from `nextByte` (rejection sampling: no modulo bias). */
function base62(length: number, nextByte: () => number): string {
  let out = '';
  while (out.length < length) {
    const b = nextByte();
    if (b < 248) out += ALPHABET[b % 62];
  }
  return out;
}

/** Base62 text of `length` random characters. */
export function randomBase62(length: number): string {
  return base62(length, randomByte);
}

/** Opaque resource id with a readable prefix, e.g. `team_3kT9...` (22 base62 chars, ~131 bits). */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase62(22)}`;
}

/**
 * An id of the same form as `newId`, derived from `parts` (SHA-256, its bytes drawn as `randomBase62` draws random
 * ones): the same parts give the same id. For a resource that is looked up by its natural key, so the lookup is a
 * read by `_id` (the one index the embedded FerretDB reads through).
 */
export function derivedId(prefix: string, ...parts: readonly string[]): string {
  let digest = createHash('sha256').update(parts.join('\u0000'), 'utf8').digest();
  let at = 0;
  return `${prefix}_${base62(22, () => {
    if (at === digest.length) {
      digest = createHash('sha256').update(digest).digest();
      at = 0;
    }
    return digest[at++]!;
  })}`;
}
