import { canonicalAddress, createGroupCommit } from '@mailfleet/kit';
import type { SuppressionChecker } from './upstreams.js';

interface Check {
  readonly teamId: string;
  readonly addresses: readonly string[];
}

/**
 * Suppression checks that arrive within a few milliseconds of each other (or while one is under way) share one
 * `CheckSuppressed` call per team, the way the accept's writes share one insert: each send otherwise costs the
 * suppressions service one read of its collection. Each caller gets the answer for its own addresses only; a
 * call that fails fails the checks of its team alone.
 */
export function createSuppressionBatcher(inner: SuppressionChecker, opts: { lingerMs?: number; maxChecks?: number } = {}): SuppressionChecker {
  const commit = createGroupCommit<Check, Set<string>>({
    maxItems: opts.maxChecks ?? 100,
    maxDelayMs: opts.lingerMs ?? 2,
    weigh: (c) => Math.max(1, Math.ceil(c.addresses.length / 10)),
    flush: async (checks) => {
      const byTeam = new Map<string, Set<string>>();
      for (const c of checks) {
        const all = byTeam.get(c.teamId) ?? new Set<string>();
        for (const a of c.addresses) all.add(a);
        byTeam.set(c.teamId, all);
      }
      const answers = new Map<string, Set<string> | Error>();
      await Promise.all([...byTeam].map(async ([teamId, all]) => {
        try {
          answers.set(teamId, await inner.suppressed(teamId, [...all]));
        } catch (err) {
          answers.set(teamId, err instanceof Error ? err : new Error(String(err)));
        }
      }));
      return checks.map((c) => {
        const hit = answers.get(c.teamId)!;
        if (hit instanceof Error) return hit;
        const mine = new Set(c.addresses.map(canonicalAddress));
        return new Set([...hit].filter((a) => mine.has(a)));
      });
    },
  });
  return {
    async suppressed(teamId, addresses) {
      if (addresses.length === 0) return new Set();
      return commit.submit({ teamId, addresses });
    },
  };
}
