import type { Logger } from '@mailfleet/kit';
import type { RateLimitFamilyName } from '../plugins/errors.plugin.js';
import type { Principal } from '../plugins/auth.plugin.js';
import type { RateLimitVerdict } from '../plugins/rate-limit.plugin.js';

export const RATE_WINDOW_MS = 60_000;

/** SPEC section 8; used only until auth has told this replica the team's limits (Admit, or a fold). */
export const DEFAULT_LIMITS: Readonly<Record<RateLimitFamilyName, number>> = {
  SEND_EMAIL: 100, BATCH_EMAIL: 1_000, READ_EMAIL: 100, FEEDBACK_LIST: 100, CONTACT: 500, BULK_CONTACT: 100, DEFAULT: 300,
};

/** What this replica counted for one team, family and window since its last fold. */
export interface LocalCount {
  readonly teamId: string;
  readonly family: RateLimitFamilyName;
  readonly windowStartMs: number;
  readonly count: number;
}

/** The shared count after a fold (every replica's folded units) and the limit in force. */
export interface SharedCount extends LocalCount {
  readonly limit: number;
}

/** Adds local counts to auth's shared windows and returns them (auth.FoldRateLimits). */
export type FoldCounts = (counts: readonly LocalCount[]) => Promise<readonly SharedCount[]>;

export interface RateLimiter {
  /** Decides locally and counts the request; no call to auth. */
  check(principal: Principal, family: RateLimitFamilyName, cost: number): RateLimitVerdict;
  /** One fold now (the timer calls it every sync interval); concurrent calls share one fold. */
  sync(): Promise<void>;
  /** Stops the timer and folds what is left. */
  stop(): Promise<void>;
}

interface Window {
  readonly teamId: string;
  readonly family: RateLimitFamilyName;
  readonly startMs: number;
  limit: number;
  /** Shared count as of the last fold: every replica's folded units, ours included. */
  shared: number;
  /** Counted here and sent in the fold now in flight. */
  inflight: number;
  /** Counted here since then. */
  pending: number;
}

const MAX_PER_FOLD = 1000;

/**
 * Per-team, per-family fixed one-minute windows counted locally and folded
 * into auth's shared counter every sync interval (Kong rate-limiting's
 * `sync_rate`). A request is admitted while shared + in flight + pending + its
 * cost stays within the limit, so one replica alone is exact, and every
 * replica learns the others' counts at each fold. Between two folds a replica
 * cannot see what the others admitted since their last fold that reached it:
 * over a window the replicas together admit at most limit + (replicas - 1) x
 * (what one replica admits in two sync intervals: the other's fold, then this
 * one's), and never more than replicas x limit, since each replica's own count
 * alone never passes the limit. Requests cost no call to auth and no
 * write; auth writes once per fold.
 */
export function createRateLimiter(opts: {
  fold: FoldCounts;
  syncIntervalMs: number;
  logger: Logger;
  now?: () => number;
}): RateLimiter {
  const now = opts.now ?? Date.now;
  const windows = new Map<string, Window>();
  let inFlight: Promise<void> | undefined;

  const keyOf = (teamId: string, family: string, startMs: number) => `${teamId}\u0000${family}\u0000${startMs}`;

  async function foldOnce(): Promise<void> {
    const current = Math.floor(now() / RATE_WINDOW_MS) * RATE_WINDOW_MS;
    const batch: Window[] = [];
    for (const [k, w] of windows) {
      if (w.pending > 0 || w.startMs >= current) {
        w.inflight += w.pending;
        w.pending = 0;
        batch.push(w);
      } else if (w.inflight === 0) {
        windows.delete(k);
      }
    }
    for (let i = 0; i < batch.length; i += MAX_PER_FOLD) {
      const part = batch.slice(i, i + MAX_PER_FOLD);
      try {
        const shared = await opts.fold(part.map((w) => ({ teamId: w.teamId, family: w.family, windowStartMs: w.startMs, count: w.inflight })));
        const byKey = new Map(shared.map((s) => [keyOf(s.teamId, s.family, s.windowStartMs), s]));
        for (const w of part) {
          const s = byKey.get(keyOf(w.teamId, w.family, w.startMs));
          w.inflight = 0;
          if (!s) {
            // auth knows no such team: nothing to keep.
            windows.delete(keyOf(w.teamId, w.family, w.startMs));
            continue;
          }
          w.shared = Math.max(w.shared, s.count);
          if (s.limit > 0) w.limit = s.limit;
        }
      } catch (err) {
        // Kept for the next fold; decisions go on from what this replica knows.
        for (const w of part) {
          w.pending += w.inflight;
          w.inflight = 0;
        }
        opts.logger.warn({ err, windows: part.length }, 'could not fold rate-limit counts into auth; will retry with the next fold');
      }
    }
  }

  const sync = (): Promise<void> => {
    inFlight ??= foldOnce().finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  };

  const timer = setInterval(() => void sync(), opts.syncIntervalMs);
  timer.unref();

  return {
    check(principal, family, cost) {
      const t = now();
      const startMs = Math.floor(t / RATE_WINDOW_MS) * RATE_WINDOW_MS;
      const resetSeconds = Math.max(1, Math.ceil((startMs + RATE_WINDOW_MS - t) / 1000));
      const k = keyOf(principal.teamId, family, startMs);
      let w = windows.get(k);
      if (!w) {
        w = { teamId: principal.teamId, family, startMs, limit: principal.rateLimits?.[family] ?? DEFAULT_LIMITS[family], shared: 0, inflight: 0, pending: 0 };
        windows.set(k, w);
      }
      const used = w.shared + w.inflight + w.pending;
      const allowed = used + cost <= w.limit;
      if (allowed) w.pending += cost;
      return { allowed, limit: w.limit, remaining: Math.max(0, w.limit - used - (allowed ? cost : 0)), resetSeconds };
    },
    sync,
    async stop() {
      clearInterval(timer);
      await sync();
      // Anything counted while that fold ran goes too.
      await sync();
    },
  };
}
