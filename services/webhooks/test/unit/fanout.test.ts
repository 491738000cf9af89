import type { EventEnvelope } from '@mailfleet/kit';
import { describe, expect, it } from 'vitest';
import { createFanoutHandler } from '../../src/events/fanout.consumer.js';
import { deliveryIdOf } from '../../src/repositories/deliveries.repository.js';
import { withSubscriptionCache } from '../../src/repositories/subscription-cache.js';
import { fakeDeliveries, fakeWebhooks, silentLogger } from './fakes.js';

const meta = { deliveryCount: 1, log: silentLogger };
const t0 = new Date('2026-01-01T00:00:00.000Z');
const later = '2026-01-01T00:01:00.000Z';

function event(type: string, over: Partial<EventEnvelope> = {}): EventEnvelope {
  return { id: `evt_${type}_${Math.random()}`, type, createdAt: later, teamId: 'team_a', data: { id: 'dom_1', name: 'x.test' }, ...over };
}

async function setup() {
  // The fan-out's subscription filter is the cache's; a lifetime of 0 reads the (fake) repository every time.
  const webhooks = withSubscriptionCache(fakeWebhooks(), { ttlMs: 0 });
  const deliveries = fakeDeliveries();
  let kicks = 0;
  const handler = createFanoutHandler({ webhooks, deliveries, onDeliveries: () => kicks++, now: () => new Date(later) });
  const base = { teamId: 'team_a', url: 'https://h.example/', description: null, secret: 'whsec_0123456789abcdef', createdAt: t0, createdByUserId: 'u' };
  await webhooks.create({ ...base, id: 'wh_domains', eventTypes: ['domain.created', 'domain.updated'] });
  await webhooks.create({ ...base, id: 'wh_email', eventTypes: ['email.sent'] });
  await webhooks.create({ ...base, id: 'wh_other_team', teamId: 'team_b', eventTypes: ['domain.created'] });
  return { webhooks, deliveries, handler, kicks: () => kicks };
}

describe('fan-out consumer', () => {
  it('makes one pending delivery per subscribed ACTIVE webhook of the team, payload without teamId', async () => {
    const s = await setup();
    const e = event('domain.created');
    await s.handler(e, meta);
    const rows = [...s.deliveries.rows.values()];
    expect(rows.map((r) => r.webhookId)).toEqual(['wh_domains']);
    expect(rows[0]).toMatchObject({ status: 'PENDING', attempt: 0, eventId: e.id, type: 'domain.created', teamId: 'team_a' });
    expect(JSON.parse(rows[0]!.payload)).toEqual({ id: e.id, type: 'domain.created', createdAt: later, data: e.data });
    expect(s.kicks()).toBe(1);
  });

  it('is idempotent on the event id: a redelivered event makes no second delivery', async () => {
    const s = await setup();
    const e = event('domain.updated');
    await s.handler(e, meta);
    await s.handler(e, { ...meta, deliveryCount: 2 });
    expect(s.deliveries.rows.size).toBe(1);
    expect(s.kicks()).toBe(1);
  });

  it('drops internal and unsubscribed types, paused webhooks and webhooks made after the event', async () => {
    const s = await setup();
    await s.handler(event('key.revoked'), meta);
    await s.handler(event('contact.unsubscribed'), meta);
    await s.handler(event('email.delivered'), meta);
    await s.webhooks.update('team_a', 'wh_email', { status: 'PAUSED' }, t0);
    await s.handler(event('email.sent'), meta);
    // An event from two minutes before the webhooks existed (a replay): beyond the clock-skew allowance.
    await s.handler(event('domain.created', { createdAt: '2025-12-31T23:58:00.000Z' }), meta);
    expect(s.deliveries.rows.size).toBe(0);
    expect(s.kicks()).toBe(0);
  });

  it('derives a delivery id from its (webhook, event) pair: the same for the same pair, shaped like any other id', () => {
    const id = deliveryIdOf('wh_1', 'evt_1');
    expect(id).toMatch(/^whd_[0-9A-Za-z]{22}$/);
    expect(deliveryIdOf('wh_1', 'evt_1')).toBe(id);
    expect(new Set([id, deliveryIdOf('wh_2', 'evt_1'), deliveryIdOf('wh_1', 'evt_2'), deliveryIdOf('wh_1e', 'vt_1')]).size).toBe(4);
  });
});
