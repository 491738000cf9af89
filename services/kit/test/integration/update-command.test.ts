import { testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type AnyBulkWriteOperation, type Document } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface Doc {
  _id: string;
  n?: number;
  outbox?: string[];
}

/**
 * An update command of many statements (a bulk write of updates) behaves as MongoDB's ordered one
 * whatever the server: each statement sees what those before it wrote, a failing statement keeps
 * those before it and stops those after it, and commands on several collections of one database at
 * once all land. The embedded FerretDB runs the statements of one command in one SQLite transaction
 * (deploy/ferretdb/_overlay/fsql/group.go); these hold its semantics to MongoDB's.
 */
const dbName = uniqueDbName('updatecmd');
let clients: MongoClient[];

beforeAll(async () => {
  clients = await Promise.all([0, 1, 2].map(async () => new MongoClient(testMongoUrl(), { maxPoolSize: 10 }).connect()));
});
afterAll(async () => {
  await clients[0]?.db(dbName).dropDatabase();
  await Promise.all(clients.map((c) => c.close()));
});

const col = (name: string, i = 0) => clients[i % clients.length]!.db(dbName).collection<Doc>(name);
const inc = (_id: string): AnyBulkWriteOperation<Doc> => ({ updateOne: { filter: { _id }, update: { $inc: { n: 1 } } } });

describe('an update command of many statements', () => {
  it('each statement sees what the ones before it wrote, an upserted document included', async () => {
    const res = await col('seen').bulkWrite([
      { updateOne: { filter: { _id: 'g1' }, update: { $inc: { n: 1 } }, upsert: true } },
      inc('g1'),
      { updateOne: { filter: { _id: 'g1', n: 2 }, update: { $push: { outbox: 'x' } } } },
      inc('g1'),
    ]);
    expect(res.upsertedCount).toBe(1);
    expect(res.matchedCount).toBe(3);
    expect(await col('seen').findOne({ _id: 'g1' })).toEqual({ _id: 'g1', n: 3, outbox: ['x'] });
  });

  it('a statement that fails keeps the ones before it and stops the ones after it', async () => {
    // `n` of 'bad' is text, so $inc fails on it.
    await clients[0]!.db(dbName).collection<Document & { _id: string }>('fail').insertMany([{ _id: 'a', n: 0 }, { _id: 'bad', n: 'text' }, { _id: 'b', n: 0 }]);
    await expect(col('fail').bulkWrite([inc('a'), inc('a'), inc('bad'), inc('b')])).rejects.toThrow();
    expect(await clients[0]!.db(dbName).collection<Document & { _id: string }>('fail').find({}, { sort: { _id: 1 } }).toArray()).toEqual([
      { _id: 'a', n: 2 }, { _id: 'b', n: 0 }, { _id: 'bad', n: 'text' },
    ]);
    // The next command on the collection is not held up by the failed one.
    await col('fail').bulkWrite([inc('b')]);
    expect((await col('fail').findOne({ _id: 'b' }))?.n).toBe(1);
  });

  it('commands on several collections of one database at once all land, every statement once', async () => {
    const ids = Array.from({ length: 10 }, (_, i) => `k${i}`);
    await Promise.all(['x', 'y'].map((c) => col(c).insertMany(ids.map((_id) => ({ _id, n: 0 })))));
    const rounds = 8;
    await Promise.all([
      ...Array.from({ length: rounds }, (_, r) => col('x', r).bulkWrite(ids.flatMap((id) => [inc(id), inc(id)]))),
      ...Array.from({ length: rounds }, (_, r) => col('y', r + 1).bulkWrite(ids.map(inc))),
      ...Array.from({ length: rounds }, (_, r) => col('z', r + 2).insertMany(ids.map((id) => ({ _id: `${id}-${r}` })))),
    ]);
    expect((await col('x').find().toArray()).map((d) => d.n)).toEqual(ids.map(() => 2 * rounds));
    expect((await col('y').find().toArray()).map((d) => d.n)).toEqual(ids.map(() => rounds));
    expect(await col('z').countDocuments()).toBe(rounds * ids.length);
  });
});
