import { createHash, randomUUID } from 'node:crypto';
import { bulkWriteInChunks, findByIds, ID_IN_CHUNK, isDuplicateKeyError, newId } from '@mailfleet/kit';
import { MongoBulkWriteError, type AnyBulkWriteOperation, type Collection, type Db, type Filter } from 'mongodb';
import type { DeliveryState } from '../domain/retry-policy.js';

export interface DeliveryRecord {
  readonly id: string;
  readonly teamId: string;
  readonly webhookId: string;
  readonly eventId: string;
  readonly type: string;
  /** The exact body of every attempt. */
  readonly payload: string;
  readonly status: DeliveryState;
  readonly attempt: number;
  readonly nextAttemptAt: Date | null;
  readonly lastError: string | null;
  readonly responseStatus: number | null;
  readonly responseTimeMs: number | null;
  readonly responseText: string | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** A delivery this replica owns until the lease ends; every write of its result is guarded by the token. */
export interface ClaimedDelivery {
  readonly record: DeliveryRecord;
  readonly leaseToken: string;
  /** True for a PENDING delivery on its retry schedule; false for a manual retry of a finished one. */
  readonly scheduled: boolean;
  /**
   * Claimed at fan-out and not stored as a record yet: the queue entry holds the delivery and the claim (its
   * `claim` token). The first result is written as the record, in one insert.
   */
  readonly unwritten?: boolean;
  /**
   * With `unwritten`: stored nowhere, neither entry nor record (`directClaims`). The fan-out holds its event
   * unacknowledged until the first result is written as the record (a retry's entry is created with it), or until
   * the delivery is stored as a free queue entry instead (`releaseMany`).
   */
  readonly unstored?: boolean;
}

/** What an attempt (or a cancellation) writes. */
export interface DeliveryResult {
  readonly status: DeliveryState;
  readonly attempt: number;
  readonly nextAttemptAt: Date | null;
  readonly lastError: string | null;
  readonly responseStatus: number | null;
  readonly responseTimeMs: number | null;
  readonly responseText: string | null;
}

interface DeliveryDoc {
  _id: string;
  teamId: string;
  webhookId: string;
  eventId: string;
  type: string;
  payload: string;
  status: DeliveryState;
  attempt: number;
  nextAttemptAt: Date | null;
  lastError: string | null;
  responseStatus: number | null;
  responseTimeMs: number | null;
  responseText: string | null;
  createdAt: Date;
  updatedAt: Date;
  /** The lock on attempting this delivery: nobody else may until this is past (EPOCH when free). */
  leaseUntil: Date;
  leaseToken?: string;
  /** The token of the claim whose result was written last: tells a bulk finish which of its writes took. */
  finishedBy?: string;
  /** Written by earlier versions (parking lives on the queue entry now); ignored and dropped at the next claim. */
  parked?: boolean;
}

/**
 * The delivery queue: one small document per delivery that is waiting or in
 * flight, deleted once the delivery is final. Claims look only here, so their
 * cost follows the pending work, not the 30 days of delivered records (FerretDB
 * scans and decodes a whole collection for any filter without a plain `_id`).
 * The delivery document stays the truth: its lease (`leaseUntil` + token) is
 * the lock on an attempt, and a claim re-checks it by `_id`, so a stale entry
 * (finished, rescheduled or held by a manual retry meanwhile) costs one look
 * and is then fixed, never a second attempt.
 */
interface QueueDoc {
  /** The delivery id. */
  _id: string;
  webhookId: string;
  /** When the delivery is due (its next attempt): claims take the most overdue first. */
  due: Date;
  /** Passed over by claims until then: a claim in progress (a crash makes it claimable again then), EPOCH when free. */
  leaseUntil: Date;
  /** The claim round that leased it last: tells a bulk claim which of its leases took. */
  claim?: string;
  /** Held while its webhook is not ACTIVE; activation releases it. */
  parked?: boolean;
  createdAt: Date;
  /** Set with `delivery` (scopes the deliveries list's look at unwritten entries by team). */
  teamId?: string;
  /**
   * A delivery claimed at fan-out whose record is not written yet: what the record is made of. Removed once the
   * record exists (a retry's entry), so an entry with it is a pending delivery the deliveries collection lacks.
   */
  delivery?: { eventId: string; type: string; payload: string };
}

const EPOCH = new Date(0);
/** A queue entry is written before its delivery: a younger entry without one may be an insert in progress. */
const ORPHAN_GRACE_MS = 60_000;
const ORPHAN_RECHECK_MS = 2_000;
/** Stale entries fixed per claim before giving the worker back an empty hand. */
const STALE_PER_CLAIM = 20;
/**
 * How many free entries one look at the queue returns (the soonest due first). A look costs a scan of the queue
 * on FerretDB whatever it returns, so a backlog is taken in large pieces; an entry another replica queued waits
 * at most this many claims (or `lookMaxAgeMs`) to be seen.
 */
export const LOOK_LIMIT = 256;
/**
 * The most entries this replica keeps in view (with a copy of each record it wrote: about 15 MB when full); past
 * it, new ones are left to the next look, and their records are read back when claimed (a read per delivery, and
 * looks that scan the queue), so it covers a backlog of tens of seconds at hundreds of events a second.
 */
const VIEW_LIMIT = 10_000;

export interface DeliveriesRepositoryOptions {
  /**
   * The longest a look at the queue serves claims: an entry that another
   * replica queued, or whose lease lapsed, is seen by this one within it.
   * This replica's own writes are in view at once.
   */
  lookMaxAgeMs?: number;
}

export interface PendingInput { teamId: string; webhookId: string; eventId: string; type: string; payload: string; now: Date }

export interface DeliveriesRepository {
  ensureIndexes(): Promise<void>;
  /** A PENDING delivery due now; false when this (webhook, event) pair already has one (a redelivered event). */
  createPending(input: PendingInput): Promise<boolean>;
  /**
   * PENDING deliveries for a whole batch of events, one `insertMany` per collection (plus one delete when some
   * already existed). Idempotent on (webhook, event): a pair that already has a delivery makes none. Answers
   * how many were made.
   */
  createPendingMany(inputs: readonly PendingInput[]): Promise<number>;
  /**
   * New deliveries claimed by the caller already, stored as queue entries only (one insert; the entry carries the
   * delivery and is leased until `now + leaseMs`), so the replica that fanned them out attempts them without a
   * claim's writes and writes each record once, with its first result. Answers the claims of the deliveries made (a
   * pair with a record or an entry already makes none). A crash before they are attempted leaves them claimable by
   * anyone once the lease ends.
   */
  createClaimedMany(inputs: readonly PendingInput[], now: Date, leaseMs: number): Promise<ClaimedDelivery[]>;
  /**
   * New deliveries of events delivered for the first time, stored free as queue entries only (one insert), for any
   * replica's claims: a claim of such an entry is its lease (no record to lock), and its record is written once,
   * with the first attempt's result. Answers how many were made.
   */
  createQueuedMany(inputs: readonly PendingInput[]): Promise<number>;
  /**
   * Claims of new deliveries that are stored nowhere (no write; the batch's records are read by `_id: {$in}`, so an
   * event published again finds its delivery and makes none): the caller attempts them at once and their first
   * result is their only write. Until then the event they come from must stay unacknowledged.
   */
  directClaims(inputs: readonly PendingInput[]): Promise<ClaimedDelivery[]>;
  /** A delivery that is already finished (test events: attempted before they are stored). */
  insertFinished(input: Omit<DeliveryRecord, 'id'> & { id?: string }): Promise<DeliveryRecord>;
  /**
   * Claims the most overdue unleased PENDING delivery, skipping parked ones and the webhooks given. Claims
   * choose from this replica's view of the queue (see `createDeliveriesRepository`).
   */
  claimDue(now: Date, leaseMs: number, excludeWebhookIds: readonly string[]): Promise<ClaimedDelivery | undefined>;
  /**
   * Claims up to `slots(webhookId)` due deliveries of ONE webhook (not among those given), the one with the most
   * overdue eligible delivery in view, most overdue first: their queue entries are leased in one bulk write,
   * then each record is locked by `_id`. Empty when nothing is due.
   */
  claimDueMany(now: Date, leaseMs: number, excludeWebhookIds: readonly string[], slots: (webhookId: string) => number): Promise<ClaimedDelivery[]>;
  /** Claims one delivery for a manual retry: 'busy' when another attempt holds it now. */
  claimForRetry(teamId: string, webhookId: string, deliveryId: string, now: Date, leaseMs: number): Promise<ClaimedDelivery | 'busy' | undefined>;
  /** Writes a result and releases the claim; undefined when the claim was lost (lease expired and taken). */
  finish(claim: ClaimedDelivery, result: DeliveryResult, now: Date): Promise<DeliveryRecord | undefined>;
  /**
   * Writes the results of a round of claims: one bulk write of the records, then one of their queue entries.
   * Answers, in order, each record after its result, or undefined for a claim that was lost.
   */
  finishMany(items: readonly { claim: ClaimedDelivery; result: DeliveryResult }[], now: Date): Promise<(DeliveryRecord | undefined)[]>;
  /** Releases the claim without writing a result (the attempt could not be made). */
  release(claim: ClaimedDelivery): Promise<void>;
  /**
   * Releases claims of new deliveries that were never attempted (createClaimedMany's, at shutdown or when they
   * waited too long): one bulk write per collection; they are due at once for any replica.
   */
  releaseMany(claims: readonly ClaimedDelivery[]): Promise<void>;
  /** Holds a delivery of a webhook that is not ACTIVE. */
  park(claim: ClaimedDelivery): Promise<void>;
  /** Releases the held deliveries of an activated webhook. */
  unpark(webhookId: string): Promise<number>;
  /** Cancels every PENDING delivery of a webhook (deleted). */
  cancelPending(webhookId: string, reason: string, now: Date): Promise<number>;
  get(teamId: string, webhookId: string, id: string): Promise<DeliveryRecord | undefined>;
  list(teamId: string, webhookId: string, q: { skip: number; limit: number; status?: DeliveryState | undefined }): Promise<{ records: DeliveryRecord[]; count: number }>;
  /**
   * When the soonest-due free delivery outside the webhooks given falls (or fell) due, as far as this replica's
   * view of the queue knows (no query: the last claim refreshed the view); undefined when it knows of none. A time
   * in the past says how long it has waited.
   */
  nextDueAt(now: Date, excludeWebhookIds: readonly string[]): Promise<Date | undefined>;
  /** Deletes unleased deliveries created before `cutoff`. */
  sweep(cutoff: Date, now: Date): Promise<number>;
  /**
   * Queues every PENDING delivery that has no queue entry (a crash between the
   * two writes, or records from before the queue existed). Scans the
   * deliveries: run at start and with the hourly sweep, never per claim.
   */
  repairQueue(now: Date): Promise<number>;
}

/**
 * Inserts without stopping at a duplicate, in one command (FerretDB's limit on statements per command is for
 * updates; one insert of 400 documents is one write): answers the indexes of the documents refused as
 * duplicates; any other failure is thrown.
 */
async function insertManyReportingDuplicates<T extends { _id: string }>(col: Collection<T>, docs: readonly T[]): Promise<Set<number>> {
  const duplicates = new Set<number>();
  try {
    await col.insertMany(docs as never[], { ordered: false });
  } catch (err) {
    if (!(err instanceof MongoBulkWriteError)) throw err;
    const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
    if (errors.length === 0) throw err;
    for (const e of errors) {
      if (!isDuplicateKeyError(e)) throw err;
      duplicates.add(e.index);
    }
  }
  return duplicates;
}

function toRecord(d: DeliveryDoc): DeliveryRecord {
  return {
    id: d._id, teamId: d.teamId, webhookId: d.webhookId, eventId: d.eventId, type: d.type, payload: d.payload, status: d.status,
    attempt: d.attempt, nextAttemptAt: d.nextAttemptAt, lastError: d.lastError, responseStatus: d.responseStatus,
    responseTimeMs: d.responseTimeMs, responseText: d.responseText, createdAt: d.createdAt, updatedAt: d.updatedAt,
  };
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * The id of the delivery of an event to a webhook: derived from the pair, in the shape of `newId('whd')`, so the
 * queue's primary key refuses a second entry for a pair while the first is there (a redelivered event whose
 * delivery exists only as its entry, not attempted yet), and the records' one refuses a second record.
 */
export function deliveryIdOf(webhookId: string, eventId: string): string {
  const digest = createHash('sha256').update(`${webhookId}\u0000${eventId}`).digest();
  let id = 'whd_';
  for (let i = 0; i < 22; i++) id += BASE62[digest[i]! % 62];
  return id;
}

/** A queue entry carrying a delivery that has no record yet. */
type UnwrittenEntry = QueueDoc & { teamId: string; delivery: NonNullable<QueueDoc['delivery']> };

/** The PENDING record of a delivery that exists only as a queue entry (claimed at fan-out, no attempt written yet). */
function unwrittenRecord(e: UnwrittenEntry): DeliveryRecord {
  return {
    id: e._id, teamId: e.teamId, webhookId: e.webhookId, eventId: e.delivery.eventId, type: e.delivery.type, payload: e.delivery.payload,
    status: 'PENDING', attempt: 0, nextAttemptAt: e.due, lastError: null, responseStatus: null, responseTimeMs: null, responseText: null,
    createdAt: e.createdAt, updatedAt: e.createdAt,
  };
}

/** The queue entry that carries a delivery not yet recorded: `lease` leased (claimed at fan-out) or free. */
function unwrittenEntry(input: PendingInput, lease: Pick<QueueDoc, 'leaseUntil' | 'claim'>): UnwrittenEntry {
  return {
    _id: deliveryIdOf(input.webhookId, input.eventId), webhookId: input.webhookId, due: input.now, createdAt: input.now, ...lease,
    teamId: input.teamId, delivery: { eventId: input.eventId, type: input.type, payload: input.payload },
  };
}

/** What the fan-out made a delivery of (a direct claim stored as an entry after all). */
function inputOf(r: DeliveryRecord): PendingInput {
  return { teamId: r.teamId, webhookId: r.webhookId, eventId: r.eventId, type: r.type, payload: r.payload, now: r.createdAt };
}

const isUnwritten = (e: QueueDoc): e is UnwrittenEntry => e.delivery !== undefined && e.teamId !== undefined;

/** A record as stored, free (no lease) unless one is given. */
function docOf(r: DeliveryRecord, extra: Partial<DeliveryDoc> = {}): DeliveryDoc {
  return {
    _id: r.id, teamId: r.teamId, webhookId: r.webhookId, eventId: r.eventId, type: r.type, payload: r.payload, status: r.status,
    attempt: r.attempt, nextAttemptAt: r.nextAttemptAt, lastError: r.lastError, responseStatus: r.responseStatus,
    responseTimeMs: r.responseTimeMs, responseText: r.responseText, createdAt: r.createdAt, updatedAt: r.updatedAt, leaseUntil: EPOCH, ...extra,
  };
}

/**
 * The deliveries and their queue. Claims do not search the queue each time:
 * on FerretDB any filter other than a plain `_id` scans the whole collection,
 * and one endpoint's backlog can be tens of thousands of entries. Instead each
 * replica keeps a view, the ids (with webhook and due time) of free entries
 * it has seen, from a sorted look at the queue (the LOOK_LIMIT soonest due
 * outside the webhooks at their cap) plus what it queued itself since. A claim
 * takes the most overdue eligible id in view with an `_id` update that checks
 * the entry is still due, free and not parked, so an id another replica took
 * or changed meanwhile costs one indexed update and leaves the view. A new
 * look is taken when the view is older than `lookMaxAgeMs`, or when nothing
 * in view is eligible and the last look cannot vouch that nothing else is:
 * it was cut off at its limit with entries still due, or it skipped a webhook
 * that is no longer at its cap. So a backlog of one webhook costs one look per
 * `lookMaxAgeMs`, not one (or two) per delivery.
 */
export function createDeliveriesRepository(db: Db, options: DeliveriesRepositoryOptions = {}): DeliveriesRepository {
  const col: Collection<DeliveryDoc> = db.collection<DeliveryDoc>('deliveries');
  const queue: Collection<QueueDoc> = db.collection<QueueDoc>('delivery_queue');
  const lookMaxAgeMs = options.lookMaxAgeMs ?? 5_000;

  /** Free entries seen by the last looks or queued here since: delivery id -> webhook and due time. */
  const view = new Map<string, { webhookId: string; due: number; record?: DeliveryRecord; unwritten?: boolean }>();
  /** The last look: when, which webhooks it skipped, and whether every entry due then outside them is in view. */
  const look = { at: Number.NEGATIVE_INFINITY, skipped: new Set<string>(), complete: false };
  let looking: Promise<void> | undefined;

  /** `record`: the delivery as this replica last wrote it, so a claim that finds it unchanged need not read it. */
  function see(id: string, webhookId: string, due: Date, record?: DeliveryRecord, unwritten = false): void {
    if (view.has(id) || view.size < VIEW_LIMIT) view.set(id, { webhookId, due: due.getTime(), ...(record ? { record } : {}), ...(unwritten ? { unwritten } : {}) });
    else look.complete = false;
  }

  function lookAgain(now: Date, exclude: readonly string[]): Promise<void> {
    looking ??= (async () => {
      try {
        const docs = await queue.find(
          { parked: { $ne: true }, leaseUntil: { $lte: now }, ...(exclude.length > 0 ? { webhookId: { $nin: [...exclude] } } : {}) },
          { projection: { _id: 1, webhookId: 1, due: 1, teamId: 1, delivery: 1, createdAt: 1 }, sort: { due: 1 }, limit: LOOK_LIMIT },
        ).toArray();
        for (const d of docs) {
          // An entry that carries its delivery is claimed by its lease alone.
          if (isUnwritten(d)) {
            view.set(d._id, { webhookId: d.webhookId, due: d.due.getTime(), record: unwrittenRecord(d), unwritten: true });
            continue;
          }
          // A copy of the record this replica wrote stays: a claim checks it is still current before using it.
          const record = view.get(d._id)?.record;
          view.set(d._id, { webhookId: d.webhookId, due: d.due.getTime(), ...(record ? { record } : {}) });
        }
        const last = docs[docs.length - 1];
        look.at = now.getTime();
        look.skipped = new Set(exclude);
        look.complete = docs.length < LOOK_LIMIT || (last !== undefined && last.due.getTime() > now.getTime());
      } finally {
        looking = undefined;
      }
    })();
    return looking;
  }

  /** The most overdue id in view that is due and whose webhook is not skipped. */
  function pick(now: Date, exclude: ReadonlySet<string>): string | undefined {
    let best: string | undefined;
    let bestDue = Number.POSITIVE_INFINITY;
    for (const [id, e] of view) {
      if (e.due <= now.getTime() && e.due < bestDue && !exclude.has(e.webhookId)) {
        best = id;
        bestDue = e.due;
      }
    }
    return best;
  }

  /** Up to `n` due ids in view of one webhook, most overdue first. */
  function pickOf(webhookId: string, now: Date, n: number): string[] {
    const due: [string, number][] = [];
    for (const [id, e] of view) if (e.webhookId === webhookId && e.due <= now.getTime()) due.push([id, e.due]);
    return due.sort((a, b) => a[1] - b[1]).slice(0, n).map(([id]) => id);
  }

  function mustLook(now: Date, exclude: ReadonlySet<string>, eligible: boolean): boolean {
    if (now.getTime() - look.at >= lookMaxAgeMs) return true;
    if (eligible) return false;
    return !(look.complete && [...look.skipped].every((w) => exclude.has(w)));
  }

  /** The entry follows its delivery: looked at again at `due` (created if missing), not parked. */
  async function requeue(id: string, webhookId: string, due: Date, parked = false): Promise<void> {
    view.delete(id);
    await queue.updateOne(
      { _id: id },
      { $set: { webhookId, due, leaseUntil: EPOCH, ...(parked ? { parked: true } : {}) }, ...(parked ? {} : { $unset: { parked: '' } }), $setOnInsert: { createdAt: new Date() } },
      { upsert: true },
    );
    if (!parked) see(id, webhookId, due);
  }

  async function dequeue(id: string): Promise<void> {
    view.delete(id);
    await queue.deleteOne({ _id: id });
  }

  /** After a written result: a delivery still PENDING waits for its next attempt, a final one leaves the queue. */
  async function follow(d: DeliveryDoc): Promise<void> {
    if (d.status === 'PENDING') await requeue(d._id, d.webhookId, d.nextAttemptAt ?? new Date());
    else await dequeue(d._id);
  }

  /**
   * `follow` for a round of results: the finished ones' entries go in one `_id: {$in}` delete (one statement, read
   * through the primary key on MongoDB and on the embedded FerretDB), the retries' in one bulk write. `entryless`:
   * deliveries that never had an entry (direct claims), whose finished ones need no delete.
   */
  async function followMany(records: readonly DeliveryRecord[], entryless: ReadonlySet<string> = new Set()): Promise<void> {
    for (const r of records) view.delete(r.id);
    const done = records.filter((r) => r.status !== 'PENDING' && !entryless.has(r.id)).map((r) => r.id);
    for (let i = 0; i < done.length; i += ID_IN_CHUNK) await queue.deleteMany({ _id: { $in: done.slice(i, i + ID_IN_CHUNK) } });
    await bulkWriteInChunks(queue, records.filter((r) => r.status === 'PENDING').map((r): AnyBulkWriteOperation<QueueDoc> => ({
      updateOne: {
        filter: { _id: r.id },
        update: { $set: { webhookId: r.webhookId, due: r.nextAttemptAt ?? new Date(), leaseUntil: EPOCH }, $unset: { parked: '', delivery: '' }, $setOnInsert: { createdAt: new Date() } },
        upsert: true,
      },
    })));
    for (const r of records) if (r.status === 'PENDING') see(r.id, r.webhookId, r.nextAttemptAt ?? new Date(), r);
  }

  /** A claimed entry whose delivery could not be locked: put it where it belongs (or drop it). */
  async function fixStale(entry: QueueDoc, now: Date): Promise<void> {
    const d = await col.findOne({ _id: entry._id });
    if (!d && isUnwritten(entry)) {
      await materialize(entry, unwrittenRecord(entry), false);
      return;
    }
    if (!d) {
      if (now.getTime() - entry.createdAt.getTime() < ORPHAN_GRACE_MS) {
        await queue.updateOne({ _id: entry._id }, { $set: { leaseUntil: new Date(now.getTime() + ORPHAN_RECHECK_MS) } });
      } else {
        await dequeue(entry._id);
      }
      return;
    }
    if (d.status !== 'PENDING') {
      await dequeue(entry._id);
      return;
    }
    // Held by another attempt (a manual retry) or not due yet: look again when that changes.
    const leased = d.leaseUntil.getTime() >= now.getTime() ? new Date(d.leaseUntil.getTime() + 1) : EPOCH;
    const due = d.nextAttemptAt ?? now;
    // The record exists: an entry still carrying the delivery (a crash after its first result) no longer shows it.
    await queue.updateOne({ _id: entry._id }, { $set: { due, leaseUntil: leased }, ...(entry.delivery ? { $unset: { delivery: '' } } : {}) });
    if (leased === EPOCH) see(entry._id, entry.webhookId, due);
  }

  /**
   * Writes the PENDING record of an entry claimed at fan-out that was never attempted (a crash, a release, a
   * webhook not ACTIVE), then frees its entry (held when `parked`) without the delivery: from then on it is an
   * ordinary pending delivery. A pair that has another delivery already (a redelivered event) drops the entry.
   */
  async function materialize(entry: Pick<QueueDoc, '_id' | 'webhookId' | 'due'>, record: DeliveryRecord, parked: boolean): Promise<void> {
    const duplicate = await col.insertOne(docOf(record)).then(() => false, (err: unknown) => {
      if (isDuplicateKeyError(err)) return true;
      throw err;
    });
    if (duplicate) {
      const other = await col.findOne({ _id: entry._id }, { projection: { status: 1 } });
      // Written by another replica's materialize meanwhile: the entry is an ordinary one now.
      if (!other) {
        await dequeue(entry._id);
        return;
      }
    }
    view.delete(entry._id);
    await queue.updateOne(
      { _id: entry._id },
      { $set: { due: entry.due, leaseUntil: EPOCH, ...(parked ? { parked: true } : {}) }, $unset: { delivery: '', claim: '', ...(parked ? {} : { parked: '' }) } },
    );
    if (!parked) see(entry._id, entry.webhookId, entry.due);
  }

  /** Claims of unwritten entries: records inserted in their final (or retry) state. Answers which took. */
  async function insertResults(items: readonly { claim: ClaimedDelivery; result: DeliveryResult }[], now: Date): Promise<boolean[]> {
    if (items.length === 0) return [];
    // The insert is the lock on the result: a record already there (another replica's claim of this entry after
    // the lease lapsed, or another delivery of the pair) means this claim was lost.
    const duplicates = await insertManyReportingDuplicates(col, items.map(({ claim, result }) => docOf(
      { ...claim.record, ...result, updatedAt: now }, { finishedBy: claim.leaseToken },
    )));
    return items.map((_, i) => !duplicates.has(i));
  }

  /** Claims of stored records: their results in one bulk write. Answers which took. */
  async function updateResults(items: readonly { claim: ClaimedDelivery; result: DeliveryResult }[], now: Date): Promise<boolean[]> {
    if (items.length === 0) return [];
    const written = await bulkWriteInChunks(col, items.map(({ claim, result }): AnyBulkWriteOperation<DeliveryDoc> => ({
      updateOne: {
        filter: { _id: claim.record.id, leaseToken: claim.leaseToken },
        update: { $set: { ...result, updatedAt: now, leaseUntil: EPOCH, finishedBy: claim.leaseToken }, $unset: { leaseToken: '' } },
      },
    })));
    // A lost claim (its lease lapsed and another replica took it) wrote nothing: when some did not take, each
    // record tells by the token of the result it holds.
    if (written.matchedCount === items.length) return items.map(() => true);
    const docs = await Promise.all(items.map(({ claim }) => col.findOne({ _id: claim.record.id }, { projection: { finishedBy: 1 } })));
    return items.map(({ claim }, i) => docs[i]?.finishedBy === claim.leaseToken);
  }

  /**
   * The fan-out's two inserts: queue entries, then records (free, or leased by `lease`). Answers the records made,
   * in input order (a pair that had a delivery already makes none).
   */
  async function insertNew(inputs: readonly PendingInput[], lease?: { until: Date; token: string }): Promise<DeliveryDoc[]> {
    if (inputs.length === 0) return [];
    const ids = inputs.map((input) => deliveryIdOf(input.webhookId, input.eventId));
    const leaseUntil = lease?.until ?? EPOCH;
    // The entries first: a crash between the two writes leaves orphan entries (dropped by the claims), never an
    // unqueued delivery. A pair whose entry is there already (its delivery pending, or claimed at fan-out and not
    // written yet) makes nothing more.
    const queued = await insertManyReportingDuplicates(queue, inputs.map((input, i): QueueDoc => ({
      _id: ids[i]!, webhookId: input.webhookId, due: input.now, leaseUntil, ...(lease ? { claim: lease.token } : {}), createdAt: input.now,
    })));
    const fresh = inputs.map((_, i) => i).filter((i) => !queued.has(i));
    if (fresh.length === 0) return [];
    // Records that failed for another reason than a duplicate keep their entries: the claims drop those without a record.
    const docs = fresh.map((i): DeliveryDoc => ({
      _id: ids[i]!, teamId: inputs[i]!.teamId, webhookId: inputs[i]!.webhookId, eventId: inputs[i]!.eventId, type: inputs[i]!.type,
      payload: inputs[i]!.payload, status: 'PENDING', attempt: 0, nextAttemptAt: inputs[i]!.now, lastError: null, responseStatus: null,
      responseTimeMs: null, responseText: null, createdAt: inputs[i]!.now, updatedAt: inputs[i]!.now, leaseUntil,
      ...(lease ? { leaseToken: lease.token } : {}),
    }));
    const duplicates = await insertManyReportingDuplicates(col, docs);
    // A (webhook, event) pair that already had a delivery (a redelivered event): its new entry goes again, in one
    // write (a redelivery is rare; an entry left by a failure here is dropped by the claims as an orphan).
    if (duplicates.size > 0) await queue.deleteMany({ _id: { $in: [...duplicates].map((i) => docs[i]!._id) } }).catch(() => undefined);
    return docs.filter((_, i) => !duplicates.has(i));
  }

  async function createPendingMany(inputs: readonly PendingInput[]): Promise<number> {
    const made = await insertNew(inputs);
    for (const d of made) see(d._id, d.webhookId, d.createdAt, toRecord(d));
    return made.length;
  }

  async function createClaimedMany(given: readonly PendingInput[], now: Date, leaseMs: number): Promise<ClaimedDelivery[]> {
    const inputs = await unrecorded(given);
    if (inputs.length === 0) return [];
    const leaseToken = randomUUID();
    const leaseUntil = new Date(now.getTime() + leaseMs);
    // Only the queue entries, carrying the deliveries: the record is written once, with the first attempt's result
    // (an insert, where a pending record would be inserted and then rewritten). A crash leaves the entries claimable
    // when the lease ends; a claim then writes the pending record first. Not put in view: they are leased.
    // A pair with a record or an entry already makes nothing.
    const all = inputs.map((input) => unwrittenEntry(input, { leaseUntil, claim: leaseToken }));
    // A pair whose entry is there already (the same event twice) is not this call's.
    const duplicates = await insertManyReportingDuplicates<QueueDoc>(queue, all);
    const entries = all.filter((_, i) => !duplicates.has(i));
    return entries.map((e) => ({ record: unwrittenRecord(e), leaseToken, scheduled: true, unwritten: true }));
  }

  /**
   * The inputs whose pair has no record yet (an event published again, past the stream's duplicate window, finds its
   * delivery's record here), read by `_id: {$in}`. A pair whose entry is still there is refused by the entry's insert.
   */
  async function unrecorded(inputs: readonly PendingInput[]): Promise<PendingInput[]> {
    const ids = inputs.map((i) => deliveryIdOf(i.webhookId, i.eventId));
    const found = new Set((await findByIds(col, ids, {}, { projection: { _id: 1 } })).map((d) => d._id));
    return inputs.filter((_, i) => !found.has(ids[i]!));
  }

  async function createQueuedMany(given: readonly PendingInput[]): Promise<number> {
    const inputs = await unrecorded(given);
    if (inputs.length === 0) return 0;
    const all = inputs.map((input) => unwrittenEntry(input, { leaseUntil: EPOCH }));
    const duplicates = await insertManyReportingDuplicates<QueueDoc>(queue, all);
    const entries = all.filter((_, i) => !duplicates.has(i));
    for (const e of entries) see(e._id, e.webhookId, e.due, unwrittenRecord(e), true);
    return entries.length;
  }

  async function claimDueMany(now: Date, leaseMs: number, exclude: readonly string[], slots: (webhookId: string) => number): Promise<ClaimedDelivery[]> {
    const leaseUntil = new Date(now.getTime() + leaseMs);
    const skip = new Set(exclude);
    for (let i = 0, looked = false; i < STALE_PER_CLAIM; i++) {
      let first = pick(now, skip);
      if (!looked && mustLook(now, skip, first !== undefined)) {
        await lookAgain(now, exclude);
        looked = true;
        first = pick(now, skip);
      }
      if (first === undefined) return [];
      const webhookId = view.get(first)!.webhookId;
      const ids = pickOf(webhookId, now, Math.max(1, slots(webhookId)));
      const known = new Map(ids.map((id) => [id, view.get(id)?.record]));
      // Entries carrying their delivery (no record yet): the entry's lease is the whole claim.
      const fresh = new Set(ids.filter((id) => view.get(id)?.unwritten === true));
      for (const id of ids) view.delete(id);
      // The entries are leased too, in one write: other workers pass them by, and a crash makes them claimable
      // again when the lease ends. The round's token tells which leases took when not all did.
      const round = randomUUID();
      const leased = await bulkWriteInChunks(queue, ids.map((id): AnyBulkWriteOperation<QueueDoc> => ({
        updateOne: {
          filter: { _id: id, parked: { $ne: true }, due: { $lte: now }, leaseUntil: { $lte: now }, ...(fresh.has(id) ? { delivery: { $exists: true } } : {}) },
          update: { $set: { leaseUntil, claim: round } },
        },
      })));
      let mine = ids;
      if (leased.matchedCount === 0) mine = [];
      else if (leased.matchedCount < ids.length) {
        const ours = new Set((await queue.find({ _id: { $in: ids }, claim: round }, { projection: { _id: 1 } }).toArray()).map((e) => e._id));
        mine = ids.filter((id) => ours.has(id));
      }
      const freshClaims = mine.filter((id) => fresh.has(id))
        .map((id): ClaimedDelivery => ({ record: known.get(id)!, leaseToken: round, scheduled: true, unwritten: true }));
      mine = mine.filter((id) => !fresh.has(id));
      if (mine.length === 0 && freshClaims.length > 0) return freshClaims;
      // The lock itself is on each record, taken for the whole round in one bulk write (by `_id`, which every store
      // serves from its primary key; one findAndModify per record queued each behind the fan-out's inserts). The
      // round's token says which locks took: a record taken, changed or gone since it came into view is not ours.
      if (mine.length === 0) continue;
      const leaseToken = randomUUID();
      // A record this replica wrote last is locked only as it was then (same attempt and updatedAt: every result
      // moves updatedAt), so when every lock took, those records are known without reading them back.
      const locked = await bulkWriteInChunks(col, mine.map((id): AnyBulkWriteOperation<DeliveryDoc> => {
        const rec = known.get(id);
        return {
          updateOne: {
            filter: {
              _id: id, status: 'PENDING', leaseUntil: { $lt: now }, nextAttemptAt: { $lte: now },
              ...(rec ? { attempt: rec.attempt, updatedAt: rec.updatedAt } : {}),
            },
            update: { $set: { leaseUntil, leaseToken }, $unset: { parked: '' } },
          },
        };
      }));
      const allTook = locked.matchedCount === mine.length;
      // Otherwise reads by `_id`, in parallel (the launcher serialises writes, not reads); the round's token on a
      // record says the lock took.
      const docs = await Promise.all(mine.map(async (id): Promise<DeliveryRecord | undefined> => {
        const rec = known.get(id);
        if (allTook && rec) return rec;
        if (locked.matchedCount === 0) return undefined;
        const d = await col.findOne({ _id: id });
        return d && d.leaseToken === leaseToken ? toRecord(d) : undefined;
      }));
      const claims = await Promise.all(mine.map(async (id, j): Promise<ClaimedDelivery | undefined> => {
        const record = docs[j];
        if (record) return { record, leaseToken, scheduled: true };
        const entry = await queue.findOne({ _id: id });
        if (entry) await fixStale(entry, now);
        return undefined;
      }));
      const taken = [...freshClaims, ...claims.filter((c): c is ClaimedDelivery => c !== undefined)];
      if (taken.length > 0) return taken;
    }
    return [];
  }

  const repo: DeliveriesRepository = {
    async ensureIndexes() {
      // One delivery per (webhook, event): a redelivered event never makes a second.
      await col.createIndex({ webhookId: 1, eventId: 1 }, { unique: true, name: 'webhook_event_unique' });
      await col.createIndex({ status: 1, nextAttemptAt: 1 }, { name: 'due' });
      await col.createIndex({ teamId: 1, webhookId: 1, createdAt: -1 }, { name: 'webhook_created' });
      await col.createIndex({ createdAt: 1 }, { name: 'created' });
      await queue.createIndex({ due: 1 }, { name: 'due' });
      await queue.createIndex({ webhookId: 1 }, { name: 'webhook' });
    },

    async createPending(input) {
      return (await createPendingMany([input])) === 1;
    },

    createPendingMany,

    createClaimedMany,

    createQueuedMany,

    async directClaims(given) {
      const inputs = await unrecorded(given);
      const leaseToken = randomUUID();
      return inputs.map((input) => ({ record: unwrittenRecord(unwrittenEntry(input, { leaseUntil: EPOCH })), leaseToken, scheduled: true, unwritten: true, unstored: true }));
    },

    async insertFinished(input) {
      const doc: DeliveryDoc = {
        _id: input.id ?? newId('whd'), teamId: input.teamId, webhookId: input.webhookId, eventId: input.eventId, type: input.type,
        payload: input.payload, status: input.status, attempt: input.attempt, nextAttemptAt: input.nextAttemptAt, lastError: input.lastError,
        responseStatus: input.responseStatus, responseTimeMs: input.responseTimeMs, responseText: input.responseText,
        createdAt: input.createdAt, updatedAt: input.updatedAt, leaseUntil: EPOCH,
      };
      if (doc.status === 'PENDING') await requeue(doc._id, doc.webhookId, doc.nextAttemptAt ?? input.createdAt);
      await col.insertOne(doc);
      return toRecord(doc);
    },

    async claimDue(now, leaseMs, exclude) {
      return (await claimDueMany(now, leaseMs, exclude, () => 1))[0];
    },

    claimDueMany,

    async claimForRetry(teamId, webhookId, deliveryId, now, leaseMs) {
      const leaseToken = randomUUID();
      const d = await col.findOneAndUpdate(
        { _id: deliveryId, teamId, webhookId, leaseUntil: { $lt: now } },
        { $set: { leaseUntil: new Date(now.getTime() + leaseMs), leaseToken }, $unset: { parked: '' } },
        { returnDocument: 'after' },
      );
      // Its queue entry (if any) follows the result when the attempt is recorded.
      if (d && d.leaseToken === leaseToken) return { record: toRecord(d), leaseToken, scheduled: d.status === 'PENDING' };
      if ((await col.countDocuments({ _id: deliveryId, teamId, webhookId }, { limit: 1 })) > 0) return 'busy';
      // Claimed at fan-out and not attempted yet: its first attempt is on its way.
      const e = await queue.findOne({ _id: deliveryId, teamId, webhookId }, { projection: { delivery: 1 } });
      return e?.delivery ? 'busy' : undefined;
    },

    async finish(claim, result, now) {
      if (claim.unwritten) return (await repo.finishMany([{ claim, result }], now))[0];
      const d = await col.findOneAndUpdate(
        { _id: claim.record.id, leaseToken: claim.leaseToken },
        { $set: { ...result, updatedAt: now, leaseUntil: EPOCH }, $unset: { leaseToken: '' } },
        { returnDocument: 'after' },
      );
      if (!d) return undefined;
      // The result is recorded: a failure here must not undo that (the webhook's counters follow it). A crash or error
      // before the entry follows leaves it leased until the lease ends; then a claim finds the delivery's state and fixes it.
      await follow(d).catch(() => undefined);
      return toRecord(d);
    },

    async finishMany(items, now) {
      if (items.length === 0) return [];
      const fresh = items.filter(({ claim }) => claim.unwritten);
      const stored = items.filter(({ claim }) => !claim.unwritten);
      const freshTook = new Map<ClaimedDelivery, boolean>();
      (await insertResults(fresh, now)).forEach((t, i) => freshTook.set(fresh[i]!.claim, t));
      const storedTook = new Map<ClaimedDelivery, boolean>();
      (await updateResults(stored, now)).forEach((t, i) => storedTook.set(stored[i]!.claim, t));
      const took = items.map(({ claim }) => (claim.unwritten ? freshTook.get(claim) : storedTook.get(claim)) === true);
      const records = items.map(({ claim, result }, i): DeliveryRecord | undefined => (took[i] ? { ...claim.record, ...result, updatedAt: now } : undefined));
      // The results are recorded: a failure here must not undo that. Entries left behind stay leased until the lease
      // ends; then a claim finds each delivery's state and fixes its entry.
      const entryless = new Set(fresh.filter(({ claim }) => claim.unstored).map(({ claim }) => claim.record.id));
      await followMany(records.filter((r): r is DeliveryRecord => r !== undefined), entryless).catch(() => undefined);
      // An entry still carrying a delivery whose record exists (or whose pair has another delivery) and still held by
      // this claim is fixed now, so no claim of it posts again. A direct claim has no entry.
      await Promise.all(fresh.filter(({ claim }) => freshTook.get(claim) !== true && !claim.unstored).map(async ({ claim }) => {
        const entry = await queue.findOne({ _id: claim.record.id });
        if (entry?.claim === claim.leaseToken) await fixStale(entry, now);
      })).catch(() => undefined);
      return records;
    },

    async release(claim) {
      if (claim.unwritten) {
        await repo.releaseMany([claim]);
        return;
      }
      const d = await col.findOneAndUpdate(
        { _id: claim.record.id, leaseToken: claim.leaseToken },
        { $set: { leaseUntil: EPOCH }, $unset: { leaseToken: '' } },
        { returnDocument: 'after' },
      );
      if (d) await follow(d);
    },

    async releaseMany(given) {
      // Direct claims were never stored: now they are, as free entries carrying their deliveries (a pair whose record
      // or entry exists meanwhile makes none), claimed from the queue like any other.
      const unstored = given.filter((c) => c.unstored);
      if (unstored.length > 0) await createQueuedMany(unstored.map((c) => inputOf(c.record)));
      const all = given.filter((c) => !c.unstored);
      if (all.length === 0) return;
      // Unwritten ones get their pending record now (one insert), then their entries are freed without the delivery
      // (one bulk write, each guarded by this claim's token). A record refused as a duplicate leaves its entry as it
      // was, only freed: the claim that takes it sorts it out (fixStale).
      const fresh = all.filter((x) => x.unwritten);
      if (fresh.length > 0) {
        const duplicates = await insertManyReportingDuplicates(col, fresh.map((c) => docOf(c.record)));
        await bulkWriteInChunks(queue, fresh.map((c, i): AnyBulkWriteOperation<QueueDoc> => ({
          updateOne: {
            filter: { _id: c.record.id, claim: c.leaseToken },
            update: duplicates.has(i) ? { $set: { leaseUntil: EPOCH } } : { $set: { leaseUntil: EPOCH }, $unset: { delivery: '', claim: '' } },
          },
        })));
        // With a copy of the record just written (a claim finds it unchanged and need not read it).
        fresh.forEach((c, i) => see(c.record.id, c.record.webhookId, c.record.createdAt, duplicates.has(i) ? undefined : c.record));
      }
      const claims = all.filter((x) => !x.unwritten);
      if (claims.length === 0) return;
      // The records first: an entry freed while its record is still leased only costs a claim one look (fixStale).
      await bulkWriteInChunks(col, claims.map((c): AnyBulkWriteOperation<DeliveryDoc> => ({
        updateOne: { filter: { _id: c.record.id, leaseToken: c.leaseToken }, update: { $set: { leaseUntil: EPOCH }, $unset: { leaseToken: '' } } },
      })));
      await bulkWriteInChunks(queue, claims.map((c): AnyBulkWriteOperation<QueueDoc> => ({
        updateOne: { filter: { _id: c.record.id, claim: c.leaseToken }, update: { $set: { leaseUntil: EPOCH } } },
      })));
      // Due now: in view again, for this replica's next claim (the copy of the record is no longer current: its lease moved).
      for (const c of claims) see(c.record.id, c.record.webhookId, c.record.nextAttemptAt ?? c.record.createdAt);
    },

    async park(claim) {
      if (claim.unstored) {
        await repo.releaseMany([claim]);
        return;
      }
      if (claim.unwritten) {
        const entry = await queue.findOne({ _id: claim.record.id, claim: claim.leaseToken }, { projection: { _id: 1 } });
        if (entry) await materialize({ _id: claim.record.id, webhookId: claim.record.webhookId, due: claim.record.createdAt }, claim.record, true);
        return;
      }
      const d = await col.findOneAndUpdate(
        { _id: claim.record.id, leaseToken: claim.leaseToken },
        { $set: { leaseUntil: EPOCH }, $unset: { leaseToken: '' } },
        { returnDocument: 'after' },
      );
      if (!d) return;
      if (d.status === 'PENDING') await requeue(d._id, d.webhookId, d.nextAttemptAt ?? new Date(), true);
      else await dequeue(d._id);
    },

    async unpark(webhookId) {
      const n = (await queue.updateMany({ webhookId, parked: true }, { $unset: { parked: '' } })).modifiedCount;
      // Released entries are not in view: the next claim looks.
      if (n > 0) look.at = Number.NEGATIVE_INFINITY;
      return n;
    },

    async cancelPending(webhookId, reason, now) {
      // The queue knows every pending delivery of the webhook; each is then changed by its id.
      const entries = await queue.find({ webhookId }).toArray();
      let n = 0;
      for (const e of entries) {
        if (isUnwritten(e)) {
          // Never attempted and no record yet: written as cancelled. A record there already (its first result was
          // written just before a crash) is cancelled below like any pending one.
          const cancelled = docOf({ ...unwrittenRecord(e), status: 'FAILED', nextAttemptAt: null, lastError: reason, updatedAt: now });
          if (await col.insertOne(cancelled).then(() => true, (err: unknown) => { if (isDuplicateKeyError(err)) return false; throw err; })) {
            n++;
            await dequeue(e._id);
            continue;
          }
        }
        const res = await col.updateOne(
          { _id: e._id, status: 'PENDING' },
          { $set: { status: 'FAILED', nextAttemptAt: null, lastError: reason, updatedAt: now }, $unset: { parked: '' } },
        );
        n += res.modifiedCount;
        // An attempt in flight that records a retry afterwards queues it again (and its next attempt finds no webhook).
        await dequeue(e._id);
      }
      return n;
    },

    async get(teamId, webhookId, id) {
      const d = await col.findOne({ _id: id, teamId, webhookId });
      if (d) return toRecord(d);
      // Claimed at fan-out, not attempted yet: pending, as its entry holds it.
      const e = await queue.findOne({ _id: id, teamId, webhookId });
      return e && isUnwritten(e) ? unwrittenRecord(e) : undefined;
    },

    async list(teamId, webhookId, q) {
      const filter: Filter<DeliveryDoc> = { teamId, webhookId, ...(q.status ? { status: q.status } : {}) };
      // Deliveries claimed at fan-out and not attempted yet are pending entries without a record: merged in (a few
      // hundred at most, what the worker holds; the queue is small beside the records).
      const fresh = q.status === undefined || q.status === 'PENDING'
        ? (await queue.find({ teamId, webhookId, delivery: { $exists: true } }).toArray()).filter(isUnwritten).map(unwrittenRecord)
        : [];
      if (fresh.length === 0) {
        const [docs, count] = await Promise.all([
          col.find(filter).sort({ createdAt: -1, _id: -1 }).skip(q.skip).limit(q.limit).toArray(),
          col.countDocuments(filter),
        ]);
        return { records: docs.map(toRecord), count };
      }
      const [docs, count] = await Promise.all([
        col.find(filter).sort({ createdAt: -1, _id: -1 }).limit(q.skip + q.limit).toArray(),
        col.countDocuments(filter),
      ]);
      // An entry whose record was just written (its entry not yet removed) shows once, as its record.
      const seen = new Set(docs.map((d) => d._id));
      const extra = fresh.filter((r) => !seen.has(r.id));
      const merged = [...docs.map(toRecord), ...extra]
        .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
      return { records: merged.slice(q.skip, q.skip + q.limit), count: count + extra.length };
    },

    async nextDueAt(now, exclude) {
      const skip = new Set(exclude);
      let next = Number.POSITIVE_INFINITY;
      for (const e of view.values()) if (!skip.has(e.webhookId) && e.due < next) next = e.due;
      return Number.isFinite(next) ? new Date(next) : undefined;
    },

    async sweep(cutoff, now) {
      return (await col.deleteMany({ createdAt: { $lt: cutoff }, leaseUntil: { $lt: now } })).deletedCount;
    },

    async repairQueue(now) {
      const pending = await col.find({ status: 'PENDING' }, { projection: { _id: 1, webhookId: 1, nextAttemptAt: 1, leaseUntil: 1 } }).toArray();
      // Read after the pending ones: an entry queued meanwhile is here. Only the missing are written (a restart
      // during a backlog used to upsert every one of them: 7,635 writes in the 5,000-contact drill).
      const queued = new Set((await queue.find({}, { projection: { _id: 1 } }).toArray()).map((e) => e._id));
      let n = 0;
      for (const d of pending) {
        if (queued.has(d._id)) continue;
        const leaseUntil = d.leaseUntil.getTime() >= now.getTime() ? new Date(d.leaseUntil.getTime() + 1) : EPOCH;
        const res = await queue.updateOne(
          { _id: d._id },
          { $setOnInsert: { webhookId: d.webhookId, due: d.nextAttemptAt ?? now, leaseUntil, createdAt: now } },
          { upsert: true },
        );
        n += res.upsertedCount;
      }
      if (n > 0) look.at = Number.NEGATIVE_INFINITY;
      return n;
    },
  };
  return repo;
}
