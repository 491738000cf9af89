import { randomBytes } from 'node:crypto';
import { ID_IN_CHUNK, insertManyIgnoringDuplicates } from '@mailfleet/kit';
import type { Collection, Db, Document, Filter, UpdateFilter } from 'mongodb';

/**
 * The send queue: one small document per email waiting to be sent, deleted
 * once it is done. Its lease is the lock on sending the email: a worker holds
 * it for the whole attempt, and anything else that changes a waiting email
 * (cancel, reschedule, a deleted domain) takes it briefly first, so a change
 * and a send never overlap. The email document stays the truth about what to
 * send; a worker re-checks it after every claim (unless the entry is
 * `untouched`, which proves the email is as its accept wrote it), so a stale
 * entry (the email was cancelled, rescheduled or finished meanwhile) costs
 * one look and is then fixed, never a wrong send. Kept apart from the emails so that claiming
 * scans only what is pending, in small documents, and costs no rewrite of an
 * email (FerretDB rewrites a whole document per update and scans rather than
 * uses the index for a sorted findAndModify).
 */
interface QueueDoc {
  /** The email id. */
  _id: string;
  /** When the email is due (its schedule or its next retry). */
  due: Date;
  /** The holder's lock lasts until then; the epoch when nobody holds it. */
  leaseUntil: Date;
  /** A worker's id, or CHANGE_OWNER while a cancel or reschedule holds it. */
  leaseOwner?: string;
  /** Names the batch claim that holds the entry, so the claimer can find what it took. */
  claimId?: string;
  /** Attempts started, including one a crashed worker never finished. */
  attempts: number;
  /**
   * Set by every write other than the accept's insert and a worker's claim (a change's lock, a reschedule, a
   * given-back claim): the email may have changed since it was accepted.
   */
  touched?: boolean;
  createdAt: Date;
}

export interface QueueEntry {
  readonly emailId: string;
  readonly due: Date;
  readonly createdAt: Date;
  /** The number of this attempt (1 for the first). */
  readonly attempt: number;
  readonly leaseUntil: Date;
  /** The batch claim that took it (its leases are extended together). */
  readonly claimId: string;
  /** The worker whose attempt never finished (it crashed), when there is one. */
  readonly previousOwner?: string | undefined;
  /**
   * Nothing but the accept and this claim ever wrote the entry: no attempt was started before, no change
   * locked it, no claim was given back. So the email is still exactly as its accept wrote it (everything
   * that changes a waiting email takes the entry first; reports and tracking follow a send).
   */
  readonly untouched: boolean;
}

export type LockResult = 'locked' | 'busy' | 'absent';

/** A lease written with the entry at its insert: the accept hands the email to its own worker (no claim). */
export interface HeldLease {
  readonly owner: string;
  readonly claimId: string;
  readonly until: Date;
}

/** Who holds an entry handed over at its accept and not yet started: its holder may take it back for a change. */
export interface Holder {
  readonly owner: string;
  readonly claimId: string;
}

export interface SendQueueRepository {
  ensureIndexes(): Promise<void>;
  /**
   * Adds entries; ids already queued are left as they are (resolves to those ids). An entry with `held` is
   * written already claimed by that worker (its first attempt counted), so no other worker takes it until the
   * lease ends: the accept hands it to its own worker in memory.
   */
  enqueue(entries: readonly { emailId: string; due: Date; held?: HeldLease | undefined }[], now: Date): Promise<ReadonlySet<string>>;
  /**
   * Atomically takes up to `max` entries that are due and that nobody holds, the oldest due first: one
   * read of the candidates and one update of all of them (plus one read when another worker took some).
   */
  claimMany(owner: string, now: Date, leaseMs: number, max: number): Promise<QueueEntry[]>;
  /** Sets when to look again and frees the entry (recreates a missing one); `uncount` gives an attempt back. */
  reschedule(emailId: string, due: Date, opts?: { uncount?: boolean }): Promise<void>;
  /**
   * Extends the lease of the entries a batch claim still holds (not those given back, settled or taken over
   * since), in one write.
   */
  extendLeases(claimId: string, emailIds: readonly string[], leaseUntil: Date): Promise<void>;
  /** `reschedule` for many entries in one bulk write. */
  rescheduleMany(items: readonly { emailId: string; due: Date; uncount?: boolean }[]): Promise<void>;
  remove(emailId: string): Promise<void>;
  /** Removes many entries in one write. */
  removeMany(emailIds: readonly string[]): Promise<void>;
  /**
   * Gives back entries a claim or a hand-off still holds (not those settled, changed or taken over since),
   * without counting the attempt: due at `due`, free, touched. No upsert: a missing entry stays missing.
   */
  giveBack(claimId: string, emailIds: readonly string[], due: Date): Promise<void>;
  /**
   * Takes the entry for a change of the email: 'busy' while a worker sends it, 'absent' when there is none.
   * `heldBy` names a hand-off its holder withdrew before starting it: that lease is taken over too.
   */
  lockForChange(emailId: string, now: Date, ms?: number, heldBy?: Holder): Promise<LockResult>;
}

export const CHANGE_OWNER = 'change';
/** Statements per bulk write (FerretDB v1 holds a SQLite connection per statement of a command until it ends; pool of 100). */
const MAX_BULK = 25;
const EPOCH = new Date(0);

export function createSendQueueRepository(db: Db): SendQueueRepository {
  const col: Collection<QueueDoc> = db.collection<QueueDoc>('send_queue');
  function rescheduleUpdate(due: Date, uncount: boolean | undefined): UpdateFilter<QueueDoc> {
    return {
      $set: { due, leaseUntil: EPOCH, touched: true }, $unset: { leaseOwner: '' as const, claimId: '' as const },
      ...(uncount ? { $inc: { attempts: -1 } } : {}),
      $setOnInsert: { createdAt: new Date(), ...(uncount ? {} : { attempts: 0 }) },
    };
  }
  /** Runs `write` over the ids in `_id: {$in}` chunks; resolves to the summed count it returns. */
  async function manyById(ids: readonly string[], write: (byId: Filter<QueueDoc>) => Promise<number>): Promise<number> {
    let n = 0;
    for (let i = 0; i < ids.length; i += ID_IN_CHUNK) n += await write({ _id: { $in: ids.slice(i, i + ID_IN_CHUNK) } });
    return n;
  }
  return {
    async ensureIndexes() {
      await col.createIndex({ due: 1 }, { name: 'due' });
    },
    async enqueue(entries, now) {
      if (entries.length === 0) return new Set();
      const inserted = await insertManyIgnoringDuplicates(col as unknown as Collection<Document>, entries.map((e): QueueDoc => (e.held
        ? { _id: e.emailId, due: e.due, leaseUntil: e.held.until, leaseOwner: e.held.owner, claimId: e.held.claimId, attempts: 1, createdAt: now }
        : { _id: e.emailId, due: e.due, leaseUntil: EPOCH, attempts: 0, createdAt: now })) as unknown as Document[]);
      // Without the server saying which were there, every entry counts as there already: none is handed over then.
      return new Set(entries.filter((_, i) => !inserted?.has(i)).map((e) => e.emailId));
    },
    async claimMany(owner, now, leaseMs, max) {
      const free = { due: { $lte: now }, leaseUntil: { $lte: now } };
      const candidates = await col.find(free, { sort: { due: 1 }, limit: max }).toArray();
      if (candidates.length === 0) return [];
      const leaseUntil = new Date(now.getTime() + leaseMs);
      const claimId = randomBytes(9).toString('base64url');
      const ids = candidates.map((c) => c._id);
      // The condition is checked again per entry inside the update: one another worker took since the read is skipped.
      const claim = { $set: { leaseUntil, leaseOwner: owner, claimId }, $inc: { attempts: 1 } };
      const modified = await manyById(ids, async (byId) => (await col.updateMany({ ...byId, ...free }, claim)).modifiedCount);
      if (modified === 0) return [];
      let taken: QueueDoc[] = candidates;
      if (modified < candidates.length) {
        const mine = new Set((await col.find({ _id: { $in: ids }, claimId }, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
        taken = candidates.filter((c) => mine.has(c._id));
      }
      return taken.map((before) => ({
        emailId: before._id, due: before.due, createdAt: before.createdAt, attempt: (before.attempts ?? 0) + 1, leaseUntil, claimId,
        previousOwner: before.leaseOwner && before.leaseOwner !== CHANGE_OWNER ? before.leaseOwner : undefined,
        untouched: (before.attempts ?? 0) === 0 && before.touched !== true && !before.leaseOwner,
      }));
    },
    async reschedule(emailId, due, opts = {}) {
      await col.updateOne({ _id: emailId }, rescheduleUpdate(due, opts.uncount), { upsert: true });
    },
    async extendLeases(claimId, emailIds, leaseUntil) {
      if (emailIds.length === 0) return;
      await manyById(emailIds, async (byId) => (await col.updateMany({ ...byId, claimId }, { $set: { leaseUntil } })).matchedCount);
    },
    async rescheduleMany(items) {
      if (items.length === 0) return;
      for (let i = 0; i < items.length; i += MAX_BULK) {
        const chunk = items.slice(i, i + MAX_BULK);
        await col.bulkWrite(chunk.map((x) => ({ updateOne: { filter: { _id: x.emailId }, update: rescheduleUpdate(x.due, x.uncount), upsert: true } })), { ordered: false });
      }
    },
    async remove(emailId) {
      await col.deleteOne({ _id: emailId });
    },
    async removeMany(emailIds) {
      if (emailIds.length === 0) return;
      await manyById(emailIds, async (byId) => (await col.deleteMany(byId)).deletedCount);
    },
    async giveBack(claimId, emailIds, due) {
      if (emailIds.length === 0) return;
      await manyById(emailIds, async (byId) => (await col.updateMany({ ...byId, claimId }, {
        $set: { due, leaseUntil: EPOCH, touched: true }, $unset: { leaseOwner: '' as const, claimId: '' as const }, $inc: { attempts: -1 },
      })).modifiedCount);
    },
    async lockForChange(emailId, now, ms = 30_000, heldBy) {
      // The claim id goes: a late lease extension of the batch that held the entry must not prolong the lock.
      const locked = await col.findOneAndUpdate(
        heldBy ? { _id: emailId, leaseOwner: heldBy.owner, claimId: heldBy.claimId } : { _id: emailId, leaseUntil: { $lte: now } },
        { $set: { leaseUntil: new Date(now.getTime() + ms), leaseOwner: CHANGE_OWNER, touched: true }, $unset: { claimId: '' as const } },
      );
      if (locked) return 'locked';
      return (await col.countDocuments({ _id: emailId }, { limit: 1 })) > 0 ? 'busy' : 'absent';
    },
  };
}
