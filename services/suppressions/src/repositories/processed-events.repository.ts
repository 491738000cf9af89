import { isDuplicateKeyError } from '@mailfleet/kit';
import type { Collection, Db } from 'mongodb';

interface ProcessedEventDoc {
  _id: string;
  type: string;
  teamId: string;
  processedAt: Date;
  /** No TTL indexes on FerretDB: a sweeper deletes entries past this date. */
  expiresAt: Date;
}

/**
 * The event ids the automatic path has applied, so a redelivery (or a
 * republish after a relay crash) changes nothing: in particular it does not
 * bring back an address that was deleted after the first delivery. Entries
 * outlive the event stream's retention (7 days), after which no redelivery
 * can happen.
 */
export interface ProcessedEventsRepository {
  ensureIndexes(): Promise<void>;
  has(eventId: string): Promise<boolean>;
  /** Records an applied event; recording it twice is harmless. */
  record(input: { eventId: string; type: string; teamId: string; now?: Date }): Promise<void>;
  /** Deletes entries past their expiry; resolves with how many went. */
  sweep(now?: Date): Promise<number>;
}

export function createProcessedEventsRepository(db: Db, opts: { retentionMs: number }): ProcessedEventsRepository {
  const col: Collection<ProcessedEventDoc> = db.collection<ProcessedEventDoc>('processed_events');
  return {
    async ensureIndexes() {
      await col.createIndex({ expiresAt: 1 }, { name: 'expires' });
    },
    async has(eventId) {
      return (await col.countDocuments({ _id: eventId }, { limit: 1 })) > 0;
    },
    async record({ eventId, type, teamId, now = new Date() }) {
      try {
        await col.insertOne({ _id: eventId, type, teamId, processedAt: now, expiresAt: new Date(now.getTime() + opts.retentionMs) });
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
    },
    async sweep(now = new Date()) {
      return (await col.deleteMany({ expiresAt: { $lt: now } })).deletedCount;
    },
  };
}
