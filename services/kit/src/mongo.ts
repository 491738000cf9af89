import { MongoClient, type Db } from 'mongodb';

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

/** E11000: a unique index refused the write. */
export function isDuplicateKeyError(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  return e?.code === 11000 || (typeof e?.message === 'string' && /E11000|duplicate key/i.test(e.message));
}
