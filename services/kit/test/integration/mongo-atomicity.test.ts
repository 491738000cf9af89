import { testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient } from 'mongodb';

interface Doc {
  _id: string;
  n?: number;
  status?: string;
  outbox?: string[];
  by?: number;
}
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * mailfleet relies on single-document atomicity (counters with $inc, the
 * outbox's $push/$pull beside a state change). MongoDB gives it; FerretDB v1
 * alone does not (concurrent writes to one document lose each other), so the
 * embedded launcher serialises writes per database. These tests hold the
 * guarantee in place for whatever server the run uses.
 */
const dbName = uniqueDbName('atomicity');
let clients: MongoClient[];

beforeAll(async () => {
  clients = await Promise.all([0, 1, 2].map(async () => new MongoClient(testMongoUrl(), { maxPoolSize: 10 }).connect()));
});
afterAll(async () => {
  await clients[0]?.db(dbName).dropDatabase();
  await Promise.all(clients.map((c) => c.close()));
});

const col = (i: number) => clients[i % clients.length]!.db(dbName).collection<Doc>('docs');

describe('single-document atomicity', () => {
  it('concurrent $inc from several clients are all counted', async () => {
    await col(0).insertOne({ _id: 'counter', n: 0 });
    await Promise.all(Array.from({ length: 40 }, (_, i) => col(i).updateOne({ _id: 'counter' }, { $inc: { n: 1 } })));
    expect((await col(0).findOne({ _id: 'counter' }))?.n).toBe(40);
  });

  it('a conditional $inc never passes its bound under contention', async () => {
    await col(0).insertOne({ _id: 'bounded', n: 0 });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => col(i).updateOne({ _id: 'bounded', n: { $lt: 7 } }, { $inc: { n: 1 } })));
    expect(results.filter((r) => r.modifiedCount === 1)).toHaveLength(7);
    expect((await col(0).findOne({ _id: 'bounded' }))?.n).toBe(7);
  });

  it('updates of different fields of one document never undo each other (outbox push vs pull)', async () => {
    for (let round = 0; round < 15; round++) {
      const id = `outbox-${round}`;
      await col(0).insertOne({ _id: id, status: 'NEW', outbox: ['e1'] });
      await Promise.all([
        col(1).updateOne({ _id: id }, { $set: { status: 'SENT' }, $push: { outbox: 'e2' } }),
        col(2).updateOne({ _id: id }, { $pull: { outbox: 'e1' } }),
      ]);
      expect(await col(0).findOne({ _id: id })).toEqual({ _id: id, status: 'SENT', outbox: ['e2'] });
    }
  });

  it('a unique key admits exactly one of many concurrent inserts', async () => {
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => col(i).insertOne({ _id: 'claim', by: i })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
  });
});
