import { createHmac, timingSafeEqual } from 'node:crypto';
import { randomBase62 } from '@mailfleet/kit';

/** Every mailfleet API key starts with this, so secret scanners and humans can recognise one. */
export const TOKEN_PREFIX = 'mf_';
const TOKEN_BODY_LENGTH = 40; // 40 base62 chars ~ 238 bits
const TOKEN_PATTERN = /^mf_[0-9A-Za-z]{40}$/;

export function generateToken(): string {
  return `${TOKEN_PREFIX}${randomBase62(TOKEN_BODY_LENGTH)}`;
}

export function looksLikeToken(token: string): boolean {
  return TOKEN_PATTERN.test(token);
}

/**
 * Keyed hash of a token. Tokens carry ~238 bits of entropy, so a fast keyed
 * hash (HMAC-SHA256 with a server secret) is as safe as a slow KDF and cheap
 * enough to run on every request; a database dump alone cannot be used to
 * check guesses without the secret.
 */
export function hashToken(secret: string, token: string): string {
  return createHmac('sha256', secret).update(token, 'utf8').digest('hex');
}

/** Constant-time comparison of two hex hashes. */
export function hashesEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'hex');
  const bb = Buffer.from(b, 'hex');
  return ab.length === bb.length && ab.length > 0 && timingSafeEqual(ab, bb);
}

/** `mf_AbCd...wxyz`: the prefix with four characters, an ellipsis and the last four. */
export function partialToken(token: string): string {
  return `${token.slice(0, TOKEN_PREFIX.length + 4)}...${token.slice(-4)}`;
}
