import { createHash } from 'node:crypto';
import type { Authenticator, Principal } from '../plugins/auth.plugin.js';

export interface AuthCacheOptions {
  /** How long a resolved key is trusted without asking auth again, while revocations are heard. */
  ttlMs?: number;
  /**
   * How long it is trusted while they cannot be heard (the revocation listener is down or its NATS
   * connection is cut off): the bound on how long a revoked key keeps working on this replica then.
   */
  unheardTtlMs?: number;
  maxEntries?: number;
  now?: () => number;
}

export interface AuthCache {
  readonly authenticate: Authenticator;
  /** Drops every cached entry of a key (a `key.revoked` event, or a DELETE through this replica). */
  revokeKey(keyId: string): void;
  clear(): void;
  /** true: revocations are heard until told otherwise; false: they are not heard from now on. */
  setTrusted(trusted: boolean): void;
  /** Revocations are heard until `ms` from now unless renewed: the listener's proof that its connection is live. */
  trustFor(ms: number): void;
  /** Whether revocations are heard right now. */
  readonly trusted: boolean;
  readonly size: number;
}

interface Entry {
  readonly principal: Principal;
  readonly cachedAt: number;
  /** The spell of hearing revocations the entry was cached in; -1 when they were not heard. */
  readonly heardSpell: number;
}

/**
 * A short cache of resolved keys in front of auth.Admit. Entries are keyed by
 * a hash of the token (the cache never holds tokens) and dropped at once by
 * revocation events, so a deleted key stops working on every replica as soon
 * as the event arrives. An entry is kept for `ttlMs` only while revocations
 * have been heard without a gap since it was cached; otherwise (listener down,
 * connection cut off, or a gap in which an event may have been missed) for
 * `unheardTtlMs`, so a revoked key stops working within about that long even
 * on a replica that cannot hear the event.
 */
export function createAuthCache(upstream: Authenticator, opts: AuthCacheOptions = {}): AuthCache {
  const ttl = opts.ttlMs ?? 30_000;
  const unheardTtl = Math.min(ttl, opts.unheardTtlMs ?? 1_000);
  const max = opts.maxEntries ?? 10_000;
  const now = opts.now ?? Date.now;
  const entries = new Map<string, Entry>();
  /** Revocations are heard until this instant (0: not heard). */
  let trustedUntil = 0;
  /** Counts spells of hearing without a gap: an entry of an earlier spell may have missed an event. */
  let spell = 0;
  // Revocations that arrive while a lookup is in flight must win over its result.
  let generation = 0;
  const revokedDuringFlight = new Set<string>();

  const keyOf = (token: string) => createHash('sha256').update(token).digest('base64url');
  const isTrusted = (at: number) => at < trustedUntil;

  function fresh(e: Entry, at: number): boolean {
    const limit = isTrusted(at) && e.heardSpell === spell ? ttl : unheardTtl;
    return at - e.cachedAt < limit;
  }

  function trustUntil(until: number): void {
    const at = now();
    if (!isTrusted(at)) spell++;
    trustedUntil = Math.max(trustedUntil, until);
  }

  return {
    async authenticate(token) {
      const k = keyOf(token);
      const hit = entries.get(k);
      if (hit && fresh(hit, now())) return hit.principal;
      if (hit) entries.delete(k);
      const startedAt = generation;
      const cachedAt = now();
      const heardSpell = isTrusted(cachedAt) ? spell : -1;
      const principal = await upstream(token);
      if (!(generation !== startedAt && revokedDuringFlight.has(principal.keyId))) {
        if (entries.size >= max) {
          const oldest = entries.keys().next().value;
          if (oldest !== undefined) entries.delete(oldest);
        }
        // Stamped with the time auth was asked: a revocation after it is what the cache must hear.
        entries.set(k, { principal, cachedAt, heardSpell });
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
      if (t) trustUntil(Number.POSITIVE_INFINITY);
      else trustedUntil = 0;
    },
    trustFor(ms) {
      trustUntil(now() + ms);
    },
    get trusted() {
      return isTrusted(now());
    },
    get size() {
      return entries.size;
    },
  };
}
