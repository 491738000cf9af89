import { createLogger } from '@mailfleet/kit';
import { describe, expect, it } from 'vitest';
import { createBlockQuotaGate, type QuotaReserve } from '../../src/clients/upstreams.js';

const logger = createLogger({ service: 'quota-gate-test', level: 'silent' });

/** auth's quota in memory: reserves like Admit (no block beyond a tenth of the limit) and records releases. */
function fakeAuth(dailyLimit: number, startDay = new Date().toISOString().slice(0, 10)) {
  let used = 0;
  let day = startDay;
  const reserves: { min: number; max: number; granted: number }[] = [];
  const releases: { day: string; count: number }[] = [];
  const reserve: QuotaReserve = async (_teamId, min, max) => {
    const room = dailyLimit - used;
    const want = Math.min(max, min + Math.floor(dailyLimit / 10));
    const granted = min > room ? 0 : Math.min(want, room);
    used += granted;
    reserves.push({ min, max, granted });
    return { granted, day, dailyLimit, dailyRemaining: dailyLimit - used, monthlyLimit: -1 };
  };
  return {
    reserve,
    release: async (_teamId: string, d: string, count: number) => {
      releases.push({ day: d, count });
      if (d === day) used -= count;
    },
    reserves, releases,
    get used() { return used; },
    newDay(d: string) { day = d; used = 0; },
  };
}

describe('quota gate reserving blocks', () => {
  it('asks auth once per block, not once per send', async () => {
    const auth = fakeAuth(10_000);
    const gate = createBlockQuotaGate({ reserve: auth.reserve, release: auth.release, logger, block: 50 });
    for (let i = 0; i < 120; i++) expect(await gate.consume('team_1', 1)).toEqual({ allowed: true });
    expect(auth.reserves.length).toBe(3);
    expect(auth.reserves[0]).toEqual({ min: 1, max: 51, granted: 51 });
    await gate.stop();
    // What was reserved and not used goes back.
    expect(auth.releases).toEqual([{ day: new Date().toISOString().slice(0, 10), count: 153 - 120 }]);
    expect(auth.used).toBe(120);
  });

  it('a small quota stays exact: the send past it is refused naming the daily quota', async () => {
    const auth = fakeAuth(2);
    const gate = createBlockQuotaGate({ reserve: auth.reserve, release: auth.release, logger });
    expect(await gate.consume('team_1', 1)).toEqual({ allowed: true });
    expect(await gate.consume('team_1', 1)).toEqual({ allowed: true });
    expect(await gate.consume('team_1', 1)).toEqual({ allowed: false, quota: 'daily', limit: 2 });
    await gate.stop();
  });

  it('uses what it holds before asking for the rest, and keeps it when auth refuses', async () => {
    const auth = fakeAuth(100);
    const gate = createBlockQuotaGate({ reserve: auth.reserve, release: auth.release, logger });
    expect(await gate.consume('team_1', 1)).toEqual({ allowed: true }); // reserves 11, holds 10
    expect(await gate.consume('team_1', 95)).toEqual({ allowed: true }); // uses the 10, reserves the 85 it lacks and the 4 left
    expect(auth.reserves.at(-1)).toEqual({ min: 85, max: 185, granted: 89 });
    expect(await gate.consume('team_1', 5)).toEqual({ allowed: false, quota: 'daily', limit: 100 });
    // The 4 held units were put back: 4 sends need no call, the next is refused.
    const calls = auth.reserves.length;
    for (let i = 0; i < 4; i++) expect(await gate.consume('team_1', 1)).toEqual({ allowed: true });
    expect(auth.reserves.length).toBe(calls);
    expect(await gate.consume('team_1', 1)).toEqual({ allowed: false, quota: 'daily', limit: 100 });
    expect(auth.used).toBe(100);
    await gate.stop();
  });

  it('gives back a block left from an earlier day', async () => {
    let now = new Date('2026-11-23T23:59:00Z');
    const auth = fakeAuth(1_000, '2026-11-23');
    const gate = createBlockQuotaGate({ reserve: auth.reserve, release: auth.release, logger, now: () => now });
    await gate.consume('team_1', 1);
    now = new Date('2026-11-24T00:01:00Z');
    auth.newDay('2026-11-24');
    await gate.consume('team_1', 1);
    expect(auth.releases).toEqual([{ day: '2026-11-23', count: 100 }]);
    await gate.stop();
  });
});
