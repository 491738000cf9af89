import { BULK_CHUNK, derivedId, dropIndexesIfPresent, findByIds, isDuplicateKeyError, moveToNewIds } from '@mailfleet/kit';
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
  /** `suppressionId(teamId, email)`; entries written before it was derived have a random one until `migrateLegacy`. */
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
   * Gives entries stored under a random id (before ids were derived, or written since by a replica of that older
   * version) their derived one: a copy under it, then the old entry removed, so a crash in between leaves both
   * and the next pass finishes. Where the derived entry exists already it wins (it is the newer write).
   * Returns how many entries it moved.
   */
  migrateLegacy(): Promise<number>;
  /**
   * Suppresses an address, or gives the existing entry the new reason and
   * source (id and createdAt stay): one single-document upsert by the id
   * derived from the address, which also keeps one entry per address even
   * between replicas.
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
  /** The entries of the given canonical addresses: one `_id: {$in}` read of their derived ids. */
  findByEmails(teamId: string, emails: readonly string[]): Promise<SuppressionRecord[]>;
}

function toRecord(d: SuppressionDoc): SuppressionRecord {
  return { id: d._id, teamId: d.teamId, email: d.email, reason: d.reason, source: d.source, createdAt: d.createdAt, updatedAt: d.updatedAt };
}

/**
 * The id of a team's entry for a canonical address. Derived, so the send path's check is a read by `_id`: the
 * embedded FerretDB reads through no other index, and a `(teamId, email)` query there decodes every entry of every
 * team, on every send.
 */
export function suppressionId(teamId: string, email: string): string {
  return derivedId('sup', teamId, email);
}

export function createSuppressionsRepository(db: Db): SuppressionsRepository {
  const col: Collection<SuppressionDoc> = db.collection<SuppressionDoc>('suppressions');

  function upsertUpdate(input: { teamId: string; email: string; reason: SuppressionReason; source: string | undefined; now: Date }): UpdateFilter<SuppressionDoc> {
    return {
      $set: { reason: input.reason, updatedAt: input.now, ...(input.source !== undefined ? { source: input.source } : {}) },
      $setOnInsert: { teamId: input.teamId, email: input.email, createdAt: input.now },
      ...(input.source === undefined ? { $unset: { source: '' } } : {}),
    };
  }

  function automaticOp(w: AutomaticWrite): AnyBulkWriteOperation<SuppressionDoc> {
    // A lift finds the entry by address, not by id: one a replica of the older version wrote is lifted too.
    if (w.kind === 'lift') return { deleteMany: { filter: { teamId: w.teamId, email: w.email, reason: 'UNSUBSCRIBE', updatedAt: { $lte: w.at } } } };
    return {
      updateOne: {
        filter: { _id: suppressionId(w.teamId, w.email) },
        update: upsertUpdate({ teamId: w.teamId, email: w.email, reason: w.reason, source: w.source, now: w.at }),
        upsert: true,
      },
    };
  }

  async function upsertOnce(input: { teamId: string; email: string; reason: SuppressionReason; source: string | undefined; now: Date }) {
    return col.findOneAndUpdate({ _id: suppressionId(input.teamId, input.email) }, upsertUpdate(input), { upsert: true, returnDocument: 'after' });
  }

  return {
    async ensureIndexes() {
      // The derived _id keeps one entry per address; the migration needs a copy and its original side by side.
      await dropIndexesIfPresent(col, ['team_email_unique']);
      await col.createIndex({ teamId: 1, email: 1 }, { name: 'team_email' });
      await col.createIndex({ teamId: 1, createdAt: -1, _id: -1 }, { name: 'team_created' });
      await col.createIndex({ teamId: 1, reason: 1, createdAt: -1, _id: -1 }, { name: 'team_reason_created' });
    },

    async migrateLegacy() {
      const legacy: string[] = [];
      for await (const d of col.find({}, { projection: { _id: 1, teamId: 1, email: 1 } })) {
        if (d._id !== suppressionId(d.teamId, d.email)) legacy.push(d._id);
      }
      for (let i = 0; i < legacy.length; i += BULK_CHUNK) {
        await moveToNewIds(col, await findByIds(col, legacy.slice(i, i + BULK_CHUNK)), (d) => suppressionId(d.teamId, d.email));
      }
      return legacy.length;
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
      // By address, not by id, like a lift: a rare call, and it must not leave an entry of the older version behind.
      const res = await col.deleteMany({ teamId, email });
      return res.deletedCount > 0;
    },

    async findByEmails(teamId, emails) {
      if (emails.length === 0) return [];
      return (await findByIds(col, emails.map((e) => suppressionId(teamId, e)), { teamId })).map(toRecord);
    },
  };
}
