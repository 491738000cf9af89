import { testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, ObjectId, type Collection } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Queries the embedded FerretDB is patched for (deploy/ferretdb/patches.json) must answer exactly as MongoDB does.
 * Pages keyed by `_id` (the analytics feed) ask for a string range of `_id`, sorted by `_id`, and batches ask for
 * `_id: {$in: [...]}`. The embedded FerretDB is patched to narrow (and sort) such queries in SQLite
 * (deploy/ferretdb/patches.json) instead of decoding the whole collection; these tests hold that the answer is
 * still exactly MongoDB's: bytewise string order, strings only, with skip, limit and other filters applied after
 * the order, and `$in` matching by type as well as value.
 */
type Id = string | number | ObjectId | { sub: string };
interface Doc {
  _id: Id;
  tag: string;
}

const dbName = uniqueDbName('id_range');
let client: MongoClient;
let col: Collection<Doc>;

/** Strings whose JSON text orders differently from the strings themselves, and their neighbours. */
const strings = [
  'k|', 'k|a', 'k|a ', 'k|a!', 'k|a"', 'k|a#', 'k|a\\', 'k|a<', 'k|a>b', 'k|a&', 'k|a\u0001', 'k|a\n', 'k|ab',
  'k|é', 'k|z', 'k|\u2028', 'k|~', 'k|0000000000123|evt_1', 'k|0000000000123|evt_2', 'k}', 'j|x', 'l', '',
];
const others: Id[] = [1, 2.5, new ObjectId('6a1b2c3d4e5f60718293a4b5'), new ObjectId('0a1b2c3d4e5f60718293a4b5'), { sub: 'k|b' }];

const bytewise = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
const inRange = (lo: (s: string) => boolean, hi: (s: string) => boolean) => strings.filter((s) => lo(s) && hi(s)).sort(bytewise);

beforeAll(async () => {
  client = await new MongoClient(testMongoUrl()).connect();
  col = client.db(dbName).collection<Doc>('docs');
  // Inserted in an order unrelated to the answer, so the store's row order proves nothing.
  const all: Id[] = [...others, ...strings].reverse();
  await col.insertMany(all.map((_id, i) => ({ _id, tag: i % 2 === 0 ? 'even' : 'odd' })));
});
afterAll(async () => {
  await client?.db(dbName).dropDatabase();
  await client?.close();
});

const ids = (docs: Doc[]) => docs.map((d) => d._id);

describe('an _id string range sorted by _id', () => {
  it('returns every string in the range, ascending and descending, in bytewise order', async () => {
    const expected = inRange((s) => bytewise(s, 'k|') >= 0, (s) => bytewise(s, 'k}') < 0);
    expect(expected.length).toBeGreaterThan(15);
    expect(ids(await col.find({ _id: { $gte: 'k|', $lt: 'k}' } }).sort({ _id: 1 }).toArray())).toEqual(expected);
    expect(ids(await col.find({ _id: { $gte: 'k|', $lt: 'k}' } }).sort({ _id: -1 }).toArray())).toEqual([...expected].reverse());
  });

  it('keeps the bounds exact ($gt, $lte) where a JSON text comparison would not', async () => {
    const expected = inRange((s) => bytewise(s, 'k|a') > 0, (s) => bytewise(s, 'k|a\\') <= 0);
    // 'k|a ' and 'k|a!' sort above 'k|a' as strings, below it as JSON text ("k|a " < "k|a").
    expect(expected).toEqual(expect.arrayContaining(['k|a ', 'k|a!', 'k|a"', 'k|a\\']));
    expect(ids(await col.find({ _id: { $gt: 'k|a', $lte: 'k|a\\' } }).sort({ _id: 1 }).toArray())).toEqual(expected);
  });

  it('never returns an _id of another type, even one whose text falls in the range', async () => {
    const found = await col.find({ _id: { $gte: '0', $lt: '~' } }).sort({ _id: -1 }).toArray();
    expect(ids(found)).toEqual(inRange((s) => bytewise(s, '0') >= 0, (s) => bytewise(s, '~') < 0).reverse());
    expect(found.every((d) => typeof d._id === 'string')).toBe(true);
  });

  it('applies other filters, skip and limit after the order', async () => {
    const all = await col.find({ _id: { $gte: 'k|', $lt: 'k}' } }).sort({ _id: -1 }).toArray();
    const odd = all.filter((d) => d.tag === 'odd').map((d) => d._id);
    expect(odd.length).toBeGreaterThan(6);
    const page = await col.find({ _id: { $gte: 'k|', $lt: 'k}' }, tag: 'odd' }).sort({ _id: -1 }).skip(2).limit(3).toArray();
    expect(ids(page)).toEqual(odd.slice(2, 5));
    // A batch smaller than the result makes the driver page with getMore: the order holds across batches.
    const batched = await col.find({ _id: { $gte: 'k|', $lt: 'k}' } }).sort({ _id: 1 }).batchSize(2).toArray();
    expect(ids(batched)).toEqual(ids(all).reverse());
  });
});

describe('an _id $in', () => {
  const hex = '6a1b2c3d4e5f60718293a4b5';

  it('returns exactly the listed ids, and a string never matches the ObjectID of the same hex', async () => {
    const found = await col.find({ _id: { $in: [hex, 'k|a"', 'k|é', 'absent'] } }).toArray();
    expect(ids(found).sort(bytewise as (a: Id, b: Id) => number)).toEqual(['k|a"', 'k|é'].sort(bytewise));
    const asObjectId = await col.find({ _id: { $in: [new ObjectId(hex), 'k|z'] } }).toArray();
    expect(asObjectId.map((d) => String(d._id)).sort()).toEqual([hex, 'k|z']);
    expect(asObjectId.find((d) => d._id instanceof ObjectId)).toBeDefined();
  });

  it('applies the rest of the filter, and mixed types (not narrowed) still match as MongoDB does', async () => {
    const listed = ['k|a', 'k|ab', 'k|z', 'k|a ', 'j|x'];
    const byTag = async (tag: string) => ids(await col.find({ _id: { $in: listed }, tag }).toArray()).sort();
    const [odd, even] = [await byTag('odd'), await byTag('even')];
    expect(odd).toEqual(ids(await col.find({ tag: 'odd' }).toArray()).filter((id) => listed.includes(id as string)).sort());
    expect([...odd, ...even].sort()).toEqual([...listed].sort());
    expect(odd.length * even.length).toBeGreaterThan(0);
    const mixed = await col.find({ _id: { $in: [1, 'k|~', { sub: 'k|b' }] } }).toArray();
    expect(mixed).toHaveLength(3);
  });
});

describe('a $group with several accumulators', () => {
  it('sums every field, per group, in one aggregation (analytics sums its counters so)', async () => {
    const counters = client.db(dbName).collection<{ _id: string; day: string; sent: number; delivered: number; bounced?: number }>('counters');
    await counters.insertMany([
      { _id: 'a', day: 'd1', sent: 3, delivered: 2 },
      { _id: 'b', day: 'd1', sent: 4, delivered: 4, bounced: 1 },
      { _id: 'c', day: 'd2', sent: 10, delivered: 7, bounced: 2 },
    ]);
    const group = { sent: { $sum: '$sent' }, delivered: { $sum: '$delivered' }, bounced: { $sum: '$bounced' }, rows: { $sum: 1 } };
    const all = await counters.aggregate([{ $match: {} }, { $group: { _id: null, ...group } }]).toArray();
    expect(all).toEqual([{ _id: null, sent: 17, delivered: 13, bounced: 3, rows: 3 }]);
    const byDay = await counters.aggregate([{ $match: { sent: { $gt: 0 } } }, { $group: { _id: '$day', ...group } }]).toArray();
    expect(byDay.sort((x, y) => String(x['_id']).localeCompare(String(y['_id'])))).toEqual([
      { _id: 'd1', sent: 7, delivered: 6, bounced: 1, rows: 2 },
      { _id: 'd2', sent: 10, delivered: 7, bounced: 2, rows: 1 },
    ]);
  });
});
