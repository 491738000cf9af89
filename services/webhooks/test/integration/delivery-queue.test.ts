import { testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type Db } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeliveriesRepository, LOOK_LIMIT, type ClaimedDelivery, type DeliveriesRepository } from '../../src/repositories/deliveries.repository.js';

// The delivery queue on FerretDB: claims find due work among thousands of delivered records, a crashed
// claim is taken again once its lease lapses, and two replicas never hold (or finish) one delivery twice.
const dbName = uniqueDbName('webhooks_queue');
/** A database of its own for the race, where claims are quick: more of them overlap. */
const raceDbName = uniqueDbName('webhooks_race');
const DELIVERED = 2_000;
const LOOK_MS = 100;
let mongoA: MongoClient;
let mongoB: MongoClient;
let db: Db;
let repoA: DeliveriesRepository;
let repoB: DeliveriesRepository;
let raceA: DeliveriesRepository;
let raceB: DeliveriesRepository;

const success = { status: 'SUCCESS' as const, lastError: null, nextAttemptAt: null, responseStatus: 200, responseTimeMs: 3, responseText: 'ok' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * Times of a test's own, so a lease or a retry delay ends when the test says, however slow the store is. They start
 * a few seconds back: no replica's view is ever ahead of the real clock that the other tests claim by.
 */
function pastClock(): (ms: number) => Date {
  const t0 = Date.now() - 5_000;
  return (ms) => new Date(t0 + ms);
}

async function createPending(repo: DeliveriesRepository, webhookId: string, eventId: string, now = new Date()): Promise<void> {
  expect(await repo.createPending({ teamId: 'team_q', webhookId, eventId, type: 'email.sent', payload: `{"id":"${eventId}"}`, now })).toBe(true);
}

/** Claims everything due for the given webhooks until nothing is left. */
async function drain(repo: DeliveriesRepository, exclude: string[] = []): Promise<ClaimedDelivery[]> {
  const out: ClaimedDelivery[] = [];
  for (let c = await repo.claimDue(new Date(), 30_000, exclude); c; c = await repo.claimDue(new Date(), 30_000, exclude)) out.push(c);
  return out;
}

beforeAll(async () => {
  mongoA = new MongoClient(testMongoUrl());
  mongoB = new MongoClient(testMongoUrl());
  db = mongoA.db(dbName);
  // A short look window: these tests move between replicas faster than the default 5 s.
  repoA = createDeliveriesRepository(db, { lookMaxAgeMs: LOOK_MS });
  repoB = createDeliveriesRepository(mongoB.db(dbName), { lookMaxAgeMs: LOOK_MS });
  await repoA.ensureIndexes();
  raceA = createDeliveriesRepository(mongoA.db(raceDbName));
  raceB = createDeliveriesRepository(mongoB.db(raceDbName));
  await raceA.ensureIndexes();
  // Thirty days of delivered records, as the retention keeps them.
  const old = new Date(Date.now() - 86_400_000);
  for (let i = 0; i < DELIVERED; i += 500) {
    await db.collection('deliveries').insertMany(Array.from({ length: 500 }, (_, j) => ({
      _id: `whd_done_${i + j}`, teamId: 'team_q', webhookId: `wh_done_${(i + j) % 7}`, eventId: `evt_done_${i + j}`, type: 'email.sent',
      payload: '{}', status: 'SUCCESS', attempt: 1, nextAttemptAt: null, lastError: null, responseStatus: 200, responseTimeMs: 5,
      responseText: 'ok', createdAt: old, updatedAt: old, leaseUntil: new Date(0),
    })) as never);
  }
});

afterAll(async () => {
  await db?.dropDatabase();
  await mongoA?.db(raceDbName).dropDatabase();
  await mongoA?.close();
  await mongoB?.close();
});

describe('delivery queue', () => {
  it('claims due work among thousands of delivered records, oldest first, never a delivered one', async () => {
    expect(await repoA.claimDue(new Date(), 30_000, [])).toBeUndefined();
    const t = Date.now();
    await createPending(repoA, 'wh_a', 'evt_a1', new Date(t - 2_000));
    await createPending(repoA, 'wh_a', 'evt_a2', new Date(t - 1_000));
    await createPending(repoA, 'wh_b', 'evt_b1', new Date(t - 500));
    // A redelivered event makes no second delivery and leaves nothing queued.
    expect(await repoA.createPending({ teamId: 'team_q', webhookId: 'wh_a', eventId: 'evt_a1', type: 'email.sent', payload: '{}', now: new Date() })).toBe(false);

    // A webhook at its cap is skipped.
    const first = await repoA.claimDue(new Date(), 30_000, ['wh_a']);
    expect(first?.record.eventId).toBe('evt_b1');
    const rest = await drain(repoA);
    expect(rest.map((c) => c.record.eventId)).toEqual(['evt_a1', 'evt_a2']);
    for (const c of [first!, ...rest]) expect((await repoA.finish(c, { ...success, attempt: 1 }, new Date()))?.status).toBe('SUCCESS');
    expect(await repoA.claimDue(new Date(), 30_000, [])).toBeUndefined();
    expect(await repoA.nextDueAt(new Date(), [])).toBeUndefined();
    expect(await db.collection('delivery_queue').countDocuments({})).toBe(0);
  });

  it('retries a delivery whose worker crashed once the lease lapses, first, and the lost claim records nothing', async () => {
    const at = pastClock();
    await createPending(repoA, 'wh_c', 'evt_c1', at(0));
    const crashed = await repoA.claimDue(at(0), 400, []);
    expect(crashed?.record.eventId).toBe('evt_c1');
    // Leased: nobody else gets it meanwhile.
    expect(await repoB.claimDue(at(200), 30_000, [])).toBeUndefined();
    // A delivery that falls due meanwhile waits behind it: the crashed one keeps its place, most overdue first.
    await createPending(repoA, 'wh_c', 'evt_c2', at(200));
    const again = await repoB.claimDue(at(500), 30_000, []);
    expect(again?.record.id).toBe(crashed!.record.id);
    const next = await repoB.claimDue(at(500), 30_000, []);
    expect(next?.record.eventId).toBe('evt_c2');
    await repoB.finish(next!, { ...success, attempt: 1 }, new Date());
    expect(await repoA.finish(crashed!, { ...success, attempt: 1 }, new Date())).toBeUndefined();
    expect((await repoB.finish(again!, { ...success, attempt: 1 }, new Date()))?.status).toBe('SUCCESS');
    expect(await repoA.claimDue(new Date(), 30_000, [])).toBeUndefined();
  });

  it('schedules retries, holds parked deliveries until activation, and requeues pending ones that lost their entry', async () => {
    const at = pastClock();
    await createPending(repoA, 'wh_d', 'evt_d1', at(0));
    const c1 = await repoA.claimDue(at(0), 30_000, []);
    await repoA.finish(c1!, { ...success, status: 'PENDING', attempt: 1, nextAttemptAt: at(300), lastError: 'receiver answered 500', responseStatus: 500 }, at(0));
    expect(await repoA.claimDue(at(100), 30_000, [])).toBeUndefined();
    const c2 = await repoA.claimDue(at(350), 30_000, []);
    expect(c2?.record).toMatchObject({ id: c1!.record.id, attempt: 1 });
    await repoA.park(c2!);
    expect(await repoA.claimDue(new Date(), 30_000, [])).toBeUndefined();
    expect(await repoA.unpark('wh_d')).toBe(1);
    const c3 = await repoA.claimDue(new Date(), 30_000, []);
    expect(c3?.record.id).toBe(c1!.record.id);
    await repoA.release(c3!);

    // A crash between the two writes (or records from before the queue): the repair pass queues it again.
    await db.collection('delivery_queue').deleteMany({});
    expect(await repoA.claimDue(new Date(), 30_000, [])).toBeUndefined();
    expect(await repoA.repairQueue(new Date())).toBe(1);
    expect(await repoA.repairQueue(new Date())).toBe(0);
    const c4 = await repoA.claimDue(new Date(), 30_000, []);
    expect(c4?.record.id).toBe(c1!.record.id);
    await repoA.finish(c4!, { ...success, attempt: 2 }, new Date());

    // Deleting the webhook cancels what it has queued.
    await createPending(repoA, 'wh_d', 'evt_d2');
    expect(await repoA.cancelPending('wh_d', 'cancelled: webhook deleted', new Date())).toBe(1);
    expect(await repoA.claimDue(new Date(), 30_000, [])).toBeUndefined();
  });

  it('a delivery claimed at fan-out is listed as pending from its entry, written once with its result, and a release or a lapsed lease writes it pending', async () => {
    const input = (eventId: string) => ({ teamId: 'team_q', webhookId: 'wh_fresh', eventId, type: 'email.sent', payload: `{"id":"${eventId}"}`, now: new Date() });
    const [a, b, c] = await repoA.createClaimedMany([input('evt_f1'), input('evt_f2'), input('evt_f3')], new Date(), 1_000);
    expect(await db.collection('deliveries').countDocuments({ webhookId: 'wh_fresh' })).toBe(0);
    // Listed and read as pending before any attempt; another team sees nothing.
    const listed = await repoB.list('team_q', 'wh_fresh', { skip: 0, limit: 10 });
    expect(listed.count).toBe(3);
    expect(listed.records.map((r) => [r.status, r.attempt, r.payload])).toEqual(expect.arrayContaining([['PENDING', 0, '{"id":"evt_f1"}']]));
    expect((await repoB.get('team_q', 'wh_fresh', a!.record.id))?.status).toBe('PENDING');
    expect(await repoB.get('team_other', 'wh_fresh', a!.record.id)).toBeUndefined();
    expect((await repoB.list('team_other', 'wh_fresh', { skip: 0, limit: 10 })).count).toBe(0);
    expect(await repoB.claimForRetry('team_q', 'wh_fresh', a!.record.id, new Date(), 30_000)).toBe('busy');

    // The first result is the record's first write; its entry goes.
    const [done] = await repoA.finishMany([{ claim: a!, result: { ...success, attempt: 1 } }], new Date());
    expect(done?.status).toBe('SUCCESS');
    expect(await db.collection('deliveries').findOne({ _id: a!.record.id } as never)).toMatchObject({ status: 'SUCCESS', attempt: 1, eventId: 'evt_f1' });
    expect(await db.collection('delivery_queue').countDocuments({ _id: a!.record.id } as never)).toBe(0);
    expect((await repoB.list('team_q', 'wh_fresh', { skip: 0, limit: 10, status: 'SUCCESS' })).count).toBe(1);

    // Released unattempted: a pending record, claimable by anyone at once.
    await repoA.releaseMany([b!]);
    expect(await db.collection('deliveries').findOne({ _id: b!.record.id } as never)).toMatchObject({ status: 'PENDING', attempt: 0 });
    // Never attempted and its lease lapsed (a crash): a claim writes its pending record first, then takes it.
    await sleep(1_100);
    const claimed = await drain(repoB, ['wh_done_0', 'wh_done_1', 'wh_done_2', 'wh_done_3', 'wh_done_4', 'wh_done_5', 'wh_done_6']);
    expect(claimed.map((x) => x.record.id).sort()).toEqual([b!.record.id, c!.record.id].sort());
    expect(claimed.every((x) => x.record.status === 'PENDING' && x.record.attempt === 0)).toBe(true);
    // The released one has its record now; the lapsed one is still only its entry, claimed by its lease.
    expect(claimed.find((x) => x.record.id === b!.record.id)?.unwritten).not.toBe(true);
    expect(claimed.find((x) => x.record.id === c!.record.id)?.unwritten).toBe(true);
    const records = await Promise.all(claimed.map((x) => repoB.finish(x, { ...success, attempt: 1 }, new Date())));
    expect(records.every((r) => r?.status === 'SUCCESS')).toBe(true);
    // The lapsed claim's late result is lost: the record is the new claim's.
    expect(await repoA.finishMany([{ claim: c!, result: { ...success, attempt: 2 } }], new Date())).toEqual([undefined]);
    expect(await db.collection('deliveries').findOne({ _id: c!.record.id } as never)).toMatchObject({ attempt: 1 });
    const all = await repoB.list('team_q', 'wh_fresh', { skip: 0, limit: 10 });
    expect(all.count).toBe(3);
    expect(all.records.every((r) => r.status === 'SUCCESS')).toBe(true);
    expect(await db.collection('delivery_queue').countDocuments({ webhookId: 'wh_fresh' })).toBe(0);
  });

  it('cancelling a webhook writes its unattempted deliveries claimed at fan-out as FAILED', async () => {
    const [a] = await repoA.createClaimedMany([{ teamId: 'team_q', webhookId: 'wh_gone', eventId: 'evt_g1', type: 'email.sent', payload: '{}', now: new Date() }], new Date(), 30_000);
    expect(await repoA.cancelPending('wh_gone', 'cancelled: webhook deleted', new Date())).toBe(1);
    expect(await repoB.get('team_q', 'wh_gone', a!.record.id)).toMatchObject({ status: 'FAILED', lastError: 'cancelled: webhook deleted', attempt: 0 });
    expect(await db.collection('delivery_queue').countDocuments({ webhookId: 'wh_gone' })).toBe(0);
    // The claim's late result is lost.
    expect(await repoA.finishMany([{ claim: a!, result: { ...success, attempt: 1 } }], new Date())).toEqual([undefined]);
  });

  it('two replicas claiming at once never attempt one delivery twice, and every delivery ends once', async () => {
    const N = 30;
    for (let i = 0; i < N; i++) await createPending(raceA, `wh_r${i % 3}`, `evt_r${i}`);
    const attempts = new Map<string, number>();
    const inflight = new Set<string>();
    const overlaps: string[] = [];
    const ids = new Map<string, string>();
    async function replica(repo: DeliveriesRepository): Promise<void> {
      for (let idle = 0; idle < 20;) {
        const c = await repo.claimDue(new Date(), 30_000, []);
        if (!c) {
          idle++;
          await sleep(50);
          continue;
        }
        idle = 0;
        if (inflight.has(c.record.id)) overlaps.push(c.record.id);
        inflight.add(c.record.id);
        ids.set(c.record.id, c.record.webhookId);
        const n = (attempts.get(c.record.eventId) ?? 0) + 1;
        attempts.set(c.record.eventId, n);
        await sleep(5);
        inflight.delete(c.record.id);
        // The first attempt of each fails and is retried shortly; the second succeeds.
        const result = n === 1
          ? { ...success, status: 'PENDING' as const, attempt: 1, nextAttemptAt: new Date(Date.now() + 100), lastError: 'receiver answered 500', responseStatus: 500 }
          : { ...success, attempt: 2 };
        expect(await repo.finish(c, result, new Date())).toBeDefined();
      }
    }
    await Promise.all([replica(raceA), replica(raceB)]);
    expect(overlaps).toEqual([]);
    expect(attempts.size).toBe(N);
    expect([...attempts.values()].every((n) => n === 2)).toBe(true);
    for (const [id, webhookId] of ids) expect((await raceA.get('team_q', webhookId, id))?.status).toBe('SUCCESS');
    expect(await mongoA.db(raceDbName).collection('delivery_queue').countDocuments({})).toBe(0);
  });

  it('a backlog of one webhook at its cap costs a look per window, not per claim, and other webhooks still go first when due', async () => {
    const client = new MongoClient(testMongoUrl(), { monitorCommands: true });
    const backlogDb = uniqueDbName('webhooks_backlog');
    const looks: string[] = [];
    client.on('commandStarted', (e) => {
      const cmd = e.command as { find?: string; findAndModify?: string; query?: { _id?: unknown } };
      // Every queue command that is not by _id is a scan on FerretDB.
      if (cmd.find === 'delivery_queue') looks.push('find');
      if (cmd.findAndModify === 'delivery_queue' && typeof cmd.query?._id !== 'string') looks.push('findAndModify');
    });
    try {
      const repo = createDeliveriesRepository(client.db(backlogDb), { lookMaxAgeMs: 60_000 });
      await repo.ensureIndexes();
      const N = 300;
      const t = Date.now() - 10_000;
      // Queued by another replica: this one learns of them only by looking.
      const other = createDeliveriesRepository(mongoB.db(backlogDb));
      for (let i = 0; i < N; i++) await createPending(other, 'wh_big', `evt_big${i}`, new Date(t + i));
      looks.length = 0;

      // The worker's way: at most two in flight to one webhook; the webhook at its cap is skipped.
      const cap = 2;
      const inflight: ClaimedDelivery[] = [];
      const done = new Map<string, number>();
      const at = new Map<string, number>();
      for (let queued = false; ;) {
        if (!queued && done.size === 100) {
          // One queued here (in view at once), one by the other replica (seen by this one's next look).
          await createPending(repo, 'wh_small', 'evt_small', new Date());
          await createPending(other, 'wh_other', 'evt_other', new Date());
          queued = true;
        }
        const busy = inflight.length >= cap ? ['wh_big'] : [];
        const c = await repo.claimDue(new Date(), 30_000, busy);
        if (c) {
          if (c.record.webhookId === 'wh_big') inflight.push(c);
          else at.set(c.record.webhookId, done.size);
          done.set(c.record.eventId, (done.get(c.record.eventId) ?? 0) + 1);
          if (c.record.webhookId !== 'wh_big') await repo.finish(c, { ...success, attempt: 1 }, new Date());
          continue;
        }
        const finished = inflight.shift();
        if (!finished) break;
        expect(await repo.finish(finished, { ...success, attempt: 1 }, new Date())).toBeDefined();
      }
      expect(done.size).toBe(N + 2);
      expect([...done.values()].every((n) => n === 1)).toBe(true);
      // Both due after the whole backlog, and neither waited for it: taken while the big webhook was at its cap,
      // the own one at once, the other replica's once this one's view of the big webhook ran out (a look at most).
      expect(at.get('wh_small')).toBeGreaterThanOrEqual(100);
      expect(at.get('wh_small')).toBeLessThanOrEqual(103);
      expect(at.get('wh_other')).toBeGreaterThanOrEqual(100);
      expect(at.get('wh_other')).toBeLessThanOrEqual(100 + LOOK_LIMIT + 3);
      // 301 claims from a few looks: one per LOOK_LIMIT entries of the backlog, and each with the big webhook skipped
      // that had nothing else to vouch for (the old way was a scan per claim and another per empty hand).
      expect(looks.length).toBeGreaterThan(0);
      expect(looks.length).toBeLessThanOrEqual(12);
      expect(await client.db(backlogDb).collection('delivery_queue').countDocuments({})).toBe(0);
    } finally {
      await client.db(backlogDb).dropDatabase();
      await client.close();
    }
  });
});
