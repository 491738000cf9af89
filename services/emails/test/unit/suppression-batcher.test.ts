import { describe, expect, it } from 'vitest';
import { createSuppressionBatcher } from '../../src/clients/suppression-batcher.js';
import type { SuppressionChecker } from '../../src/clients/upstreams.js';

function fake(suppressed: Record<string, string[]>, failing: string[] = []) {
  const calls: { teamId: string; addresses: string[] }[] = [];
  const checker: SuppressionChecker = {
    async suppressed(teamId, addresses) {
      calls.push({ teamId, addresses: [...addresses] });
      await new Promise((r) => setTimeout(r, 5));
      if (failing.includes(teamId)) throw new Error(`suppressions down for ${teamId}`);
      return new Set(addresses.map((a) => a.toLowerCase()).filter((a) => (suppressed[teamId] ?? []).includes(a)));
    },
  };
  return { checker, calls };
}

describe('suppression batcher', () => {
  it('concurrent checks share one call per team, and each caller learns only about its own addresses', async () => {
    const { checker, calls } = fake({ t1: ['a@x.org', 'c@x.org'], t2: ['a@x.org'] });
    const b = createSuppressionBatcher(checker, { lingerMs: 20 });
    const [one, two, three] = await Promise.all([
      b.suppressed('t1', ['a@x.org', 'b@x.org']),
      b.suppressed('t1', ['C@x.org']),
      b.suppressed('t2', ['a@x.org', 'c@x.org']),
    ]);
    expect([...one]).toEqual(['a@x.org']);
    expect([...two]).toEqual(['c@x.org']);
    expect([...three]).toEqual(['a@x.org']);
    expect(calls.map((c) => c.teamId).sort()).toEqual(['t1', 't2']);
    expect(calls.find((c) => c.teamId === 't1')!.addresses.sort()).toEqual(['C@x.org', 'a@x.org', 'b@x.org']);
  });

  it('a failed call fails the checks of its team only', async () => {
    const { checker } = fake({ ok: ['a@x.org'] }, ['down']);
    const b = createSuppressionBatcher(checker, { lingerMs: 20 });
    const [ok, down] = await Promise.allSettled([b.suppressed('ok', ['a@x.org']), b.suppressed('down', ['a@x.org'])]);
    expect(ok).toMatchObject({ status: 'fulfilled' });
    expect(down).toMatchObject({ status: 'rejected', reason: { message: 'suppressions down for down' } });
  });

  it('asks nothing for no addresses', async () => {
    const { checker, calls } = fake({});
    expect((await createSuppressionBatcher(checker).suppressed('t1', [])).size).toBe(0);
    expect(calls).toHaveLength(0);
  });
});
