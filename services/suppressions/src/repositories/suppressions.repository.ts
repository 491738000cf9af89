import { isDuplicateKeyError, newId } from '@mailfleet/kit';
import type { Collection, Db, Filter, UpdateFilter } from 'mongodb';
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

export interface SuppressionsRepository {
  ensureIndexes(): Promise<void>;
  /**
   * Suppresses an address, or gives the existing entry the new reason and
   * source (id and createdAt stay): one single-document write, and the unique
   * (teamId, email) index keeps one entry per address even between replicas.
   */
  upsert(input: { teamId: string; email: string; reason: SuppressionReason; source: string | undefined; now?: Date }): Promise<SuppressionRecord>;
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

  async function upsertOnce(input: { teamId: string; email: string; reason: SuppressionReason; source: string | undefined; now: Date }) {
    const update: UpdateFilter<SuppressionDoc> = {
      $set: { reason: input.reason, updatedAt: input.now, ...(input.source !== undefined ? { source: input.source } : {}) },
      $setOnInsert: { _id: newId('sup'), createdAt: input.now },
      ...(input.source === undefined ? { $unset: { source: '' } } : {}),
    };
    return col.findOneAndUpdate({ teamId: input.teamId, email: input.email }, update, { upsert: true, returnDocument: 'after' });
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
