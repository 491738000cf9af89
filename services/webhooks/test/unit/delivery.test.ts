import { createHmac } from 'node:crypto';
import { createLogger } from '@mailfleet/kit';
import { describe, expect, it } from 'vitest';
import type { AttemptResult } from '../../src/domain/retry-policy.js';
import { createDeliverer } from '../../src/workers/deliverer.js';
import { createDeliveryWorker, createPaceMeter } from '../../src/workers/delivery.worker.js';
import { failure, fakeDeliveries, fakeEndpoint, fakeWebhooks, silentLogger, success, type PostCall } from './fakes.js';

const policy = { maxAttempts: 3, baseDelayMs: 1_000, maxDelayMs: 10_000, failureThreshold: 2 };
const SECRET = 'whsec_0123456789abcdefghij';

async function setup(answer?: (c: PostCall) => AttemptResult | Promise<AttemptResult>) {
  let clock = new Date('2026-01-01T00:00:00.000Z');
  const now = () => clock;
  const webhooks = fakeWebhooks();
  const deliveries = fakeDeliveries();
  const endpoint = fakeEndpoint(answer);
  const deliverer = createDeliverer({ webhooks, deliveries, endpoint: endpoint.client, policy, logger: silentLogger, now, random: () => 0.5 });
  await webhooks.create({
    id: 'wh_1', teamId: 'team_a', url: 'https://hooks.example.com/in', description: null, eventTypes: ['domain.created'], secret: SECRET,
    createdAt: clock, createdByUserId: 'u',
  });
  const addEvent = async (eventId: string, webhookId = 'wh_1') => {
    await deliveries.createPending({
      teamId: 'team_a', webhookId, eventId, type: 'domain.created', payload: `{"id":"${eventId}","type":"domain.created","createdAt":"x","data":{}}`, now: clock,
    });
  };
  const claim = () => deliveries.claimDue(now(), 60_000, []);
  const advance = (ms: number) => {
    clock = new Date(clock.getTime() + ms);
  };
  return { webhooks, deliveries, endpoint, deliverer, addEvent, claim, advance, now };
}

describe('deliverer', () => {
  it('posts the stored body signed with the secret and records the success', async () => {
    const s = await setup();
    await s.addEvent('evt_1');
    const record = await s.deliverer.attempt((await s.claim())!);
    expect(record).toMatchObject({ status: 'SUCCESS', attempt: 1, nextAttemptAt: null, lastError: null, responseStatus: 200, responseText: 'ok' });
    const call = s.endpoint.calls[0]!;
    expect(call.target.url).toBe('https://hooks.example.com/in');
    expect(call.headers['X-Service-Signature']).toBe(`sha256=${createHmac('sha256', SECRET).update(call.body).digest('hex')}`);
    expect(call.headers['X-Service-Event-Id']).toBe('evt_1');
    expect((await s.webhooks.get('team_a', 'wh_1'))!.lastSuccessAt).toEqual(s.now());
  });

  it('retries with backoff, counts the event once it failed every attempt, and turns the webhook FAILED at the threshold', async () => {
    const s = await setup(() => failure(503));
    await s.addEvent('evt_1');
    await s.addEvent('evt_2');
    const first = await s.deliverer.attempt((await s.claim())!);
    expect(first).toMatchObject({ status: 'PENDING', attempt: 1, lastError: 'receiver answered 503', responseStatus: 503 });
    expect(first!.nextAttemptAt!.getTime() - s.now().getTime()).toBe(1_000);
    expect((await s.webhooks.get('team_a', 'wh_1'))).toMatchObject({ consecutiveFailures: 0, lastFailureAt: s.now() });

    for (let i = 0; i < 10; i++) {
      s.advance(5_000);
      let c;
      while ((c = await s.claim())) await s.deliverer.attempt(c);
    }
    const rows = [...s.deliveries.rows.values()];
    expect(rows.map((r) => [r.status, r.attempt])).toEqual([['FAILED', 3], ['FAILED', 3]]);
    expect(s.endpoint.calls).toHaveLength(6);
    expect(await s.webhooks.get('team_a', 'wh_1')).toMatchObject({ status: 'FAILED', consecutiveFailures: 2 });
  });

  it('a success resets the consecutive failures', async () => {
    let fail = true;
    const s = await setup(() => (fail ? failure() : success()));
    await s.addEvent('evt_1');
    for (let i = 0; i < 3; i++) {
      s.advance(10_000);
      const c = await s.claim();
      if (c) await s.deliverer.attempt(c);
    }
    expect((await s.webhooks.get('team_a', 'wh_1'))!.consecutiveFailures).toBe(1);
    fail = false;
    await s.addEvent('evt_2');
    await s.deliverer.attempt((await s.claim())!);
    expect(await s.webhooks.get('team_a', 'wh_1')).toMatchObject({ status: 'ACTIVE', consecutiveFailures: 0 });
  });

  it('holds deliveries of a paused webhook without an attempt, and cancels those of a deleted one', async () => {
    const s = await setup();
    await s.addEvent('evt_1');
    await s.webhooks.update('team_a', 'wh_1', { status: 'PAUSED' }, s.now());
    expect(await s.deliverer.attempt((await s.claim())!)).toBeUndefined();
    expect(s.endpoint.calls).toHaveLength(0);
    expect(await s.claim()).toBeUndefined();
    await s.webhooks.update('team_a', 'wh_1', { status: 'ACTIVE' }, s.now());
    await s.deliveries.unpark('wh_1');
    expect(await s.deliverer.attempt((await s.claim())!)).toMatchObject({ status: 'SUCCESS' });

    await s.addEvent('evt_2');
    await s.webhooks.delete('team_a', 'wh_1');
    expect(await s.deliverer.attempt((await s.claim())!)).toMatchObject({ status: 'FAILED', attempt: 0, lastError: 'cancelled: webhook deleted' });
    expect(s.endpoint.calls).toHaveLength(1);
  });

  it('records nothing when the claim was lost meanwhile', async () => {
    const s = await setup();
    await s.addEvent('evt_1');
    const claim = (await s.claim())!;
    const stolen = { ...claim, leaseToken: 'someone-else' };
    expect(await s.deliverer.attempt(stolen)).toBeUndefined();
    expect((await s.webhooks.get('team_a', 'wh_1'))!.lastSuccessAt).toBeNull();
  });
});

describe('delivery worker', () => {
  it('attempts deliveries handed over by the fan-out without claiming them, and releases what it did not attempt', async () => {
    const s = await setup();
    const claimed: number[] = [];
    const released: string[] = [];
    const deliveries = {
      ...s.deliveries,
      claimDueMany: async (...args: Parameters<typeof s.deliveries.claimDueMany>) => {
        const out = await s.deliveries.claimDueMany(...args);
        claimed.push(out.length);
        return out;
      },
      releaseMany: async (claims: Parameters<typeof s.deliveries.releaseMany>[0]) => {
        released.push(...claims.map((c) => c.record.eventId));
        await s.deliveries.releaseMany(claims);
      },
    };
    const deliverer = createDeliverer({ webhooks: s.webhooks, deliveries, endpoint: s.endpoint.client, policy, logger: silentLogger, now: () => new Date(), random: () => 0.5 });
    const worker = createDeliveryWorker({
      deliveries, deliverer, concurrency: 8, perWebhookConcurrency: 2, roundSize: 4, leaseMs: 60_000, pollIntervalMs: 20,
      handOffMaxAgeMs: 10_000, handOffLimit: 6, logger: silentLogger, now: () => new Date(),
    });
    const handOff = worker.handOff!;
    expect(handOff.leaseMs).toBe(60_000);
    const input = (eventId: string, at = new Date()) => ({
      teamId: 'team_a', webhookId: 'wh_1', eventId, type: 'domain.created', payload: `{"id":"${eventId}"}`, now: at,
    });
    // Not started: no room, the fan-out stores deliveries free.
    expect(handOff.room()).toBe(0);
    worker.start();
    expect(handOff.room()).toBe(6);
    // One handed over too long after its lease began is released to the queue, not attempted on a lapsing lease.
    const old = await s.deliveries.createClaimedMany([input('evt_old', new Date(Date.now() - 20_000))], new Date(Date.now() - 20_000), 60_000);
    handOff.adopt(old);
    handOff.adopt(await s.deliveries.createClaimedMany([input('evt_1'), input('evt_2'), input('evt_3')], new Date(), 60_000));
    try {
      await expect.poll(() => [...s.deliveries.rows.values()].filter((r) => r.status === 'SUCCESS').length, { timeout: 5_000 }).toBe(4);
      expect(released).toEqual(['evt_old']);
      // Each delivery once; the released one went through a claim from the queue, the others through none.
      expect(s.endpoint.calls.map((c) => JSON.parse(c.body).id).sort()).toEqual(['evt_1', 'evt_2', 'evt_3', 'evt_old']);
    } finally {
      await worker.stop();
    }
    // Handed over after the stop: released at once, never attempted here.
    handOff.adopt(await s.deliveries.createClaimedMany([input('evt_late')], new Date(), 60_000));
    expect(handOff.room()).toBe(0);
    await expect.poll(() => released.includes('evt_late')).toBe(true);
    expect(s.endpoint.calls).toHaveLength(4);
    expect([...s.deliveries.rows.values()].find((r) => r.eventId === 'evt_late')).toMatchObject({ status: 'PENDING', leaseUntil: 0 });
    expect(claimed.some((n) => n > 0)).toBe(true);
  });

  it('holds more handed deliveries while its recent pace starts them in time, and falls back to the floor', async () => {
    const s = await setup();
    const deliverer = createDeliverer({ webhooks: s.webhooks, deliveries: s.deliveries, endpoint: s.endpoint.client, policy, logger: silentLogger, now: s.now, random: () => 0.5 });
    const worker = createDeliveryWorker({
      deliveries: s.deliveries, deliverer, concurrency: 8, perWebhookConcurrency: 4, roundSize: 8, leaseMs: 60_000, pollIntervalMs: 20,
      handOffMaxAgeMs: 20_000, handOffLimit: 2, logger: silentLogger, now: s.now,
    });
    const input = (eventId: string) => ({ teamId: 'team_a', webhookId: 'wh_1', eventId, type: 'domain.created', payload: `{"id":"${eventId}"}`, now: s.now() });
    worker.start();
    try {
      // No pace yet: the floor.
      expect(worker.handOff!.room()).toBe(2);
      worker.handOff!.adopt(await s.deliveries.createClaimedMany(Array.from({ length: 10 }, (_, i) => input(`evt_${i}`)), s.now(), 60_000));
      await expect.poll(() => s.endpoint.calls.length, { timeout: 5_000 }).toBe(10);
      // 10 started in the 5 s window: 2 a second, so three quarters of 20 s of allowed wait hold 30.
      expect(worker.handOff!.room()).toBe(30);
      // The window passed with nothing started: back to the floor.
      s.advance(6_000);
      expect(worker.handOff!.room()).toBe(2);
    } finally {
      await worker.stop();
    }
  });

  it('measures its pace in one-second buckets over the window', () => {
    const pace = createPaceMeter(5_000);
    expect(pace.perSecond(10_000)).toBe(0);
    pace.add(10, 10_000);
    pace.add(15, 12_500);
    expect(pace.perSecond(12_900)).toBe(5);
    // The first bucket (second 10) leaves the window once second 15 begins.
    expect(pace.perSecond(14_999)).toBe(5);
    expect(pace.perSecond(15_000)).toBe(3);
    expect(pace.perSecond(18_000)).toBe(0);
  });

  it('a delivery waiting in the queue goes before younger ones the fan-out hands over meanwhile', async () => {
    let open: () => void = () => undefined;
    const blocked = new Promise<void>((resolve) => {
      open = resolve;
    });
    const s = await setup(async (call) => {
      if (JSON.parse(call.body).id === 'evt_first') await blocked;
      return success();
    });
    const deliverer = createDeliverer({ webhooks: s.webhooks, deliveries: s.deliveries, endpoint: s.endpoint.client, policy, logger: silentLogger, now: () => new Date(), random: () => 0.5 });
    const worker = createDeliveryWorker({
      deliveries: s.deliveries, deliverer, concurrency: 1, perWebhookConcurrency: 1, roundSize: 1, leaseMs: 60_000, pollIntervalMs: 20,
      handOffMaxAgeMs: 30_000, handOffLimit: 10, logger: silentLogger, now: () => new Date(),
    });
    const input = (eventId: string, at: Date) => ({
      teamId: 'team_a', webhookId: 'wh_1', eventId, type: 'domain.created', payload: `{"id":"${eventId}"}`, now: at,
    });
    worker.start();
    try {
      // The worker is busy with one delivery while the fan-out, out of room, stores one free (it waits in the
      // queue) and then, with room again, hands over two younger ones.
      worker.handOff!.adopt(await s.deliveries.createClaimedMany([input('evt_first', new Date())], new Date(), 60_000));
      await expect.poll(() => s.endpoint.calls.length).toBe(1);
      await s.deliveries.createPending(input('evt_queued', new Date(Date.now() - 5_000)));
      worker.handOff!.adopt(await s.deliveries.createClaimedMany([input('evt_young_1', new Date()), input('evt_young_2', new Date())], new Date(), 60_000));
      open();
      await expect.poll(() => s.endpoint.calls.length, { timeout: 5_000 }).toBe(4);
      expect(s.endpoint.calls.map((c) => JSON.parse(c.body).id)).toEqual(['evt_first', 'evt_queued', 'evt_young_1', 'evt_young_2']);
    } finally {
      await worker.stop();
    }
  });

  it('one slow endpoint never holds up the others', async () => {
    const gates: (() => void)[] = [];
    const s = await setup(async (call) => {
      if (call.target.host === 'slow.example.com') await new Promise<void>((r) => gates.push(r));
      return success();
    });
    await s.webhooks.create({
      id: 'wh_slow', teamId: 'team_a', url: 'https://slow.example.com/', description: null, eventTypes: ['domain.created'], secret: SECRET,
      createdAt: s.now(), createdByUserId: 'u',
    });
    for (let i = 0; i < 10; i++) await s.addEvent(`evt_slow_${i}`, 'wh_slow');
    for (let i = 0; i < 5; i++) await s.addEvent(`evt_fast_${i}`);
    const worker = createDeliveryWorker({
      deliveries: s.deliveries, deliverer: s.deliverer, concurrency: 4, perWebhookConcurrency: 2, leaseMs: 60_000, pollIntervalMs: 20,
      logger: silentLogger, now: () => new Date(),
    });
    worker.start();
    try {
      await expect.poll(() => [...s.deliveries.rows.values()].filter((r) => r.webhookId === 'wh_1' && r.status === 'SUCCESS').length, { timeout: 5_000 }).toBe(5);
      // The slow webhook holds at most its cap, though it had ten due deliveries first.
      expect(s.endpoint.calls.filter((c) => c.target.host === 'slow.example.com')).toHaveLength(2);
    } finally {
      const stopping = worker.stop();
      const release = setInterval(() => gates.splice(0).forEach((g) => g()), 5);
      await stopping;
      clearInterval(release);
    }
  });

  it('claims a webhook\'s free slots as one round, posts them together and records each round with one bulk write', async () => {
    let inFlight = 0;
    let most = 0;
    const s = await setup(async () => {
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setTimeout(r, 20));
      inFlight--;
      return success();
    });
    for (let i = 0; i < 10; i++) await s.addEvent(`evt_round_${i}`);
    const rounds: number[] = [];
    let successWrites = 0;
    const deliveries = { ...s.deliveries, finishMany: (items: Parameters<typeof s.deliveries.finishMany>[0], at: Date) => {
      rounds.push(items.length);
      return s.deliveries.finishMany(items, at);
    } };
    const webhooks = { ...s.webhooks, recordSuccess: (...a: Parameters<typeof s.webhooks.recordSuccess>) => {
      successWrites++;
      return s.webhooks.recordSuccess(...a);
    } };
    const deliverer = createDeliverer({ webhooks, deliveries, endpoint: s.endpoint.client, policy, logger: silentLogger, now: () => new Date(), random: () => 0.5 });
    const worker = createDeliveryWorker({
      deliveries, deliverer, concurrency: 32, perWebhookConcurrency: 5, leaseMs: 60_000, pollIntervalMs: 20, logger: silentLogger, now: () => new Date(),
    });
    worker.start();
    try {
      await expect.poll(() => [...s.deliveries.rows.values()].filter((r) => r.status === 'SUCCESS').length, { timeout: 5_000 }).toBe(10);
    } finally {
      await worker.stop();
    }
    expect(rounds).toEqual([5, 5]);
    // The second round ends under SUCCESS_WRITE_GRANULARITY_MS after the first's success was written: no second write.
    expect(successWrites).toBe(1);
    expect((await s.webhooks.get('team_a', 'wh_1'))!.lastSuccessAt).toBeInstanceOf(Date);
    expect(most).toBe(5);
    expect(s.endpoint.calls).toHaveLength(10);
  });

  it('a round larger than the webhook\'s concurrency is claimed and recorded as one, its posts at most that many at a time', async () => {
    let inFlight = 0;
    let most = 0;
    const s = await setup(async () => {
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setTimeout(r, 10));
      inFlight--;
      return success();
    });
    for (let i = 0; i < 12; i++) await s.addEvent(`evt_big_round_${i}`);
    const rounds: number[] = [];
    const deliveries = { ...s.deliveries, finishMany: (items: Parameters<typeof s.deliveries.finishMany>[0], at: Date) => {
      rounds.push(items.length);
      return s.deliveries.finishMany(items, at);
    } };
    const deliverer = createDeliverer({ webhooks: s.webhooks, deliveries, endpoint: s.endpoint.client, policy, logger: silentLogger, now: () => new Date(), random: () => 0.5 });
    const worker = createDeliveryWorker({
      deliveries, deliverer, concurrency: 32, perWebhookConcurrency: 3, roundSize: 12, leaseMs: 60_000, pollIntervalMs: 20,
      logger: silentLogger, now: () => new Date(),
    });
    worker.start();
    try {
      await expect.poll(() => [...s.deliveries.rows.values()].filter((r) => r.status === 'SUCCESS').length, { timeout: 5_000 }).toBe(12);
    } finally {
      await worker.stop();
    }
    expect(rounds).toEqual([12]);
    expect(most).toBe(3);
    expect(s.endpoint.calls).toHaveLength(12);
  });

  it('a round keeps the webhook\'s health in the order the attempts ended', async () => {
    // Claimed in the order success, failure, failure, but they end failure, failure, success: the success came last,
    // so no failed event counts, and the failures before it still move lastFailureAt.
    const plan = new Map([['evt_h1', { ms: 40, ok: true }], ['evt_h2', { ms: 5, ok: false }], ['evt_h3', { ms: 15, ok: false }]]);
    const s = await setup(async (call) => {
      const p = plan.get(call.headers['X-Service-Event-Id']!)!;
      await new Promise((r) => setTimeout(r, p.ms));
      return p.ok ? success() : failure();
    });
    const deliverer = createDeliverer({
      webhooks: s.webhooks, deliveries: s.deliveries, endpoint: s.endpoint.client, policy: { ...policy, maxAttempts: 1 }, logger: silentLogger,
    });
    for (const id of plan.keys()) await s.addEvent(id);
    const round = await s.deliveries.claimDueMany(s.now(), 60_000, [], () => 3);
    expect(round.map((c) => c.record.eventId)).toEqual(['evt_h1', 'evt_h2', 'evt_h3']);
    const records = await deliverer.attemptMany(round);
    expect(records.map((r) => r?.status)).toEqual(['SUCCESS', 'FAILED', 'FAILED']);
    const w = (await s.webhooks.get('team_a', 'wh_1'))!;
    expect(w.consecutiveFailures).toBe(0);
    expect(w.lastFailureAt).not.toBeNull();
    expect(w.lastSuccessAt!.getTime()).toBeGreaterThanOrEqual(w.lastFailureAt!.getTime());
  });

  it('a round logs each failure with its delivery, and each success only when debug lines are on', async () => {
    const roundAt = async (level: 'info' | 'debug') => {
      const lines: Record<string, unknown>[] = [];
      const logger = createLogger({ service: 'webhooks-unit', level, destination: { write: (line: string) => lines.push(JSON.parse(line)) } });
      const s = await setup((call) => (call.headers['X-Service-Event-Id'] === 'evt_ok' ? success() : failure(503)));
      const deliverer = createDeliverer({ webhooks: s.webhooks, deliveries: s.deliveries, endpoint: s.endpoint.client, policy, logger });
      await s.addEvent('evt_ok');
      await s.addEvent('evt_bad');
      const round = await s.deliveries.claimDueMany(s.now(), 60_000, [], () => 2);
      expect((await deliverer.attemptMany(round)).map((r) => r?.status)).toEqual(['SUCCESS', 'PENDING']);
      const ids = new Map(round.map((c) => [c.record.eventId, c.record.id]));
      return { lines, ids };
    };
    const fieldsOf = (eventId: string, ids: Map<string, string>) => ({
      deliveryId: ids.get(eventId), webhookId: 'wh_1', eventId, eventType: 'domain.created',
    });

    const info = await roundAt('info');
    expect(info.lines.filter((l) => l['msg'] === 'webhook attempt failed')).toEqual([
      expect.objectContaining({ ...fieldsOf('evt_bad', info.ids), attempt: 1, status: 503, error: 'receiver answered 503' }),
    ]);
    expect(info.lines.filter((l) => l['msg'] === 'webhook delivered')).toEqual([]);

    const debug = await roundAt('debug');
    expect(debug.lines.filter((l) => l['msg'] === 'webhook attempt failed')).toEqual([expect.objectContaining(fieldsOf('evt_bad', debug.ids))]);
    expect(debug.lines.filter((l) => l['msg'] === 'webhook delivered')).toEqual([
      expect.objectContaining({ ...fieldsOf('evt_ok', debug.ids), attempt: 1, status: 200 }),
    ]);
  });

  it('a kick starts due deliveries at once', async () => {
    const s = await setup();
    const worker = createDeliveryWorker({
      deliveries: s.deliveries, deliverer: s.deliverer, concurrency: 4, perWebhookConcurrency: 2, leaseMs: 60_000, pollIntervalMs: 60_000,
      logger: silentLogger, now: () => new Date(),
    });
    worker.start();
    try {
      await new Promise((r) => setTimeout(r, 50));
      await s.deliveries.createPending({ teamId: 'team_a', webhookId: 'wh_1', eventId: 'evt_k', type: 'domain.created', payload: '{}', now: new Date() });
      worker.kick();
      await expect.poll(() => s.endpoint.calls.length, { timeout: 2_000 }).toBe(1);
    } finally {
      await worker.stop();
    }
  });
});
