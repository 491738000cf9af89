import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isolatedNats, startNats, stopNats, testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type Collection, type CommandStartedEvent, type CommandSucceededEvent, type Document } from 'mongodb';
import { createLogger } from '../../src/logger.js';
import { connectMongo, type MongoHandle } from '../../src/mongo.js';
import { connectNats, type NatsHandle } from '../../src/nats/connection.js';
import { createDurableConsumer, type DurableConsumer } from '../../src/nats/consumer.js';
import { createEvent, ensureEventStream, PoisonEventError, type EventEnvelope } from '../../src/nats/events.js';
import { createOutboxRelay, deleteWithOutbox, NOT_DELETED, outboxEntries, withOutbox } from '../../src/nats/outbox.js';

const logger = createLogger({ service: 'kit-outbox-test', level: 'silent' });
const dbName = uniqueDbName('kit_outbox');
let mongo: MongoHandle;
let nats: NatsHandle;
let things: Collection<Document>;
// This file stops and restarts NATS: it gets a server of its own so other files running meanwhile are not disturbed.
let natsInstance: string;
let natsUrl: string;

beforeAll(async () => {
  ({ instance: natsInstance, url: natsUrl } = await isolatedNats());
  mongo = await connectMongo({ url: testMongoUrl(), dbName, appName: 'kit-test' });
  nats = await connectNats({ url: natsUrl, name: 'kit-test', logger });
  await ensureEventStream(nats.jsm);
  things = mongo.db.collection('things');
});
afterAll(async () => {
  await nats?.drain();
  await mongo?.db.dropDatabase();
  await mongo?.close();
  await stopNats({ instance: natsInstance });
});

/** A unique event group per test keeps tests apart on the shared stream. */
function uniqueType(): string {
  return `t${randomBytes(5).toString('hex')}.happened`;
}

function recordingConsumer(type: string, opts: { fail?: (e: EventEnvelope, n: number) => void } = {}) {
  const deliveries: { id: string; deliveryCount: number }[] = [];
  const consumer = createDurableConsumer({
    nats, logger, durable: `kit-test-${type.replace('.', '-')}`, filterSubjects: [`mailfleet.${type.split('.')[0]}.>`],
    backoffMs: [100, 200], maxDeliver: 4, concurrency: 4,
    handler: async (event, meta) => {
      deliveries.push({ id: event.id, deliveryCount: meta.deliveryCount });
      opts.fail?.(event, meta.deliveryCount);
    },
  });
  return { consumer, deliveries };
}

function countsById(deliveries: { id: string }[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const d of deliveries) out[d.id] = (out[d.id] ?? 0) + 1;
  return out;
}

describe('outbox relay', () => {
  let consumer: DurableConsumer | undefined;
  afterAll(async () => consumer?.stop());

  it('keeps events written while NATS is down and publishes each exactly once after it returns', async () => {
    const type = uniqueType();
    const rec = recordingConsumer(type);
    consumer = rec.consumer;
    await consumer.start();
    const relay = createOutboxRelay({ nats, collections: [things], logger, intervalMs: 100 });

    await stopNats({ instance: natsInstance });
    const events: EventEnvelope[] = [];
    for (let i = 0; i < 5; i++) {
      const e = createEvent(type, 'team_a', { n: i });
      events.push(e);
      // The change and its event in one document write.
      await things.insertOne({ _id: `doc-${type}-${i}` as never, n: i, outbox: outboxEntries([e]) });
    }
    await expect(relay.drainOnce()).rejects.toThrow();
    expect(await things.countDocuments({ _id: { $in: events.map((_, i) => `doc-${type}-${i}`) } as never, 'outbox.0': { $exists: true } })).toBe(5);

    relay.start();
    await startNats({ instance: natsInstance });
    await expect.poll(() => rec.deliveries.length, { timeout: 30_000, interval: 200 }).toBe(5);
    await relay.stop();
    // A later pass finds nothing left, and nothing arrives twice.
    expect(await relay.drainOnce()).toBe(0);
    await new Promise((r) => setTimeout(r, 500));
    expect(countsById(rec.deliveries)).toEqual(Object.fromEntries(events.map((e) => [e.id, 1])));
    expect(await things.countDocuments({ 'outbox.0': { $exists: true }, n: { $gte: 0 } })).toBe(0);
  });

  it('a process SIGKILLed between publish and mark loses nothing and duplicates nothing', async () => {
    const type = uniqueType();
    const rec = recordingConsumer(type);
    await rec.consumer.start();
    try {
      const fixture = fileURLToPath(new URL('./fixtures/crash-after-publish.mjs', import.meta.url));
      const docId = `drill-${type}`;
      const result = await new Promise<{ code: number | null; signal: string | null; stdout: string }>((resolve) => {
        const child = execFile(process.execPath, [fixture, testMongoUrl(), dbName, natsUrl, type, docId], (err, stdout) => {
          resolve({ code: child.exitCode, signal: child.signalCode, stdout: String(stdout) });
          void err;
        });
      });
      expect(result.signal).toBe('SIGKILL');
      const eventId = result.stdout.trim();
      expect(eventId).toMatch(/^evt_/);
      // Published before the kill, but still in the outbox: the next relay republishes it.
      const doc = await things.findOne({ _id: docId as never });
      expect((doc?.outbox as unknown[]).length).toBe(1);
      const relay = createOutboxRelay({ nats, collections: [things], logger });
      expect(await relay.drainOnce()).toBe(1);
      expect((await things.findOne({ _id: docId as never }))?.outbox).toEqual([]);
      await expect.poll(() => rec.deliveries.length, { timeout: 10_000 }).toBe(1);
      await new Promise((r) => setTimeout(r, 500));
      // JetStream's duplicate window dropped the republish (same Nats-Msg-Id).
      expect(rec.deliveries).toEqual([{ id: eventId, deliveryCount: 1 }]);
      const info = await nats.jsm.streams.getMessage('MAILFLEET_EVENTS', { last_by_subj: `mailfleet.${type}` });
      expect(info?.header.get('Nats-Msg-Id')).toBe(eventId);
    } finally {
      await rec.consumer.stop();
    }
  });

  it('updates with withOutbox and deletes with tombstones that vanish once published', async () => {
    const type = uniqueType();
    const rec = recordingConsumer(type);
    await rec.consumer.start();
    try {
      const id = `upd-${type}`;
      await things.insertOne({ _id: id as never, status: 'NEW' });
      const changed = createEvent(type, 'team_b', { id, status: 'DONE' });
      await things.updateOne({ _id: id as never }, withOutbox<Document>({ $set: { status: 'DONE' } }, [changed]));
      const removed = createEvent(type, 'team_b', { id, deleted: true });
      await things.updateOne({ _id: id as never }, deleteWithOutbox([removed]));
      expect(await things.countDocuments({ _id: id as never, ...NOT_DELETED })).toBe(0);
      const relay = createOutboxRelay({ nats, collections: [things], logger });
      expect(await relay.drainOnce()).toBe(2);
      expect(await things.countDocuments({ _id: id as never })).toBe(0);
      // A later pass (not the occasional full sweep) removes the tombstone it emptied, by its id.
      const later = `del-${type}`;
      await things.insertOne({ _id: later as never, status: 'NEW' });
      const removedLater = createEvent(type, 'team_b', { id: later, deleted: true });
      await things.updateOne({ _id: later as never }, deleteWithOutbox([removedLater]));
      expect(await relay.drainOnce()).toBe(1);
      expect(await things.countDocuments({ _id: later as never })).toBe(0);
      await expect.poll(() => rec.deliveries.map((d) => d.id), { timeout: 10_000 }).toEqual([changed.id, removed.id, removedLater.id]);
    } finally {
      await rec.consumer.stop();
    }
  });

  it('with minAgeMs takes every entry on its first pass, then only entries older than that, a batch a pass', async () => {
    const type = uniqueType();
    const col = mongo.db.collection(`aged_${type.split('.')[0]}`);
    const entry = (ageMs: number) => {
      const [e] = outboxEntries([createEvent(type, 'team_a', { ageMs })]);
      return { ...e!, createdAt: new Date(Date.now() - ageMs) };
    };
    // Left by a process that died a moment ago: fresh, yet only the relay will ever publish it.
    await col.insertMany([{ _id: 'left-fresh' as never, outbox: [entry(0)] }, { _id: 'left-old' as never, outbox: [entry(120_000)] }]);
    const relay = createOutboxRelay({ nats, collections: [col], logger, minAgeMs: 60_000, batchSize: 1 });
    // The first pass goes on batch after batch until nothing is left.
    expect(await relay.drainOnce()).toBe(2);
    // From then on, fresh entries belong to the writer's own fast path; old ones are the relay's, one batch a pass.
    await col.insertMany([
      { _id: 'fresh' as never, outbox: [entry(1_000)] }, { _id: 'old' as never, outbox: [entry(120_000)] }, { _id: 'older' as never, outbox: [entry(180_000)] },
    ]);
    expect(await relay.drainOnce()).toBe(1);
    expect(await relay.drainOnce()).toBe(1);
    expect(await relay.drainOnce()).toBe(0);
    expect((await col.find({ 'outbox.0': { $exists: true } }).toArray()).map((d) => d._id)).toEqual(['fresh']);
  });
});

describe('outbox relay kicked with the ids a writer wrote', () => {
  let client: MongoClient;
  let col: Collection<Document>;
  /** The filters of the finds on this collection, as the server received them. */
  const finds: Document[] = [];
  /** Scans for waiting entries that have been answered. */
  let scansAnswered = 0;
  const scans = new Set<number>();
  beforeAll(async () => {
    client = await new MongoClient(testMongoUrl(), { monitorCommands: true }).connect();
    client.on('commandStarted', (e: CommandStartedEvent) => {
      if (e.commandName !== 'find' || e.command['find'] !== 'kicked') return;
      const filter = e.command['filter'] as Document;
      finds.push(filter);
      if (!('_id' in filter)) scans.add(e.requestId);
    });
    client.on('commandSucceeded', (e: CommandSucceededEvent) => {
      if (scans.delete(e.requestId)) scansAnswered += 1;
    });
    col = client.db(dbName).collection('kicked');
  });
  afterAll(async () => client?.close());

  it('reads just those documents by id (no scan of the collection); a plain kick still scans for the rest', async () => {
    const type = uniqueType();
    const rec = recordingConsumer(type);
    await rec.consumer.start();
    const relay = createOutboxRelay({ nats, collections: [col], logger, intervalMs: 600_000 });
    try {
      relay.start();
      // The first pass after start scans (what a process that died left); the documents come after it.
      await expect.poll(() => scansAnswered, { timeout: 10_000 }).toBe(1);
      const events = [0, 1, 2].map((n) => createEvent(type, 'team_k', { n }));
      await col.insertMany(['named-1', 'named-2', 'unnamed'].map((id, i) => ({ _id: id as never, outbox: outboxEntries([events[i]!]) })));
      finds.length = 0;
      relay.kickIds(col, ['named-1', 'named-2']);
      await expect.poll(async () => (await col.countDocuments({ _id: { $in: ['named-1', 'named-2'] } as never, 'outbox.0': { $exists: true } })), { timeout: 10_000 }).toBe(0);
      expect(finds.length).toBeGreaterThan(0);
      expect(finds.every((f) => JSON.stringify(f['_id']) === JSON.stringify({ $in: ['named-1', 'named-2'] }))).toBe(true);
      // Nobody named it and no scan ran: it is still waiting.
      expect(await col.countDocuments({ _id: 'unnamed' as never, 'outbox.0': { $exists: true } })).toBe(1);

      relay.kick();
      await expect.poll(async () => col.countDocuments({ 'outbox.0': { $exists: true } }), { timeout: 10_000 }).toBe(0);
      expect(scansAnswered).toBe(2);
      await expect.poll(() => rec.deliveries.length, { timeout: 10_000 }).toBe(3);
      await new Promise((r) => setTimeout(r, 300));
      expect(countsById(rec.deliveries)).toEqual(Object.fromEntries(events.map((e) => [e.id, 1])));
    } finally {
      await relay.stop();
      await rec.consumer.stop();
    }
  });
});

describe('outbox relay: the scans of the interval', () => {
  let client: MongoClient;
  let col: Collection<Document>;
  /** Every scan for waiting entries, as the client saw it: when it started and how long the server took. */
  const scans: { at: number; ms: number }[] = [];
  const started = new Map<number, number>();
  beforeAll(async () => {
    client = await new MongoClient(testMongoUrl(), { monitorCommands: true }).connect();
    client.on('commandStarted', (e: CommandStartedEvent) => {
      if (e.commandName === 'find' && e.command['find'] === 'spaced' && !('_id' in (e.command['filter'] as Document))) started.set(e.requestId, Date.now());
    });
    client.on('commandSucceeded', (e: CommandSucceededEvent) => {
      const at = started.get(e.requestId);
      if (at === undefined) return;
      started.delete(e.requestId);
      scans.push({ at, ms: e.duration });
    });
    col = client.db(dbName).collection('spaced');
    // Enough documents that a scan takes a few milliseconds: longer than a hundredth of a 20 ms interval.
    await col.insertMany(Array.from({ length: 150 }, (_, n) => ({ n, text: 'x'.repeat(500) })));
  });
  afterAll(async () => client?.close());

  it('are spaced by a hundred times what the last one took when that is longer than the interval; a kick scans at once', async () => {
    const relay = createOutboxRelay({ nats, collections: [col], logger, intervalMs: 20 });
    try {
      relay.start();
      const startedAt = Date.now();
      await expect.poll(() => scans.length, { timeout: 20_000, interval: 50 }).toBeGreaterThanOrEqual(3);
      const timed = [...scans];
      const elapsed = Date.now() - startedAt;
      // The relay times the whole read, at least what the server took: the next scan waits a hundred times that.
      for (let i = 1; i < timed.length; i++) {
        expect(timed[i]!.at - timed[i - 1]!.at).toBeGreaterThanOrEqual(Math.max(20, 100 * timed[i - 1]!.ms) - 5);
      }
      // At the interval alone they would have run every 20 ms.
      expect(timed.length).toBeLessThan(elapsed / 20 / 2);
      const before = scans.length;
      const kickedAt = Date.now();
      relay.kick();
      await expect.poll(() => scans.length, { timeout: 5_000 }).toBeGreaterThan(before);
      expect(scans[before]!.at - kickedAt).toBeLessThan(1_000);
    } finally {
      await relay.stop();
    }
  });
});

describe('durable consumer', () => {
  it('redelivers after a transient failure and terminates poison events', async () => {
    const type = uniqueType();
    const poison = createEvent(type, 'team_c', { poison: true });
    const flaky = createEvent(type, 'team_c', { flaky: true });
    const rec = recordingConsumer(type, {
      fail: (e, n) => {
        if (e.id === poison.id) throw new PoisonEventError('cannot ever succeed');
        if (e.id === flaky.id && n < 3) throw new Error('transient');
      },
    });
    await rec.consumer.start();
    try {
      await things.insertOne({ _id: `c-${type}` as never, outbox: outboxEntries([poison, flaky]) });
      const relay = createOutboxRelay({ nats, collections: [things], logger });
      await relay.drainOnce();
      await expect.poll(() => rec.deliveries.filter((d) => d.id === flaky.id).length, { timeout: 10_000 }).toBe(3);
      await new Promise((r) => setTimeout(r, 600));
      expect(rec.deliveries.filter((d) => d.id === poison.id)).toEqual([{ id: poison.id, deliveryCount: 1 }]);
      expect(rec.deliveries.filter((d) => d.id === flaky.id).map((d) => d.deliveryCount)).toEqual([1, 2, 3]);
    } finally {
      await rec.consumer.stop();
    }
  });
});
