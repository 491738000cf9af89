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
  seen(consumer: string, eventId: string): Promise<boolean>;
  record(consumer: string, eventId: string, now: Date, retentionMs: number): Promise<void>;
  sweep(now: Date): Promise<number>;
}

export function createProcessedEventsRepository(db: Db): ProcessedEventsRepository {
  const col: Collection<ProcessedDoc> = db.collection<ProcessedDoc>('processed_events');
  return {
    async ensureIndexes() {
      await col.createIndex({ expiresAt: 1 }, { name: 'expires' });
    },
    async seen(consumer, eventId) {
      return (await col.countDocuments({ _id: `${consumer}:${eventId}` }, { limit: 1 })) > 0;
    },
    async record(consumer, eventId, now, retentionMs) {
      try {
        await col.insertOne({ _id: `${consumer}:${eventId}`, processedAt: now, expiresAt: new Date(now.getTime() + retentionMs) });
      } catch (err) {
        // Another replica handled the same delivery at the same time: already recorded.
        if (!isDuplicateKeyError(err)) throw err;
      }
    },
    async sweep(now) {
      return (await col.deleteMany({ expiresAt: { $lt: now } })).deletedCount;
    },
  };
}
