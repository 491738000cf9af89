import { MongoClient, type AnyBulkWriteOperation, type Collection, type Db, type Document, type Filter, type FindOptions, type WithId } from 'mongodb';

export interface MongoHandle {
  readonly client: MongoClient;
  readonly db: Db;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * One client per process, bound to the service's own database. Works against
 * MongoDB and FerretDB alike, so nothing here relies on transactions, change
 * streams or TTL indexes.
 */
export async function connectMongo(opts: { url: string; dbName: string; appName: string }): Promise<MongoHandle> {
  const client = new MongoClient(opts.url, {
    appName: opts.appName,
    serverSelectionTimeoutMS: 10_000,
    connectTimeoutMS: 10_000,
    maxPoolSize: 20,
  });
  await client.connect();
  const db = client.db(opts.dbName);
  return {
    client,
    db,
    async ping() {
      await db.command({ ping: 1 }, { timeoutMS: 2_000 });
    },
    async close() {
      await client.close();
    },
  };
}

/**
 * Whether the server is FerretDB (its buildInfo says so): the few places that shape a query or an index for
 * its SQLite backend, which serves only `_id` from the primary key, ask this rather than guess.
 */
export async function isFerretDb(db: Db): Promise<boolean> {
  return db.command({ buildInfo: 1 }).then((info) => 'ferretdbVersion' in info, () => false);
}

/**
 * Ids per `_id: {$in}` filter: MongoDB reads them through its `_id` index, and the embedded FerretDB through its
 * primary key up to 1,000 ids (deploy/ferretdb/patches.json; more would be a scan of the collection there).
 */
export const ID_IN_CHUNK = 500;

/** The documents with these ids (and `extra`), read by `_id: {$in}` in chunks of ID_IN_CHUNK. */
export async function findByIds<D extends Document>(
  col: Collection<D>, ids: readonly unknown[], extra: Filter<D> = {}, options: FindOptions = {},
): Promise<WithId<D>[]> {
  const out: WithId<D>[] = [];
  for (let i = 0; i < ids.length; i += ID_IN_CHUNK) {
    out.push(...await col.find({ _id: { $in: ids.slice(i, i + ID_IN_CHUNK) }, ...extra } as Filter<D>, options).toArray());
  }
  return out;
}

/** E11000: a unique index refused the write. */
export function isDuplicateKeyError(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  return e?.code === 11000 || (typeof e?.message === 'string' && /E11000|duplicate key/i.test(e.message));
}

/**
 * Inserts, leaving ids that exist as they are. Resolves to the indexes of `docs` known to be inserted
 * now (undefined when the server did not say which failed).
 */
export async function insertManyIgnoringDuplicates(col: Collection<Document>, docs: Document[]): Promise<Set<number> | undefined> {
  try {
    await col.insertMany(docs, { ordered: false });
    return new Set(docs.keys());
  } catch (err) {
    const writeErrors = (err as { writeErrors?: { code?: number; index?: number }[] | { code?: number; index?: number } }).writeErrors;
    const list = Array.isArray(writeErrors) ? writeErrors : writeErrors ? [writeErrors] : [];
    if (list.length > 0 && list.every((w) => w.code === 11000)) {
      if (!list.every((w) => typeof w.index === 'number')) return undefined;
      const failed = new Set(list.map((w) => w.index));
      return new Set([...docs.keys()].filter((i) => !failed.has(i)));
    }
    if (list.length === 0 && isDuplicateKeyError(err)) return undefined;
    throw err;
  }
}

/**
 * Moves documents to new `_id`s (a change of key layout): copies under the new ids first, one already there
 * being kept, then the originals deleted. A crash in between leaves both, and the next pass ends the same way, as
 * do two movers at once.
 */
export async function moveToNewIds<D extends { _id: unknown }>(col: Collection<D>, docs: readonly D[], idOf: (d: D) => D['_id']): Promise<void> {
  if (docs.length === 0) return;
  await insertManyIgnoringDuplicates(col as unknown as Collection<Document>, docs.map((d) => ({ ...d, _id: idOf(d) })));
  await col.deleteMany({ _id: { $in: docs.map((d) => d._id) } } as Filter<D>);
}

/** Drops those of the named indexes that exist (a retired layout's); a missing collection has none. */
export async function dropIndexesIfPresent<D extends Document>(col: Collection<D>, names: readonly string[]): Promise<void> {
  const existing = new Set((await col.listIndexes().toArray().catch(() => [])).map((i) => String(i['name'])));
  for (const name of names) if (existing.has(name)) await col.dropIndex(name);
}

/**
 * FerretDB v1 hangs on an update command carrying more than about 55 statements (measured:
 * 55 fine, 60 stuck for good, taking the database's writes with it). Bulk writes therefore
 * go in chunks small enough for it; MongoDB is indifferent to the difference.
 */
export const BULK_CHUNK = 50;

/** Unordered bulk write in chunks; returns the summed modified and upserted counts. */
export async function bulkWriteInChunks<T extends Document>(
  col: Collection<T>,
  ops: readonly AnyBulkWriteOperation<T>[],
): Promise<{ modifiedCount: number; upsertedCount: number; matchedCount: number }> {
  const total = { modifiedCount: 0, upsertedCount: 0, matchedCount: 0 };
  for (let i = 0; i < ops.length; i += BULK_CHUNK) {
    const res = await col.bulkWrite(ops.slice(i, i + BULK_CHUNK), { ordered: false });
    total.modifiedCount += res.modifiedCount;
    total.upsertedCount += res.upsertedCount;
    total.matchedCount += res.matchedCount;
  }
  return total;
}
