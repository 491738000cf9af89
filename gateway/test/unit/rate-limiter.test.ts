import { createLogger } from '@mailfleet/kit';
import { describe, expect, it } from 'vitest';
import { createRateLimiter, type FoldCounts, type LocalCount } from '../../src/clients/rate-limiter.js';
import type { Principal } from '../../src/plugins/auth.plugin.js';

const logger = createLogger({ service: 'rate-limiter-test', level: 'silent' });
const team = (rateLimits: Principal['rateLimits'] = { SEND_EMAIL: 10 }): Principal => ({
  teamId: 'team_1', keyId: 'key_1', userId: 'user_1', permission: 'FULL', rateLimits,
});

/** auth's shared windows in memory: what FoldRateLimits does, with the calls it received. */
function fakeAuth(limit = 10) {
  const shared = new Map<string, number>();
  const calls: LocalCount[][] = [];
  let failing = false;
  const fold: FoldCounts = async (counts) => {
    calls.push([...counts]);
    if (failing) throw new Error('auth unreachable');
    return counts.map((c) => {
      const k = `${c.teamId}:${c.family}:${c.windowStartMs}`;
      shared.set(k, (shared.get(k) ?? 0) + c.count);
      return { ...c, count: shared.get(k)!, limit };
    });
  };
  return { fold, shared, calls, fail: (f: boolean) => { failing = f; } };
}

function clock(start = Date.UTC(2026, 10, 23, 12, 0, 5)) {
  let t = start;
  return { now: () => t, advance: (ms: number) => { t += ms; } };
}

describe('rate limiter: local counts folded into a shared window', () => {
  it('one replica is exact: the request past the limit is refused, with the budget left in each verdict', async () => {
    const auth = fakeAuth();
    const c = clock();
    const limiter = createRateLimiter({ fold: auth.fold, syncIntervalMs: 60_000, logger, now: c.now });
    const verdicts = Array.from({ length: 11 }, () => limiter.check(team(), 'SEND_EMAIL', 1));
    expect(verdicts.slice(0, 10).map((v) => v.remaining)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    expect(verdicts[10]).toEqual({ allowed: false, limit: 10, remaining: 0, resetSeconds: 55 });
    // No call to auth per request: the counts go in one fold.
    expect(auth.calls).toEqual([]);
    await limiter.sync();
    expect(auth.calls).toEqual([[{ teamId: 'team_1', family: 'SEND_EMAIL', windowStartMs: Date.UTC(2026, 10, 23, 12, 0, 0), count: 10 }]]);
    expect(limiter.check(team(), 'SEND_EMAIL', 1).allowed).toBe(false);
    await limiter.stop();
  });

  it('a cost larger than what is left is refused whole and takes nothing', async () => {
    const c = clock();
    const limiter = createRateLimiter({ fold: fakeAuth().fold, syncIntervalMs: 60_000, logger, now: c.now });
    const p = team({ BATCH_EMAIL: 100 });
    expect(limiter.check(p, 'BATCH_EMAIL', 60)).toMatchObject({ allowed: true, remaining: 40 });
    expect(limiter.check(p, 'BATCH_EMAIL', 41)).toMatchObject({ allowed: false, remaining: 40 });
    expect(limiter.check(p, 'BATCH_EMAIL', 40)).toMatchObject({ allowed: true, remaining: 0 });
    await limiter.stop();
  });

  it('two replicas: each learns the other\'s folded count, and together they admit at most limit + what one admits between folds', async () => {
    const auth = fakeAuth(10);
    const c = clock();
    const a = createRateLimiter({ fold: auth.fold, syncIntervalMs: 60_000, logger, now: c.now });
    const b = createRateLimiter({ fold: auth.fold, syncIntervalMs: 60_000, logger, now: c.now });
    let admitted = 0;
    const round = (n: number) => {
      for (let i = 0; i < n; i++) {
        for (const r of [a, b]) if (r.check(team(), 'SEND_EMAIL', 1).allowed) admitted++;
      }
    };
    round(3); // 6 admitted, each replica saw 3
    await Promise.all([a.sync(), b.sync()]);
    await Promise.all([a.sync(), b.sync()]);
    expect(auth.shared.get(`team_1:SEND_EMAIL:${Date.UTC(2026, 10, 23, 12, 0, 0)}`)).toBe(6);
    // Both now see 6 of 10: each admits up to 4 more before its next fold, 8 in all.
    round(10);
    expect(admitted).toBe(14);
    await Promise.all([a.sync(), b.sync()]);
    await Promise.all([a.sync(), b.sync()]);
    // After the fold both refuse, with the budget shown as spent.
    expect(a.check(team(), 'SEND_EMAIL', 1)).toMatchObject({ allowed: false, remaining: 0 });
    expect(b.check(team(), 'SEND_EMAIL', 1)).toMatchObject({ allowed: false, remaining: 0 });
    // A new window starts from zero.
    c.advance(60_000);
    expect(a.check(team(), 'SEND_EMAIL', 1)).toMatchObject({ allowed: true, remaining: 9 });
    await Promise.all([a.stop(), b.stop()]);
  });

  it('never admits more than the limit on one replica even when auth cannot be reached, and folds what it kept later', async () => {
    const auth = fakeAuth(5);
    const c = clock();
    const limiter = createRateLimiter({ fold: auth.fold, syncIntervalMs: 60_000, logger, now: c.now });
    auth.fail(true);
    for (let i = 0; i < 3; i++) limiter.check(team({ SEND_EMAIL: 5 }), 'SEND_EMAIL', 1);
    await limiter.sync();
    const late = Array.from({ length: 5 }, () => limiter.check(team({ SEND_EMAIL: 5 }), 'SEND_EMAIL', 1).allowed);
    expect(late).toEqual([true, true, false, false, false]);
    auth.fail(false);
    await limiter.sync();
    expect([...auth.shared.values()]).toEqual([5]);
    await limiter.stop();
  });

  it('takes the limit in force from auth at each fold (an operator change reaches every replica)', async () => {
    const auth = fakeAuth(2);
    const c = clock();
    const limiter = createRateLimiter({ fold: auth.fold, syncIntervalMs: 60_000, logger, now: c.now });
    expect(limiter.check(team({ SEND_EMAIL: 10 }), 'SEND_EMAIL', 1)).toMatchObject({ allowed: true, limit: 10 });
    await limiter.sync();
    expect(limiter.check(team({ SEND_EMAIL: 10 }), 'SEND_EMAIL', 1)).toMatchObject({ allowed: true, limit: 2, remaining: 0 });
    expect(limiter.check(team({ SEND_EMAIL: 10 }), 'SEND_EMAIL', 1).allowed).toBe(false);
    await limiter.stop();
  });

  it('drops windows that are over and folds only what changed or is current', async () => {
    const auth = fakeAuth(10);
    const c = clock();
    const limiter = createRateLimiter({ fold: auth.fold, syncIntervalMs: 60_000, logger, now: c.now });
    limiter.check(team(), 'SEND_EMAIL', 1);
    await limiter.sync();
    c.advance(60_000);
    await limiter.sync();
    await limiter.sync();
    // The first fold carried the count, later ones have nothing to send for the window that ended.
    expect(auth.calls.map((call) => call.length)).toEqual([1]);
    await limiter.stop();
  });
});
