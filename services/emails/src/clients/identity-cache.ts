import type { IdentityLookup, IdentitySource } from './upstreams.js';

export interface IdentityCache extends IdentitySource {
  /** Drops what is cached for a domain (by id, or by team and name). */
  invalidate(opts: { teamId?: string | undefined; domainId?: string | undefined; domainName?: string | undefined }): void;
  clear(): void;
}

/**
 * A short per-process cache of sending identities in front of the domains
 * service. Every replica drops an entry as soon as it hears a domain event
 * (an ordered consumer per process, see events/domain-events.consumer.ts); the
 * TTL bounds staleness when an event is late. Concurrent lookups of one domain
 * share a single call.
 */
export function createIdentityCache(source: IdentitySource, opts: { ttlMs: number; now?: () => number }): IdentityCache {
  const now = opts.now ?? Date.now;
  const entries = new Map<string, { value: IdentityLookup; expiresAt: number; teamId: string; domainName: string }>();
  const inflight = new Map<string, Promise<IdentityLookup>>();
  let generation = 0;
  const keyOf = (teamId: string, domainName: string) => `${teamId}\n${domainName.toLowerCase()}`;

  return {
    async lookup(teamId, domainName) {
      const key = keyOf(teamId, domainName);
      const hit = entries.get(key);
      if (hit && hit.expiresAt > now()) return hit.value;
      const running = inflight.get(key);
      if (running) return running;
      const startedAt = generation;
      const p = source.lookup(teamId, domainName).then((value) => {
        // An invalidation during the call may mean the answer is already stale: use it once, keep nothing.
        if (opts.ttlMs > 0 && startedAt === generation) entries.set(key, { value, expiresAt: now() + opts.ttlMs, teamId, domainName: domainName.toLowerCase() });
        return value;
      }).finally(() => inflight.delete(key));
      inflight.set(key, p);
      return p;
    },
    invalidate({ teamId, domainId, domainName }) {
      generation++;
      for (const [key, e] of entries) {
        const byId = domainId !== undefined && (
          (e.value.kind === 'verified' && e.value.identity.domainId === domainId) || (e.value.kind === 'unverified' && e.value.domainId === domainId));
        const byName = domainName !== undefined && e.domainName === domainName.toLowerCase() && (teamId === undefined || e.teamId === teamId);
        // A negative answer for the team may have become positive: drop those too.
        const negative = teamId !== undefined && e.teamId === teamId && e.value.kind !== 'verified';
        if (byId || byName || negative) entries.delete(key);
      }
    },
    clear() {
      generation++;
      entries.clear();
    },
  };
}
