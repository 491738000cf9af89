import { testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type AnyBulkWriteOperation, type Document } from 'mongodb';

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

const named = (name: string, i = 0) => clients[i % clients.length]!.db(dbName).collection<Doc>(name);
const col = (i: number) => named('docs', i);

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

/**
 * An update command of many statements (a bulk write of updates) behaves as MongoDB's ordered one
 * whatever the server: each statement sees what those before it wrote, a failing statement keeps
 * those before it and stops those after it, and commands on several collections of one database at
 * once all land. The embedded FerretDB runs the statements of one command in one SQLite transaction
 * (deploy/ferretdb/_overlay/fsql/group.go); these hold its semantics to MongoDB's.
 */
const inc = (_id: string): AnyBulkWriteOperation<Doc> => ({ updateOne: { filter: { _id }, update: { $inc: { n: 1 } } } });

describe('an update command of many statements', () => {
  it('each statement sees what the ones before it wrote, an upserted document included', async () => {
    const res = await named('seen').bulkWrite([
      { updateOne: { filter: { _id: 'g1' }, update: { $inc: { n: 1 } }, upsert: true } },
      inc('g1'),
      { updateOne: { filter: { _id: 'g1', n: 2 }, update: { $push: { outbox: 'x' } } } },
      inc('g1'),
    ]);
    expect(res.upsertedCount).toBe(1);
    expect(res.matchedCount).toBe(3);
    expect(await named('seen').findOne({ _id: 'g1' })).toEqual({ _id: 'g1', n: 3, outbox: ['x'] });
  });

  it('a statement that fails keeps the ones before it and stops the ones after it', async () => {
    // `n` of 'bad' is text, so $inc fails on it.
    await clients[0]!.db(dbName).collection<Document & { _id: string }>('fail').insertMany([{ _id: 'a', n: 0 }, { _id: 'bad', n: 'text' }, { _id: 'b', n: 0 }]);
    await expect(named('fail').bulkWrite([inc('a'), inc('a'), inc('bad'), inc('b')])).rejects.toThrow();
    expect(await clients[0]!.db(dbName).collection<Document & { _id: string }>('fail').find({}, { sort: { _id: 1 } }).toArray()).toEqual([
      { _id: 'a', n: 2 }, { _id: 'b', n: 0 }, { _id: 'bad', n: 'text' },
    ]);
    // The next command on the collection is not held up by the failed one.
    await named('fail').bulkWrite([inc('b')]);
    expect((await named('fail').findOne({ _id: 'b' }))?.n).toBe(1);
  });

  it('commands on several collections of one database at once all land, every statement once', async () => {
    const ids = Array.from({ length: 10 }, (_, i) => `k${i}`);
    await Promise.all(['x', 'y'].map((c) => named(c).insertMany(ids.map((_id) => ({ _id, n: 0 })))));
    const rounds = 8;
    await Promise.all([
      ...Array.from({ length: rounds }, (_, r) => named('x', r).bulkWrite(ids.flatMap((id) => [inc(id), inc(id)]))),
      ...Array.from({ length: rounds }, (_, r) => named('y', r + 1).bulkWrite(ids.map(inc))),
      ...Array.from({ length: rounds }, (_, r) => named('z', r + 2).insertMany(ids.map((id) => ({ _id: `${id}-${r}` })))),
    ]);
    expect((await named('x').find().toArray()).map((d) => d.n)).toEqual(ids.map(() => 2 * rounds));
    expect((await named('y').find().toArray()).map((d) => d.n)).toEqual(ids.map(() => rounds));
    expect(await named('z').countDocuments()).toBe(rounds * ids.length);
  });
});
