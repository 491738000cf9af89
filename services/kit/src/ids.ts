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

/** Leading characters of a new id that hold its creation time: milliseconds since the epoch, base62, fixed width (62^8 ms is about 6,900 years). */
const TIME_CHARS = 8;
let timeAt = -1;
let timeText = '';

/** `ms` as TIME_CHARS base62 digits, most significant first: the alphabet is in ASCII order, so the text sorts as the number does. */
function timeBase62(ms: number): string {
  if (ms !== timeAt) {
    let out = '';
    let rest = Math.max(0, Math.floor(ms));
    for (let i = 0; i < TIME_CHARS; i++) {
      out = ALPHABET[rest % 62]! + out;
      rest = Math.floor(rest / 62);
    }
    timeAt = ms;
    timeText = out;
  }
  return timeText;
}

/**
 * Opaque resource id with a readable prefix, e.g. `em_0Xk3Lq9a...` (22 base62 chars): the creation time in
 * milliseconds, then 14 random characters (~83 bits). Ids made one after another sort one after another, as
 * MongoDB's ObjectId does: a new document's key lands beside the last one in the _id index (one page written per
 * batch of inserts, not one per document), and so do the updates of documents made together.
 */
export function newId(prefix: string, now: number = Date.now()): string {
  return `${prefix}_${timeBase62(now)}${randomBase62(22 - TIME_CHARS)}`;
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
