import {
  connectNats, createEvent, createLogger, encodeEvent, ensureEventStream, subjectFor, type DurableConsumer, type EventEnvelope,
  type NatsHandle,
} from '@mailfleet/kit';
import { awayFromUtcMidnight, durablesIdle, isolatedNats, stopNats, testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type CommandStartedEvent, type Db } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { utcDay } from '../../src/domain/days.js';
import { createEmailEventsConsumer, createEmailEventsHandler, EMAIL_EVENTS_DURABLE } from '../../src/events/email-events.consumer.js';
import { createFeedRepository } from '../../src/repositories/feed.repository.js';
import { createRollupsRepository, rollupIdOf } from '../../src/repositories/rollups.repository.js';

/**
 * The storage budget of counting: storage operations per batch of events, not
 * per event. Counted with the driver's command monitoring on the real store.
 */
const logger = createLogger({ service: 'analytics-ops-test', level: 'silent' });
const dbName = uniqueDbName('analytics_ops');
let client: MongoClient;
let db: Db;
let nats: NatsHandle;
let natsInstance: string;
let consumer: DurableConsumer | undefined;
const commands: { name: string; collection: string }[] = [];
const WRITES = new Set(['insert', 'update', 'delete', 'findAndModify']);

beforeAll(async () => {
  client = await new MongoClient(testMongoUrl(), { monitorCommands: true }).connect();
  client.on('commandStarted', (e: CommandStartedEvent) => {
    if (e.databaseName === dbName) commands.push({ name: e.commandName, collection: String(e.command[e.commandName]) });
  });
  db = client.db(dbName);
  const started = await isolatedNats();
  natsInstance = started.instance;
  nats = await connectNats({ url: started.url, name: 'analytics-ops-test', logger });
  await ensureEventStream(nats.jsm);
  await Promise.all([createRollupsRepository(db).ensureIndexes(), createFeedRepository(db).ensureIndexes()]);
});
afterAll(async () => {
  await consumer?.stop();
  await nats?.drain();
  await stopNats({ instance: natsInstance }).catch(() => undefined);
  await db?.dropDatabase();
  await client?.close();
});

const writes = () => commands.filter((c) => WRITES.has(c.name));

function delivered(teamId: string, n: number): EventEnvelope[] {
  const now = new Date();
  return Array.from({ length: n }, (_, i) => createEvent('email.delivered', teamId, {
    id: `em_${i}`, status: 'DELIVERED', from: 'Shop <shop@a.example>', to: ['someone@r.example'], subject: 's', domainId: 'dom_a',
    occurredAt: now.toISOString(),
  }, now));
}

async function deliveredOf(teamId: string): Promise<number> {
  const doc = await db.collection('daily_rollups').findOne({ _id: rollupIdOf({ teamId, day: utcDay(new Date()), domainId: 'dom_a', kind: 'transactional' }) as never });
  return (doc?.delivered as number | undefined) ?? 0;
}

describe('storage operations per batch', () => {
  it('a batch costs five writes, whether it holds 50 or 500 events of one team and day', async () => {
    await awayFromUtcMidnight({ needMs: 60_000, afterMs: 5_000 });
    const handler = createEmailEventsHandler({ rollups: createRollupsRepository(db), feed: createFeedRepository(db) });
    for (const n of [50, 500]) {
      const teamId = `team_ops_${n}_${Date.now().toString(36)}`;
      commands.length = 0;
      await handler(delivered(teamId, n).map((event) => ({ event, deliveryCount: 1 })), { log: logger });
      // Marks claimed (1 insert), the rollup applied (1 update), the batch settled on it (1 insert, not one update
      // per mark), token pulled (1 update), in that order; the feed (1 insert) beside them.
      const all = writes().map((c) => `${c.name} ${c.collection}`);
      expect(all.filter((w) => w !== 'insert event_feed')).toEqual(['insert count_marks', 'update daily_rollups', 'insert count_marks', 'update daily_rollups']);
      expect(all.filter((w) => w === 'insert event_feed')).toHaveLength(1);
      expect(commands.filter((c) => !WRITES.has(c.name))).toEqual([]);
      expect(await deliveredOf(teamId)).toBe(n);
    }
  });

  it('2,000 events through JetStream: each counted once, with five writes a batch and far fewer batches than events', async () => {
    await awayFromUtcMidnight({ needMs: 60_000, afterMs: 5_000 });
    const teamId = `team_ops_js_${Date.now().toString(36)}`;
    const events = delivered(teamId, 2_000);
    await Promise.all(events.map((e) => nats.js.publish(subjectFor(e.type), encodeEvent(e), { msgID: e.id })));
    commands.length = 0;
    consumer = createEmailEventsConsumer({ rollups: createRollupsRepository(db), feed: createFeedRepository(db), nats, logger });
    await consumer.start();
    await durablesIdle(nats.jsm, [EMAIL_EVENTS_DURABLE], { timeoutMs: 90_000, intervalMs: 50 });
    expect(await deliveredOf(teamId)).toBe(2_000);
    // A batch applies its counters once and pulls its token once: two rollup updates each.
    const batches = writes().filter((c) => c.name === 'update' && c.collection === 'daily_rollups').length / 2;
    expect(batches).toBeGreaterThan(0);
    expect(batches).toBeLessThanOrEqual(40);
    // Five writes a batch, whatever its size.
    expect(writes().length).toBe(5 * batches);
  });

  it('the sweep takes a settled batch\'s marks with its settlement (marks stay pending in their documents), and nothing younger', async () => {
    await awayFromUtcMidnight({ needMs: 60_000, afterMs: 5_000 });
    const teamId = `team_ops_sweep_${Date.now().toString(36)}`;
    const rollups = createRollupsRepository(db);
    const handler = createEmailEventsHandler({ rollups, feed: createFeedRepository(db) });
    await handler(delivered(teamId, 20).map((event) => ({ event, deliveryCount: 1 })), { log: logger });
    const marks = db.collection('count_marks');
    const ours = { $or: [{ teamId }, { rollupId: rollupIdOf({ teamId, day: utcDay(new Date()), domainId: 'dom_a', kind: 'transactional' }) }] };
    expect(await marks.countDocuments(ours)).toBe(21);
    expect(await marks.countDocuments({ ...ours, pending: true })).toBe(20);
    expect(await rollups.sweepMarks(new Date(Date.now() - 60_000))).toBe(0);
    await rollups.sweepMarks(new Date(Date.now() + 1_000));
    expect(await marks.countDocuments(ours)).toBe(0);
  });
});
