import { isDuplicateKeyError } from '@mailfleet/kit';
import type { Collection, Db } from 'mongodb';

interface ProcessedDoc {
  /** `<consumer>:<event id>`. */
  _id: string;
  processedAt: Date;
  /** FerretDB has no TTL indexes: a sweeper deletes records past this date. */
  expiresAt: Date;
}

/**
 * Event ids a consumer has fully handled, so that a redelivery (after a nak,
 * a crash before the ack, or a republish) changes nothing. Kept as long as the
 * stream keeps events.
 */
export interface ProcessedEventsRepository {
  ensureIndexes(): Promise<void>;
  /** Which of these event ids the consumer has handled: one `$in` read. */
  seenAmong(consumer: string, eventIds: readonly string[]): Promise<Set<string>>;
  /** Records handled events in one insert; recording one twice is harmless. */
  recordMany(consumer: string, eventIds: readonly string[], now: Date, retentionMs: number): Promise<void>;
  sweep(now: Date): Promise<number>;
}

export function createProcessedEventsRepository(db: Db): ProcessedEventsRepository {
  const col: Collection<ProcessedDoc> = db.collection<ProcessedDoc>('processed_events');
  return {
    async ensureIndexes() {
      await col.createIndex({ expiresAt: 1 }, { name: 'expires' });
    },
    async seenAmong(consumer, eventIds) {
      if (eventIds.length === 0) return new Set();
      const docs = await col.find({ _id: { $in: eventIds.map((id) => `${consumer}:${id}`) } }, { projection: { _id: 1 } }).toArray();
      return new Set(docs.map((d) => d._id.slice(consumer.length + 1)));
    },
    async recordMany(consumer, eventIds, now, retentionMs) {
      if (eventIds.length === 0) return;
      const expiresAt = new Date(now.getTime() + retentionMs);
      try {
        await col.insertMany(eventIds.map((id) => ({ _id: `${consumer}:${id}`, processedAt: now, expiresAt })), { ordered: false });
      } catch (err) {
        // Unordered: the others went in; a refused one was recorded already (a replayed batch, another replica).
        if (!isDuplicateKeyError(err)) throw err;
      }
    },
    async sweep(now) {
      return (await col.deleteMany({ expiresAt: { $lt: now } })).deletedCount;
    },
  };
}
