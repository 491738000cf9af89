import { isDuplicateKeyError } from '@mailfleet/kit';
import type { Collection, Db } from 'mongodb';

interface CounterDoc {
  _id: string;
  count: number;
  /** FerretDB has no TTL indexes: a sweeper deletes counters past this date. */
  expiresAt: Date;
}

export interface TakeResult {
  readonly allowed: boolean;
  /** Count in the window after this call (unchanged when denied). */
  readonly count: number;
}

/**
 * Atomic bounded counters shared by every replica: rate-limit windows and
 * plan quotas. `take` adds `amount` only when the result stays within
 * `limit`, in one conditional single-document update, so a denied call
 * consumes nothing and concurrent callers can never overshoot.
 */
export interface CountersRepository {
  ensureIndexes(): Promise<void>;
  take(key: string, amount: number, limit: number, expiresAt: Date): Promise<TakeResult>;
  /** Gives units back; never below zero (a counter swept or reset in between keeps 0). */
  give(key: string, amount: number): Promise<void>;
  read(key: string): Promise<number>;
  /** Counts of several counters in one read; missing ones are 0. */
  readMany(keys: readonly string[]): Promise<Map<string, number>>;
  /**
   * Adds counted units to several counters in one batched write, without a
   * limit: the units were already admitted by the replica that counted them.
   */
  add(entries: readonly { key: string; amount: number; expiresAt: Date }[]): Promise<void>;
  sweep(now?: Date): Promise<number>;
}

export function createCountersRepository(db: Db, collectionName: string): CountersRepository {
  const col: Collection<CounterDoc> = db.collection<CounterDoc>(collectionName);

  async function read(key: string): Promise<number> {
    return (await col.findOne({ _id: key }))?.count ?? 0;
  }

  return {
    async ensureIndexes() {
      await col.createIndex({ expiresAt: 1 }, { name: 'expires' });
    },
    async take(key, amount, limit, expiresAt) {
      if (amount > limit) return { allowed: false, count: await read(key) };
      try {
        const doc = await col.findOneAndUpdate(
          { _id: key, count: { $lte: limit - amount } },
          { $inc: { count: amount }, $setOnInsert: { expiresAt } },
          { upsert: true, returnDocument: 'after' },
        );
        return { allowed: true, count: doc?.count ?? amount };
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
      // The window exists: either it is full, or two first takes raced on the insert. Retry without upsert.
      const doc = await col.findOneAndUpdate({ _id: key, count: { $lte: limit - amount } }, { $inc: { count: amount } }, { returnDocument: 'after' });
      if (doc) return { allowed: true, count: doc.count };
      return { allowed: false, count: await read(key) };
    },
    async give(key, amount) {
      await col.updateOne({ _id: key, count: { $gte: amount } }, { $inc: { count: -amount } });
    },
    read,
    async readMany(keys) {
      const out = new Map<string, number>(keys.map((k) => [k, 0]));
      if (keys.length === 0) return out;
      for (const d of await col.find({ _id: { $in: [...keys] } }).toArray()) out.set(d._id, d.count);
      return out;
    },
    async add(entries) {
      const ops = entries.filter((e) => e.amount > 0).map((e) => ({
        updateOne: { filter: { _id: e.key }, update: { $inc: { count: e.amount }, $setOnInsert: { expiresAt: e.expiresAt } }, upsert: true },
      }));
      if (ops.length === 0) return;
      try {
        await col.bulkWrite(ops, { ordered: false });
      } catch (err) {
        // Two replicas folding a new window at once can race on its insert: the losers find the document now and add to it.
        const failed = (err as { writeErrors?: { index: number; code?: number }[] }).writeErrors;
        if (!failed?.length || failed.some((w) => w.code !== 11000)) throw err;
        await col.bulkWrite(failed.map((w) => ops[w.index]!), { ordered: false });
      }
    },
    async sweep(now = new Date()) {
      return (await col.deleteMany({ expiresAt: { $lt: now } })).deletedCount;
    },
  };
}
