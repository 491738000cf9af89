import { createEvent, createLogger, type EventEnvelope } from '@mailfleet/kit';
import { countStorageOps, testMongoUrl, uniqueDbName, type StorageOpsCounter } from '@mailfleet/testkit';
import { MongoClient, type Db } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAutoSuppressionHandler } from '../../src/events/auto-suppression.consumer.js';
import { createProcessedEventsRepository } from '../../src/repositories/processed-events.repository.js';
import { createSuppressionsRepository } from '../../src/repositories/suppressions.repository.js';

/** The automatic path's storage budget: operations per batch of events, not per event (driver command monitoring). */
const dbName = uniqueDbName('supp_auto_ops');
const log = createLogger({ service: 'suppressions-ops', level: 'silent' });
let client: MongoClient;
let db: Db;
let ops: StorageOpsCounter;

beforeAll(async () => {
  client = await new MongoClient(testMongoUrl(), { monitorCommands: true }).connect();
  db = client.db(dbName);
  ops = countStorageOps(client);
});
afterAll(async () => {
  ops?.detach();
  await db?.dropDatabase();
  await client?.close();
});

describe('automatic suppressions in batches', () => {
  it('a batch of 100 events costs one read, one suppressions write per 50 addresses and one insert; a replay only the read', async () => {
    const suppressions = createSuppressionsRepository(db);
    const processed = createProcessedEventsRepository(db, { retentionMs: 60_000 });
    await Promise.all([suppressions.ensureIndexes(), processed.ensureIndexes()]);
    const handler = createAutoSuppressionHandler({ suppressions, processed });
    const events: EventEnvelope[] = Array.from({ length: 100 }, (_, i) => (i % 2 === 0
      ? createEvent('email.bounced', 'team_ops', { id: `em_${i}`, to: [`b${i}@example.com`], bounce: { type: 'Permanent', subType: 'General', message: '550' } })
      : createEvent('email.complained', 'team_ops', { id: `em_${i}`, to: [`c${i}@example.com`] })));
    const batch = events.map((event) => ({ event, deliveryCount: 1 }));

    ops.start();
    await handler(batch, { log });
    const first = ops.stop();
    expect(first.count({ database: dbName, command: 'find', collection: 'processed_events' })).toBe(1);
    expect(first.count({ database: dbName, command: 'update', collection: 'suppressions' })).toBe(2);
    expect(first.count({ database: dbName, command: 'insert', collection: 'processed_events' })).toBe(1);
    expect(first.count({ database: dbName })).toBe(4);
    expect(await db.collection('suppressions').countDocuments({ teamId: 'team_ops' })).toBe(100);

    ops.start();
    await handler(batch, { log });
    const replay = ops.stop();
    expect(replay.count({ database: dbName })).toBe(1);
    expect(await db.collection('processed_events').countDocuments()).toBe(100);
  });
});
