import { InvalidArgumentError, randomBase62 } from '@mailfleet/kit';

export const SECRET_PREFIX = 'whsec_';
export const MIN_SECRET_LENGTH = 16;
export const MAX_SECRET_LENGTH = 256;

/** A new signing secret: `whsec_` and 32 base62 characters (~190 bits). */
export function generateSecret(): string {
  return `${SECRET_PREFIX}${randomBase62(32)}`;
}

/** A secret the caller chose: 16 to 256 characters, no surrounding or control whitespace games. */
export function validateSecret(secret: string): string {
  if (secret.length < MIN_SECRET_LENGTH) throw new InvalidArgumentError(`secret must be at least ${MIN_SECRET_LENGTH} characters`);
  if (secret.length > MAX_SECRET_LENGTH) throw new InvalidArgumentError(`secret must be at most ${MAX_SECRET_LENGTH} characters`);
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  if (/[\u0000-\u001f\u007f]/.test(secret)) throw new InvalidArgumentError('secret must not contain control characters');
  return secret;
}

/**
 * What list, get, update and delete responses show: the `whsec_` prefix when
 * the secret has it, four asterisks and the last four characters
 * (`whsec_****abcd`), enough to tell secrets apart, too little to sign.
 */
export function maskSecret(secret: string): string {
  const prefix = secret.startsWith(SECRET_PREFIX) ? SECRET_PREFIX : '';
  return `${prefix}****${secret.slice(-4)}`;
}
