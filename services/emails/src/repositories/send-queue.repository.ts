import type { Collection, Db } from 'mongodb';

/**
 * The send queue: one small document per email waiting to be sent, deleted
 * once it is done. Its lease is the lock on sending the email: a worker holds
 * it for the whole attempt, and anything else that changes a waiting email
 * (cancel, reschedule, a deleted domain) takes it briefly first, so a change
 * and a send never overlap. The email document stays the truth about what to
 * send; a worker re-checks it after every claim, so a stale entry (the email
 * was cancelled, rescheduled or finished meanwhile) costs one look and is
 * then fixed, never a wrong send. Kept apart from the emails so that claiming
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
  /** Attempts started, including one a crashed worker never finished. */
  attempts: number;
  createdAt: Date;
}

export interface QueueEntry {
  readonly emailId: string;
  readonly due: Date;
  readonly createdAt: Date;
  /** The number of this attempt (1 for the first). */
  readonly attempt: number;
  readonly leaseUntil: Date;
  /** The worker whose attempt never finished (it crashed), when there is one. */
  readonly previousOwner?: string | undefined;
}

export type LockResult = 'locked' | 'busy' | 'absent';

export interface SendQueueRepository {
  ensureIndexes(): Promise<void>;
  /** Adds entries; ids already queued are left as they are. */
  enqueue(entries: readonly { emailId: string; due: Date }[], now: Date): Promise<void>;
  /** Atomically takes the entry due first that nobody holds. */
  claim(owner: string, now: Date, leaseMs: number): Promise<QueueEntry | undefined>;
  /** Sets when to look again and frees the entry (recreates a missing one); `uncount` gives an attempt back. */
  reschedule(emailId: string, due: Date, opts?: { uncount?: boolean }): Promise<void>;
  remove(emailId: string): Promise<void>;
  /** Takes the entry for a change of the email: 'busy' while a worker sends it, 'absent' when there is none. */
  lockForChange(emailId: string, now: Date, ms?: number): Promise<LockResult>;
}

export const CHANGE_OWNER = 'change';
const EPOCH = new Date(0);

export function createSendQueueRepository(db: Db): SendQueueRepository {
  const col: Collection<QueueDoc> = db.collection<QueueDoc>('send_queue');
  return {
    async ensureIndexes() {
      await col.createIndex({ due: 1 }, { name: 'due' });
    },
    async enqueue(entries, now) {
      if (entries.length === 0) return;
      try {
        await col.insertMany(entries.map((e) => ({ _id: e.emailId, due: e.due, leaseUntil: EPOCH, attempts: 0, createdAt: now })), { ordered: false });
      } catch (err) {
        const writeErrors = (err as { writeErrors?: { code?: number }[] | { code?: number } }).writeErrors;
        const list = Array.isArray(writeErrors) ? writeErrors : writeErrors ? [writeErrors] : [];
        if (!(list.length > 0 && list.every((w) => w.code === 11000))) throw err;
      }
    },
    async claim(owner, now, leaseMs) {
      const leaseUntil = new Date(now.getTime() + leaseMs);
      const before = await col.findOneAndUpdate(
        { due: { $lte: now }, leaseUntil: { $lte: now } },
        { $set: { leaseUntil, leaseOwner: owner }, $inc: { attempts: 1 } },
        { sort: { due: 1 }, returnDocument: 'before' },
      );
      if (!before) return undefined;
      return {
        emailId: before._id, due: before.due, createdAt: before.createdAt, attempt: (before.attempts ?? 0) + 1, leaseUntil,
        previousOwner: before.leaseOwner && before.leaseOwner !== CHANGE_OWNER ? before.leaseOwner : undefined,
      };
    },
    async reschedule(emailId, due, opts = {}) {
      await col.updateOne(
        { _id: emailId },
        {
          $set: { due, leaseUntil: EPOCH }, $unset: { leaseOwner: '' },
          ...(opts.uncount ? { $inc: { attempts: -1 } } : {}),
          $setOnInsert: { createdAt: new Date(), ...(opts.uncount ? {} : { attempts: 0 }) },
        },
        { upsert: true },
      );
    },
    async remove(emailId) {
      await col.deleteOne({ _id: emailId });
    },
    async lockForChange(emailId, now, ms = 30_000) {
      const locked = await col.findOneAndUpdate(
        { _id: emailId, leaseUntil: { $lte: now } },
        { $set: { leaseUntil: new Date(now.getTime() + ms), leaseOwner: CHANGE_OWNER } },
      );
      if (locked) return 'locked';
      return (await col.countDocuments({ _id: emailId }, { limit: 1 })) > 0 ? 'busy' : 'absent';
    },
  };
}
