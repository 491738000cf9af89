import { createLogger, createEvent, type EventEnvelope } from '@mailfleet/kit';
import { testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type Db } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFanoutBatchHandler } from '../../src/events/fanout.consumer.js';
import { createDeliveriesRepository, type ClaimedDelivery, type DeliveriesRepository } from '../../src/repositories/deliveries.repository.js';
import { withSubscriptionCache, type CachedWebhooksRepository } from '../../src/repositories/subscription-cache.js';
import { createWebhooksRepository } from '../../src/repositories/webhooks.repository.js';

// The fan-out and the delivery worker's rounds on FerretDB, counted by command monitoring: storage operations
// follow batches and rounds, not events.
const logger = createLogger({ service: 'webhooks-batch-test', level: 'silent' });
const dbName = uniqueDbName('webhooks_batch');
const TEAM = 'team_batch';
const WRITES = new Set(['insert', 'update', 'delete', 'findAndModify']);
let client: MongoClient;
let db: Db;
let webhooks: CachedWebhooksRepository;
let deliveries: DeliveriesRepository;
/** Every command on this test's database, as `<command>:<collection>`. */
const commands: string[] = [];

const writes = () => commands.filter((c) => WRITES.has(c.split(':')[0]!));
const ops = async <T>(fn: () => Promise<T>): Promise<{ value: T; writes: string[]; all: string[] }> => {
  commands.length = 0;
  const value = await fn();
  return { value, writes: writes(), all: [...commands] };
};
const events = (n: number, type = 'email.delivered'): EventEnvelope[] =>
  Array.from({ length: n }, (_, i) => createEvent(type, TEAM, { id: `em_${i}`, to: 'a@example.com' }) as EventEnvelope);
const batchOf = (list: readonly EventEnvelope[]) => list.map((event) => ({ event, deliveryCount: 1 }));

beforeAll(async () => {
  client = new MongoClient(testMongoUrl(), { monitorCommands: true });
  db = client.db(dbName);
  client.on('commandStarted', (e) => {
    if (e.databaseName !== dbName) return;
    const collection = (e.command as Record<string, unknown>)[e.commandName];
    commands.push(`${e.commandName}:${typeof collection === 'string' ? collection : ''}`);
  });
  const stored = createWebhooksRepository(db);
  await stored.ensureIndexes();
  webhooks = withSubscriptionCache(stored, { ttlMs: 3_600_000 });
  deliveries = createDeliveriesRepository(db);
  await deliveries.ensureIndexes();
  await webhooks.create({
    id: 'wh_all', teamId: TEAM, url: 'https://hooks.example.com/in', description: null, eventTypes: ['email.delivered', 'email.sent'],
    secret: 'whsec_0123456789abcdefghij', createdAt: new Date(Date.now() - 60_000), createdByUserId: 'u',
  });
});

afterAll(async () => {
  await db?.dropDatabase();
  await client?.close();
});

describe('fan-out in batches', () => {
  it('stores a batch of N events for one webhook with one insert of queue entries, whatever N, and a redelivered batch adds nothing', async () => {
    const handler = createFanoutBatchHandler({ webhooks, deliveries });
    // The team's webhooks come from memory after the first look.
    await webhooks.subscribed(TEAM, 'email.delivered', new Date());

    const small = events(3);
    const big = [...events(150), ...events(40, 'email.sent'), ...events(10, 'email.bounced')];
    const forSmall = await ops(() => handler(batchOf(small), { log: logger }));
    const forBig = await ops(() => handler(batchOf(big), { log: logger }));
    // Queue entries carrying the deliveries; the records are written with the first results.
    expect(forSmall.writes).toEqual(['insert:delivery_queue']);
    expect(forBig.writes).toEqual(forSmall.writes);
    // Besides, one `_id: {$in}` read of the batch's records (an event published again finds its record); nothing else.
    expect(forSmall.all.filter((c) => !c.startsWith('insert:'))).toEqual(['find:deliveries']);
    expect(forBig.all.filter((c) => !c.startsWith('insert:'))).toEqual(['find:deliveries']);
    expect(await db.collection('deliveries').countDocuments({})).toBe(0);
    expect(await db.collection('delivery_queue').countDocuments({})).toBe(3 + 190);

    // A claim of entries that carry their deliveries is their lease alone (one write, nothing read), and their
    // results are one insert of the records and one delete of the entries.
    const claimed = await ops(() => deliveries.claimDueMany(new Date(), 30_000, [], () => 5));
    const round = claimed.value;
    expect(round).toHaveLength(5);
    expect(claimed.writes).toEqual(['update:delivery_queue']);
    expect(claimed.all.filter((c) => c === 'find:deliveries')).toEqual([]);
    expect(round.every((c) => c.unwritten)).toBe(true);
    const ok = { status: 'SUCCESS' as const, attempt: 1, lastError: null, nextAttemptAt: null, responseStatus: 200, responseTimeMs: 3, responseText: 'ok' };
    const finished = await ops(() => deliveries.finishMany(round.map((claim) => ({ claim, result: ok })), new Date()));
    expect(finished.writes).toEqual(['insert:deliveries', 'delete:delivery_queue']);
    expect(await db.collection('deliveries').countDocuments({ status: 'SUCCESS' })).toBe(5);

    // The same batch again (a crash before the acks), with two new events: no delivery twice. A pair whose entry is
    // there (each delivery's id is its pair's) makes nothing; a recorded one's new entry goes again.
    const again = await ops(() => handler([...small, ...big, ...events(2)].map((event) => ({ event, deliveryCount: 2 })), { log: logger }));
    expect(again.writes).toEqual(['insert:delivery_queue', 'insert:deliveries', 'delete:delivery_queue']);
    expect(await db.collection('deliveries').countDocuments({})).toBe(5 + 2);
    expect(await db.collection('delivery_queue').countDocuments({})).toBe(3 + 190 - 5 + 2);
    const pairs = await db.collection('deliveries').find({}, { projection: { _id: 0, webhookId: 1, eventId: 1 } }).toArray();
    expect(new Set(pairs.map((p) => `${String(p.webhookId)}/${String(p.eventId)}`)).size).toBe(pairs.length);

    // The rest given back unattempted: written as pending records (for the next test's claims).
    await deliveries.releaseMany(await deliveries.claimDueMany(new Date(), 30_000, [], () => 500));
    expect(await db.collection('deliveries').countDocuments({ status: 'PENDING' })).toBe(3 + 190 - 5 + 2);
  });

  it('claims a round of one webhook with one queue write, and records its results with one write per collection', async () => {
    const leaseMs = 30_000;
    const claimed = await ops(() => deliveries.claimDueMany(new Date(), leaseMs, [], () => 16));
    const round: ClaimedDelivery[] = claimed.value;
    expect(round).toHaveLength(16);
    expect(new Set(round.map((c) => c.record.webhookId))).toEqual(new Set(['wh_all']));
    // One lease of the 16 queue entries, then the locks on the 16 records in one bulk write (not a findAndModify
    // each): two writes for the round, and no read, as this replica stored them and every lock took.
    expect(claimed.writes).toEqual(['update:delivery_queue', 'update:deliveries']);
    expect(claimed.all.filter((c) => c === 'find:deliveries')).toEqual([]);

    const at = new Date();
    const ok = { lastError: null, nextAttemptAt: null, responseStatus: 200, responseTimeMs: 3, responseText: 'ok' };
    const finished = await ops(() => deliveries.finishMany(round.map((claim, i) => ({
      claim,
      // One of them failed and is retried later: its entry stays, with its new due time.
      result: i === 0
        ? { ...ok, status: 'PENDING' as const, attempt: 1, nextAttemptAt: new Date(at.getTime() + 60_000), lastError: 'receiver answered 500', responseStatus: 500 }
        : { ...ok, status: 'SUCCESS' as const, attempt: 1 },
    })), at));
    expect(finished.value.every((r) => r !== undefined)).toBe(true);
    expect(finished.writes.sort()).toEqual(['delete:delivery_queue', 'update:deliveries', 'update:delivery_queue']);
    expect(await db.collection('deliveries').countDocuments({ status: 'SUCCESS' })).toBe(5 + 15);
    const retried = await db.collection('delivery_queue').findOne({ _id: round[0]!.record.id as never });
    expect(retried?.due).toEqual(new Date(at.getTime() + 60_000));

    // A claim whose lease was lost meanwhile writes nothing: only the others count.
    const next = await deliveries.claimDueMany(new Date(), leaseMs, [], () => 3);
    expect(next).toHaveLength(3);
    const lost = { ...next[0]!, leaseToken: 'taken-by-another-replica' };
    const out = await deliveries.finishMany([lost, next[1]!, next[2]!].map((claim) => ({ claim, result: { ...ok, status: 'SUCCESS' as const, attempt: 1 } })), new Date());
    expect(out.map((r) => r?.status)).toEqual([undefined, 'SUCCESS', 'SUCCESS']);
    expect((await db.collection('deliveries').findOne({ _id: next[0]!.record.id as never }))?.status).toBe('PENDING');
  });
  it('a record another replica changed since this one stored it is read back, never attempted from the old copy', async () => {
    const own = client.db(`${dbName}_stale`);
    try {
      const repo = createDeliveriesRepository(own);
      await repo.ensureIndexes();
      const now = new Date(Date.now() - 1_000);
      await repo.createPendingMany(['e1', 'e2', 'e3'].map((eventId) => ({ teamId: TEAM, webhookId: 'wh_s', eventId, type: 'email.sent', payload: '{}', now })));
      const changed = await own.collection('deliveries').findOne({ eventId: 'e2' });
      // Another replica attempted it meanwhile: a failed attempt, due again now.
      await own.collection('deliveries').updateOne({ _id: changed!._id }, { $set: { attempt: 1, updatedAt: new Date(), lastError: 'receiver answered 500' } });
      const seen = new Map<string, number>();
      for (let i = 0; i < 3; i++) {
        for (const c of await repo.claimDueMany(new Date(), 30_000, [], () => 3)) seen.set(c.record.eventId, c.record.attempt);
      }
      expect(seen).toEqual(new Map([['e1', 0], ['e3', 0], ['e2', 1]]));
    } finally {
      await own.dropDatabase();
    }
  });
});
