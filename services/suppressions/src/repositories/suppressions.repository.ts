import { BULK_CHUNK, isDuplicateKeyError, newId } from '@mailfleet/kit';
import { MongoBulkWriteError, type AnyBulkWriteOperation, type Collection, type Db, type Filter, type UpdateFilter } from 'mongodb';
import { escapeRegex, type SuppressionReason } from '../domain/suppressions.js';

export interface SuppressionRecord {
  readonly id: string;
  readonly teamId: string;
  /** Canonical (lower-case) address. */
  readonly email: string;
  readonly reason: SuppressionReason;
  readonly source: string | undefined;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

interface SuppressionDoc {
  _id: string;
  teamId: string;
  email: string;
  reason: SuppressionReason;
  source?: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface SuppressionQuery {
  readonly reason?: SuppressionReason | undefined;
  /** Lower-case text the address must contain, matched literally. */
  readonly search?: string | undefined;
  readonly skip: number;
  readonly limit: number;
}

/** One change of the automatic path, applied in the order given. */
export type AutomaticWrite =
  | { readonly kind: 'suppress'; readonly teamId: string; readonly email: string; readonly reason: SuppressionReason; readonly source: string | undefined; readonly at: Date }
  /** Deletes the address's entry if it is UNSUBSCRIBE and not newer than `at` (a later opt-out stays). */
  | { readonly kind: 'lift'; readonly teamId: string; readonly email: string; readonly at: Date };

export interface SuppressionsRepository {
  ensureIndexes(): Promise<void>;
  /**
   * Suppresses an address, or gives the existing entry the new reason and
   * source (id and createdAt stay): one single-document write, and the unique
   * (teamId, email) index keeps one entry per address even between replicas.
   */
  upsert(input: { teamId: string; email: string; reason: SuppressionReason; source: string | undefined; now?: Date }): Promise<SuppressionRecord>;
  /**
   * Applies a batch of automatic changes as one ordered bulk write (the same
   * upsert as `upsert`, and conditional deletes), so a batch of events costs
   * one write whatever its size. Every change is idempotent: applying a batch
   * again after a crash writes the same values.
   */
  applyAutomatic(writes: readonly AutomaticWrite[]): Promise<{ upserted: number; lifted: number }>;
  /** A page, newest first, and the number of entries the filters match. */
  list(teamId: string, query: SuppressionQuery): Promise<{ items: SuppressionRecord[]; total: number }>;
  /** False when the team has no entry for the address. */
  remove(teamId: string, email: string): Promise<boolean>;
  /** The entries of the given canonical addresses: one `$in` query on the unique index. */
  findByEmails(teamId: string, emails: readonly string[]): Promise<SuppressionRecord[]>;
}

function toRecord(d: SuppressionDoc): SuppressionRecord {
  return { id: d._id, teamId: d.teamId, email: d.email, reason: d.reason, source: d.source, createdAt: d.createdAt, updatedAt: d.updatedAt };
}

export function createSuppressionsRepository(db: Db): SuppressionsRepository {
  const col: Collection<SuppressionDoc> = db.collection<SuppressionDoc>('suppressions');

  function upsertUpdate(input: { reason: SuppressionReason; source: string | undefined; now: Date }): UpdateFilter<SuppressionDoc> {
    return {
      $set: { reason: input.reason, updatedAt: input.now, ...(input.source !== undefined ? { source: input.source } : {}) },
      $setOnInsert: { _id: newId('sup'), createdAt: input.now },
      ...(input.source === undefined ? { $unset: { source: '' } } : {}),
    };
  }

  function automaticOp(w: AutomaticWrite): AnyBulkWriteOperation<SuppressionDoc> {
    if (w.kind === 'lift') return { deleteOne: { filter: { teamId: w.teamId, email: w.email, reason: 'UNSUBSCRIBE', updatedAt: { $lte: w.at } } } };
    return { updateOne: { filter: { teamId: w.teamId, email: w.email }, update: upsertUpdate({ reason: w.reason, source: w.source, now: w.at }), upsert: true } };
  }

  async function upsertOnce(input: { teamId: string; email: string; reason: SuppressionReason; source: string | undefined; now: Date }) {
    return col.findOneAndUpdate({ teamId: input.teamId, email: input.email }, upsertUpdate(input), { upsert: true, returnDocument: 'after' });
  }

  return {
    async ensureIndexes() {
      await col.createIndex({ teamId: 1, email: 1 }, { unique: true, name: 'team_email_unique' });
      await col.createIndex({ teamId: 1, createdAt: -1, _id: -1 }, { name: 'team_created' });
      await col.createIndex({ teamId: 1, reason: 1, createdAt: -1, _id: -1 }, { name: 'team_reason_created' });
    },

    async upsert({ now = new Date(), ...input }) {
      let doc: SuppressionDoc | null;
      try {
        doc = await upsertOnce({ ...input, now });
      } catch (err) {
        // Two writers inserted the same new address at once: the unique index refused
        // the loser, whose retry now finds the winner's entry and updates it.
        if (!isDuplicateKeyError(err)) throw err;
        doc = await upsertOnce({ ...input, now });
      }
      if (!doc) throw new Error('upsert returned no document');
      return toRecord(doc);
    },

    async applyAutomatic(writes) {
      const total = { upserted: 0, lifted: 0 };
      // In order (an opt-out and an opt-in of one address in one batch apply as they happened),
      // and in chunks FerretDB takes in one command.
      for (let i = 0; i < writes.length; i += BULK_CHUNK) {
        const ops = writes.slice(i, i + BULK_CHUNK).map(automaticOp);
        const run = () => col.bulkWrite(ops, { ordered: true });
        let res;
        try {
          res = await run();
        } catch (err) {
          // Another replica inserted one of these new addresses at the same moment: the unique index
          // refused ours and stopped the ordered chunk there; run it again, now updating that entry.
          if (!(err instanceof MongoBulkWriteError) || !isDuplicateKeyError(err)) throw err;
          res = await run();
        }
        total.upserted += res.upsertedCount + res.modifiedCount;
        total.lifted += res.deletedCount;
      }
      return total;
    },

    async list(teamId, query) {
      const filter: Filter<SuppressionDoc> = { teamId };
      if (query.reason) filter.reason = query.reason;
      if (query.search) filter.email = { $regex: escapeRegex(query.search) };
      const [docs, total] = await Promise.all([
        col.find(filter).sort({ createdAt: -1, _id: -1 }).skip(query.skip).limit(query.limit).toArray(),
        col.countDocuments(filter),
      ]);
      return { items: docs.map(toRecord), total };
    },

    async remove(teamId, email) {
      const res = await col.deleteOne({ teamId, email });
      return res.deletedCount === 1;
    },

    async findByEmails(teamId, emails) {
      if (emails.length === 0) return [];
      return (await col.find({ teamId, email: { $in: [...emails] } }).toArray()).map(toRecord);
    },
  };
}
