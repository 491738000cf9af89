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
  /** Which of these event ids were applied already: one `$in` read. */
  appliedAmong(eventIds: readonly string[]): Promise<Set<string>>;
  /** Records applied events in one insert; recording one twice is harmless. */
  recordMany(inputs: readonly { eventId: string; type: string; teamId: string }[], now?: Date): Promise<void>;
  /** Deletes entries past their expiry; resolves with how many went. */
  sweep(now?: Date): Promise<number>;
}

export function createProcessedEventsRepository(db: Db, opts: { retentionMs: number }): ProcessedEventsRepository {
  const col: Collection<ProcessedEventDoc> = db.collection<ProcessedEventDoc>('processed_events');
  return {
    async ensureIndexes() {
      await col.createIndex({ expiresAt: 1 }, { name: 'expires' });
    },
    async appliedAmong(eventIds) {
      if (eventIds.length === 0) return new Set();
      const docs = await col.find({ _id: { $in: [...eventIds] } }, { projection: { _id: 1 } }).toArray();
      return new Set(docs.map((d) => d._id));
    },
    async recordMany(inputs, now = new Date()) {
      if (inputs.length === 0) return;
      const expiresAt = new Date(now.getTime() + opts.retentionMs);
      try {
        await col.insertMany(inputs.map(({ eventId, type, teamId }) => ({ _id: eventId, type, teamId, processedAt: now, expiresAt })), { ordered: false });
      } catch (err) {
        // Unordered: every other entry went in; the refused ones were recorded already (a replayed batch).
        if (!isDuplicateKeyError(err)) throw err;
      }
    },
    async sweep(now = new Date()) {
      return (await col.deleteMany({ expiresAt: { $lt: now } })).deletedCount;
    },
  };
}
