import { describe, expect, it } from 'vitest';
import { withSubscriptionCache } from '../../src/repositories/subscription-cache.js';
import type { WebhooksRepository } from '../../src/repositories/webhooks.repository.js';
import { fakeWebhooks } from './fakes.js';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const after = new Date('2026-01-01T00:05:00.000Z');
const base = { url: 'https://h.example/', description: null, secret: 'whsec_0123456789abcdef', createdAt: t0, createdByUserId: 'u' };

function setup(opts: { ttlMs?: number } = {}) {
  const stored = fakeWebhooks();
  let lookups = 0;
  let failNext = false;
  const counting: WebhooksRepository = {
    ...stored,
    async active(teamId) {
      lookups++;
      if (failNext) {
        failNext = false;
        throw new Error('database away');
      }
      return stored.active(teamId);
    },
  };
  let clock = 1_000;
  const announced: string[] = [];
  const cache = withSubscriptionCache(counting, { ttlMs: opts.ttlMs ?? 30_000, broadcast: (t) => announced.push(t), now: () => clock });
  return {
    stored, cache, announced, lookups: () => lookups, failNext: () => { failNext = true; },
    advance: (ms: number) => { clock += ms; },
  };
}
const ids = (hooks: { id: string }[]) => hooks.map((h) => h.id).sort();

describe('subscription cache', () => {
  it('answers from memory after the first lookup of a team, filtering by type and creation time', async () => {
    const s = setup();
    await s.cache.create({ ...base, id: 'wh_a', teamId: 't1', eventTypes: ['email.sent', 'email.delivered'] });
    await s.cache.create({ ...base, id: 'wh_b', teamId: 't1', eventTypes: ['email.sent'], createdAt: after });
    await s.cache.create({ ...base, id: 'wh_other', teamId: 't2', eventTypes: ['email.sent'] });
    expect(ids(await s.cache.subscribed('t1', 'email.sent', after))).toEqual(['wh_a', 'wh_b']);
    expect(ids(await s.cache.subscribed('t1', 'email.sent', t0))).toEqual(['wh_a']);
    expect(ids(await s.cache.subscribed('t1', 'email.delivered', after))).toEqual(['wh_a']);
    expect(ids(await s.cache.subscribed('t1', 'email.opened', after))).toEqual([]);
    expect(s.lookups()).toBe(1);
    expect(ids(await s.cache.subscribed('t2', 'email.sent', after))).toEqual(['wh_other']);
    expect(s.lookups()).toBe(2);
  });

  it('sees a change made through it at once, and announces it for the other replicas', async () => {
    const s = setup();
    expect(await s.cache.subscribed('t1', 'email.sent', after)).toEqual([]);
    const made = await s.cache.create({ ...base, id: 'wh_a', teamId: 't1', eventTypes: ['email.sent'] });
    expect(ids(await s.cache.subscribed('t1', 'email.sent', after))).toEqual(['wh_a']);
    await s.cache.update('t1', made.id, { eventTypes: ['email.delivered'] }, after);
    expect(ids(await s.cache.subscribed('t1', 'email.sent', after))).toEqual([]);
    expect(ids(await s.cache.subscribed('t1', 'email.delivered', after))).toEqual(['wh_a']);
    await s.cache.update('t1', made.id, { status: 'PAUSED' }, after);
    expect(await s.cache.subscribed('t1', 'email.delivered', after)).toEqual([]);
    await s.cache.update('t1', made.id, { status: 'ACTIVE', resetFailures: true }, after);
    expect(ids(await s.cache.subscribed('t1', 'email.delivered', after))).toEqual(['wh_a']);
    await s.cache.delete('t1', made.id);
    expect(await s.cache.subscribed('t1', 'email.delivered', after)).toEqual([]);
    expect(s.announced).toEqual(['t1', 't1', 't1', 't1', 't1']);
  });

  it('drops a webhook that turned FAILED, and only then announces', async () => {
    const s = setup();
    await s.cache.create({ ...base, id: 'wh_a', teamId: 't1', eventTypes: ['email.sent'] });
    expect(ids(await s.cache.subscribed('t1', 'email.sent', after))).toEqual(['wh_a']);
    await s.cache.recordFailure('t1', 'wh_a', after, true, 2);
    expect(s.announced).toEqual(['t1']);
    await s.cache.recordFailure('t1', 'wh_a', after, true, 2);
    expect(s.announced).toEqual(['t1', 't1']);
    expect(await s.cache.subscribed('t1', 'email.sent', after)).toEqual([]);
  });

  it('forgets a team on a note from another replica, and every team after its lifetime', async () => {
    const s = setup({ ttlMs: 10_000 });
    await s.cache.subscribed('t1', 'email.sent', after);
    // Written by another replica: this one does not know until told, or until the entry ages out.
    await s.stored.create({ ...base, id: 'wh_a', teamId: 't1', eventTypes: ['email.sent'] });
    expect(await s.cache.subscribed('t1', 'email.sent', after)).toEqual([]);
    s.cache.invalidate('t1');
    expect(ids(await s.cache.subscribed('t1', 'email.sent', after))).toEqual(['wh_a']);
    await s.stored.create({ ...base, id: 'wh_b', teamId: 't1', eventTypes: ['email.sent'] });
    s.advance(9_999);
    expect(ids(await s.cache.subscribed('t1', 'email.sent', after))).toEqual(['wh_a']);
    s.advance(1);
    expect(ids(await s.cache.subscribed('t1', 'email.sent', after))).toEqual(['wh_a', 'wh_b']);
    await s.stored.create({ ...base, id: 'wh_c', teamId: 't1', eventTypes: ['email.sent'] });
    s.cache.clear();
    expect(ids(await s.cache.subscribed('t1', 'email.sent', after))).toEqual(['wh_a', 'wh_b', 'wh_c']);
  });

  it('keeps no failed lookup, and no answer a change overtook', async () => {
    const s = setup();
    s.failNext();
    await expect(s.cache.subscribed('t1', 'email.sent', after)).rejects.toThrow('database away');
    expect(await s.cache.subscribed('t1', 'email.sent', after)).toEqual([]);
    expect(s.lookups()).toBe(2);

    s.cache.invalidate('t1');
    const inFlight = s.cache.subscribed('t1', 'email.sent', after);
    s.cache.invalidate('t1');
    await s.stored.create({ ...base, id: 'wh_a', teamId: 't1', eventTypes: ['email.sent'] });
    await inFlight;
    expect(ids(await s.cache.subscribed('t1', 'email.sent', after))).toEqual(['wh_a']);
  });

  it('with a lifetime of 0 asks the database every time', async () => {
    const s = setup({ ttlMs: 0 });
    await s.cache.subscribed('t1', 'email.sent', after);
    await s.cache.subscribed('t1', 'email.sent', after);
    expect(s.lookups()).toBe(2);
  });
});
