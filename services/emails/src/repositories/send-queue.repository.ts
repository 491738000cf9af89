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
  /**
   * Atomically takes an entry that is due and that nobody holds, from the
   * oldest due ones (a look at the queue serves several claims).
   */
  claim(owner: string, now: Date, leaseMs: number): Promise<QueueEntry | undefined>;
  /** Sets when to look again and frees the entry (recreates a missing one); `uncount` gives an attempt back. */
  reschedule(emailId: string, due: Date, opts?: { uncount?: boolean }): Promise<void>;
  remove(emailId: string): Promise<void>;
  /** Takes the entry for a change of the email: 'busy' while a worker sends it, 'absent' when there is none. */
  lockForChange(emailId: string, now: Date, ms?: number): Promise<LockResult>;
}

export const CHANGE_OWNER = 'change';
const EPOCH = new Date(0);
/** How many due entries one look at the queue returns. */
const CANDIDATES = 64;
/** A look older than this is taken again, so an entry that fell due since is not passed over for long. */
const CANDIDATES_MAX_AGE_MS = 5_000;

/**
 * Every entry of a look is due, so their order matters less than two replicas
 * that looked at once not trying the same ids in the same order.
 */
function shuffled<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}

export function createSendQueueRepository(db: Db): SendQueueRepository {
  const col: Collection<QueueDoc> = db.collection<QueueDoc>('send_queue');
  /**
   * Ids that were due and free at the last look (the oldest due, shuffled). One sorted
   * scan of the queue serves up to CANDIDATES claims, each then a plain _id
   * update; the slots of this worker share it, and a refill is shared too.
   */
  const candidates: { ids: string[]; at: number } = { ids: [], at: 0 };
  let refilling: Promise<void> | undefined;
  function refill(now: Date): Promise<void> {
    refilling ??= (async () => {
      try {
        const docs = await col.find({ due: { $lte: now }, leaseUntil: { $lte: now } }, { projection: { _id: 1 }, sort: { due: 1 }, limit: CANDIDATES }).toArray();
        candidates.ids = shuffled(docs.map((d) => d._id));
        candidates.at = now.getTime();
      } finally {
        refilling = undefined;
      }
    })();
    return refilling;
  }
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
      for (let fresh = false; ;) {
        if (candidates.ids.length === 0 || now.getTime() - candidates.at >= CANDIDATES_MAX_AGE_MS) {
          await refill(now);
          fresh = true;
        }
        const id = candidates.ids.shift();
        if (id === undefined) return undefined;
        // A plain _id lookup (the index); another worker may have taken it since the refill.
        const before = await col.findOneAndUpdate(
          { _id: id, due: { $lte: now }, leaseUntil: { $lte: now } },
          { $set: { leaseUntil, leaseOwner: owner }, $inc: { attempts: 1 } },
          { returnDocument: 'before' },
        );
        if (before) {
          return {
            emailId: before._id, due: before.due, createdAt: before.createdAt, attempt: (before.attempts ?? 0) + 1, leaseUntil,
            previousOwner: before.leaseOwner && before.leaseOwner !== CHANGE_OWNER ? before.leaseOwner : undefined,
          };
        }
        if (fresh && candidates.ids.length === 0) return undefined;
      }
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
