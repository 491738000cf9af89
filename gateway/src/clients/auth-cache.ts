import { createHash } from 'node:crypto';
import type { Authenticator, Principal } from '../plugins/auth.plugin.js';

export interface AuthCacheOptions {
  /** How long a resolved key is trusted without asking auth again. */
  ttlMs?: number;
  maxEntries?: number;
  now?: () => number;
}

export interface AuthCache {
  readonly authenticate: Authenticator;
  /** Drops every cached entry of a key (a `key.revoked` event, or a DELETE through this replica). */
  revokeKey(keyId: string): void;
  clear(): void;
  /** When false (revocations cannot be heard, e.g. NATS is down) every request asks auth. */
  setTrusted(trusted: boolean): void;
  readonly size: number;
}

/**
 * A short cache of resolved keys in front of auth.AuthenticateKey. Entries
 * are keyed by a hash of the token (the cache never holds tokens), expire
 * after a few seconds, and are dropped at once by revocation events, so a
 * deleted key stops working on every replica as soon as the event arrives.
 * While revocations cannot be heard the cache is bypassed.
 */
export function createAuthCache(upstream: Authenticator, opts: AuthCacheOptions = {}): AuthCache {
  const ttl = opts.ttlMs ?? 30_000;
  const max = opts.maxEntries ?? 10_000;
  const now = opts.now ?? Date.now;
  const entries = new Map<string, { principal: Principal; expiresAt: number }>();
  let trusted = false;
  // Revocations that arrive while a lookup is in flight must win over its result.
  let generation = 0;
  const revokedDuringFlight = new Set<string>();

  const keyOf = (token: string) => createHash('sha256').update(token).digest('base64url');

  return {
    async authenticate(token) {
      const k = keyOf(token);
      const hit = entries.get(k);
      if (trusted && hit && hit.expiresAt > now()) return hit.principal;
      if (hit) entries.delete(k);
      const startedAt = generation;
      const principal = await upstream(token);
      if (trusted && !(generation !== startedAt && revokedDuringFlight.has(principal.keyId))) {
        if (entries.size >= max) {
          const oldest = entries.keys().next().value;
          if (oldest !== undefined) entries.delete(oldest);
        }
        entries.set(k, { principal, expiresAt: now() + ttl });
      }
      return principal;
    },
    revokeKey(keyId) {
      generation++;
      revokedDuringFlight.add(keyId);
      if (revokedDuringFlight.size > 1000) revokedDuringFlight.clear();
      for (const [k, e] of entries) if (e.principal.keyId === keyId) entries.delete(k);
    },
    clear() {
      entries.clear();
    },
    setTrusted(t) {
      trusted = t;
      if (!t) entries.clear();
    },
    get size() {
      return entries.size;
    },
  };
}
