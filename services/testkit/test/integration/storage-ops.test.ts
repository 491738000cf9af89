import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectCountingClient, countStorageOps, testMongoUrl, uniqueDbName, type StorageOpsCounter } from '@mailfleet/testkit';

describe('storage operations counter (real FerretDB)', () => {
  let client: MongoClient;
  let ops: StorageOpsCounter;
  const dbName = uniqueDbName('storage_ops');

  beforeAll(async () => {
    ({ client, ops } = await connectCountingClient(testMongoUrl(), { maxPoolSize: 2 }));
  });
  afterAll(async () => {
    ops.detach();
    await client.db(dbName).dropDatabase().catch(() => undefined);
    await client.close();
  });

  it('counts each command once per database, command and collection, a batched insert as one', async () => {
    const db = client.db(dbName);
    await db.collection('warm').insertOne({ warm: true }); // before start(): not counted
    ops.start();
    await db.collection('emails').insertMany([{ n: 1 }, { n: 2 }, { n: 3 }]);
    await db.collection('emails').insertOne({ n: 4 });
    await db.collection('emails').updateOne({ n: 1 }, { $set: { seen: true } });
    await db.collection('events').findOne({ n: 9 });
    await db.command({ ping: 1 }); // liveness, not storage
    const report = ops.stop();
    await db.collection('emails').insertOne({ n: 5 }); // after stop(): not counted

    expect(report.byKey).toEqual([
      { database: dbName, command: 'insert', collection: 'emails', count: 2 },
      { database: dbName, command: 'update', collection: 'emails', count: 1 },
      { database: dbName, command: 'find', collection: 'events', count: 1 },
    ]);
    expect(report.total).toBe(4);
    expect(report.count({ command: 'insert' })).toBe(2);
    expect(report.count({ collection: 'emails' })).toBe(3);
    expect(report.count({ database: 'elsewhere' })).toBe(0);
  });

  it('names the collection of a getMore and starts from zero on each start()', async () => {
    const db = client.db(dbName);
    await db.collection('many').insertMany(Array.from({ length: 5 }, (_, n) => ({ n })));
    ops.start();
    const all = await db.collection('many').find({}, { batchSize: 2 }).toArray();
    const report = ops.stop();
    expect(all).toHaveLength(5);
    expect(report.count({ command: 'find', collection: 'many' })).toBe(1);
    expect(report.count({ command: 'getMore', collection: 'many' })).toBeGreaterThanOrEqual(2);
    expect(report.count({ command: 'insert' })).toBe(0);
  });

  it('refuses a client without command monitoring instead of counting nothing', () => {
    const plain = new MongoClient(testMongoUrl());
    expect(() => countStorageOps(plain)).toThrow(/monitorCommands/);
  });
});
