import { createBatchCountOnce, createCountOnce, type BatchCountResult, type CountOutcome, type KeyedDoc } from '@mailfleet/kit';
import type { Collection, Db, Filter, UpdateFilter } from 'mongodb';
import type { Campaign, CampaignStatus, CounterName } from '../domain/campaign.js';

const EPOCH = new Date(0);
/** Keys of effects that happen once: the counters' count-once marks among them. */
const ONCE_KEYS = 'once_keys';

interface CampaignDoc {
  _id: string;
  teamId: string;
  name: string;
  from: string;
  subject: string;
  previewText: string | null;
  contactBookId: string | null;
  html: string | null;
  content: string | null;
  status: CampaignStatus;
  scheduledAt: Date | null;
  batchSize: number;
  batchWindowMinutes: number;
  total: number;
  sent: number;
  delivered: number;
  opened: number;
  clicked: number;
  unsubscribed: number;
  bounced: number;
  hardBounced: number;
  complained: number;
  replyTo: string[];
  cc: string[];
  bcc: string[];
  /** Set when the sender paused the campaign on a permanent refusal; cleared by a resume or schedule (absent on older documents). */
  pausedReason?: string | null;
  createdAt: Date;
  updatedAt: Date;
  // Sending state (never leaves this file except through SendingState).
  /** Contacts-service cursor after the last contact handed over; null before the first. */
  cursor: string | null;
  /** Number of the batch in progress (0 first). */
  batchNo: number;
  /** Contacts of the current batch already handed over. */
  sentInBatch: number;
  /** Chunks of the current batch already handed over (names the next idempotency key). */
  chunkNo: number;
  /** When the next batch may start. */
  nextBatchAt: Date;
  /** The replica holding the batch claim, and until when (EPOCH: free). */
  leaseOwner: string | null;
  leaseUntil: Date;
  totalCounted: boolean;
  /** Failed attempts at the current chunk in a row (backoff of transient failures); absent on older documents. */
  failures?: number;
  /** Count-once marks of countings in flight (see the kit's count-once.ts). */
  pending?: string[];
}

/** What the batch sender needs of a claimed campaign. */
export interface SendingState {
  readonly campaign: Campaign;
  readonly cursor: string | null;
  readonly batchNo: number;
  readonly sentInBatch: number;
  readonly chunkNo: number;
  readonly totalCounted: boolean;
  /** Failed attempts at the current chunk in a row. */
  readonly failures: number;
}

export interface NewCampaign extends Omit<Campaign, 'total' | CounterName | 'pausedReason'> {
  readonly nextBatchAt: Date;
}

export interface CampaignsRepository {
  ensureIndexes(): Promise<void>;
  insert(c: NewCampaign): Promise<Campaign>;
  get(teamId: string, id: string): Promise<Campaign | undefined>;
  list(teamId: string): Promise<Campaign[]>;
  listForBook(teamId: string, contactBookId: string): Promise<Campaign[]>;
  /**
   * Compare-and-set on the status (and on `scheduledAt` when `ifScheduledAt` is given): undefined when
   * the campaign is missing or not in one of `from`. Clears a pausedReason.
   */
  transition(
    teamId: string, id: string, from: readonly CampaignStatus[],
    set: Partial<Pick<CampaignDoc, 'status' | 'scheduledAt' | 'batchSize' | 'batchWindowMinutes' | 'nextBatchAt'>>, now: Date,
    ifScheduledAt?: Date | null,
  ): Promise<Campaign | undefined>;
  delete(teamId: string, id: string): Promise<boolean>;
  /** SCHEDULED campaigns whose time has come become SENDING; returns how many. */
  startDue(now: Date): Promise<number>;
  /** Atomically claims one SENDING campaign whose next batch is due and whose claim is free or expired. */
  claimDue(owner: string, now: Date, leaseMs: number): Promise<SendingState | undefined>;
  /** Records the total (once). */
  setTotal(id: string, owner: string, total: number): Promise<void>;
  /** After a chunk was handed over: moves the cursor and renews the claim; returns the status now (undefined: claim lost). */
  advance(id: string, owner: string, p: { cursor: string | null; sentInBatch: number; chunkNo: number }, now: Date, leaseMs: number): Promise<CampaignStatus | undefined>;
  /** Ends the current batch: next batch at `nextBatchAt`, or COMPLETED when `done`. Frees the claim. */
  finishBatch(id: string, owner: string, done: boolean, nextBatchAt: Date, now: Date): Promise<void>;
  /** Frees a claim without finishing the batch (pause, stop). */
  release(id: string, owner: string): Promise<void>;
  /** Frees a claim after a failure so that no replica takes the batch again before `until`; counts the failure. */
  backOff(id: string, owner: string, until: Date): Promise<void>;
  /**
   * After a refusal that no retry can change: the campaign becomes PAUSED with `reason` (one update,
   * frees the claim; the cursor stays on the refused chunk, so a resume tries it again).
   */
  pauseWithReason(id: string, owner: string, reason: string, now: Date): Promise<void>;
  /**
   * Adds one to each counter exactly once per `key` (the kit's count-once protocol, marks in
   * `once_keys`): a redelivered event, a second request or a crash anywhere in between neither
   * loses nor repeats the count. A campaign that is gone counts nothing.
   */
  countOnce(input: CountOnceInput): Promise<CountOutcome>;
  /**
   * countOnce for many countings in one go (the kit's batched count-once): one claim of
   * all their keys, one update per campaign, one finish and one pull per campaign.
   * `busy` names events whose key another delivery of the same event holds right now.
   */
  countBatch(inputs: readonly CountOnceInput[]): Promise<BatchCountResult>;
}

function toRecord(d: CampaignDoc): Campaign {
  return {
    id: d._id, teamId: d.teamId, name: d.name, from: d.from, subject: d.subject, previewText: d.previewText, contactBookId: d.contactBookId,
    html: d.html, content: d.content, status: d.status, scheduledAt: d.scheduledAt, batchSize: d.batchSize, batchWindowMinutes: d.batchWindowMinutes,
    total: d.total, sent: d.sent, delivered: d.delivered, opened: d.opened, clicked: d.clicked, unsubscribed: d.unsubscribed, bounced: d.bounced,
    hardBounced: d.hardBounced, complained: d.complained, replyTo: d.replyTo, cc: d.cc, bcc: d.bcc, pausedReason: d.pausedReason ?? null,
    createdAt: d.createdAt, updatedAt: d.updatedAt,
  };
}

export interface CountOnceInput {
  /** The campaign. */
  readonly id: string;
  /** What makes the count happen once, e.g. `count:<campaign>:delivered:<email>`. */
  readonly key: string;
  /** The event (or request) doing the counting. */
  readonly eventId: string;
  readonly counters: readonly CounterName[];
  readonly now: Date;
  /** How long the key is kept (then swept). */
  readonly retentionMs: number;
}

/** Lease and margin of a counting (tests shorten them to stage a crash). */
export interface CountingOptions {
  readonly leaseMs?: number;
  readonly marginMs?: number;
}

export function createCampaignsRepository(db: Db, countingOptions: CountingOptions = {}): CampaignsRepository {
  const col: Collection<CampaignDoc> = db.collection<CampaignDoc>('campaigns');
  const leased = (id: string, owner: string): Filter<CampaignDoc> => ({ _id: id, leaseOwner: owner });
  const counting = createCountOnce({
    marks: db.collection<KeyedDoc>(ONCE_KEYS), targets: col as unknown as Collection<KeyedDoc>, ...countingOptions,
  });
  // A batch of counters is finished by one settlement per campaign (one insert), not an update of each of its
  // keys: on FerretDB each of those updates is a statement of its own. Its keys then stay `pending` and read as
  // finished through the settlement, which the sweep removes only after them (OnceRepository.sweep).
  const batchCounting = createBatchCountOnce({
    marks: db.collection<KeyedDoc>(ONCE_KEYS), targets: col as unknown as Collection<KeyedDoc>, settle: true, ...countingOptions,
  });
  const effectOf = ({ id, key, eventId, counters, now, retentionMs }: CountOnceInput) => {
    const inc: Partial<Record<CounterName, number>> = {};
    for (const c of counters) inc[c] = (inc[c] ?? 0) + 1;
    return {
      markId: key, eventId, target: id, markFields: { at: now, expiresAt: new Date(now.getTime() + retentionMs) },
      inc: inc as Record<string, number>, set: { updatedAt: now },
    };
  };
  return {
    async ensureIndexes() {
      await col.createIndex({ teamId: 1, createdAt: -1 }, { name: 'team_created' });
      await col.createIndex({ teamId: 1, contactBookId: 1 }, { name: 'team_book' });
      await col.createIndex({ status: 1, nextBatchAt: 1 }, { name: 'status_next_batch' });
      await col.createIndex({ status: 1, scheduledAt: 1 }, { name: 'status_scheduled' });
    },
    async insert(c) {
      const doc: CampaignDoc = {
        _id: c.id, teamId: c.teamId, name: c.name, from: c.from, subject: c.subject, previewText: c.previewText, contactBookId: c.contactBookId,
        html: c.html, content: c.content, status: c.status, scheduledAt: c.scheduledAt, batchSize: c.batchSize, batchWindowMinutes: c.batchWindowMinutes,
        total: 0, sent: 0, delivered: 0, opened: 0, clicked: 0, unsubscribed: 0, bounced: 0, hardBounced: 0, complained: 0,
        replyTo: [...c.replyTo], cc: [...c.cc], bcc: [...c.bcc], createdAt: c.createdAt, updatedAt: c.updatedAt,
        pausedReason: null,
        cursor: null, batchNo: 0, sentInBatch: 0, chunkNo: 0, nextBatchAt: c.nextBatchAt, leaseOwner: null, leaseUntil: EPOCH, totalCounted: false, failures: 0,
      };
      await col.insertOne(doc);
      return toRecord(doc);
    },
    async get(teamId, id) {
      const d = await col.findOne({ _id: id, teamId });
      return d ? toRecord(d) : undefined;
    },
    async list(teamId) {
      return (await col.find({ teamId }).sort({ createdAt: -1, _id: -1 }).toArray()).map(toRecord);
    },
    async listForBook(teamId, contactBookId) {
      return (await col.find({ teamId, contactBookId }).sort({ createdAt: -1, _id: -1 }).toArray()).map(toRecord);
    },
    async transition(teamId, id, from, set, now, ifScheduledAt) {
      const d = await col.findOneAndUpdate(
        { _id: id, teamId, status: { $in: [...from] }, ...(ifScheduledAt !== undefined ? { scheduledAt: ifScheduledAt } : {}) },
        { $set: { ...set, pausedReason: null, updatedAt: now } },
        { returnDocument: 'after' },
      );
      return d ? toRecord(d) : undefined;
    },
    async delete(teamId, id) {
      return (await col.deleteOne({ _id: id, teamId })).deletedCount > 0;
    },
    async startDue(now) {
      const r = await col.updateMany(
        { status: 'SCHEDULED', scheduledAt: { $lte: now } },
        { $set: { status: 'SENDING', nextBatchAt: now, updatedAt: now } },
      );
      return r.modifiedCount;
    },
    async claimDue(owner, now, leaseMs) {
      const d = await col.findOneAndUpdate(
        { status: 'SENDING', nextBatchAt: { $lte: now }, leaseUntil: { $lt: now } },
        { $set: { leaseOwner: owner, leaseUntil: new Date(now.getTime() + leaseMs) } },
        { returnDocument: 'after', sort: { nextBatchAt: 1 } },
      );
      if (!d) return undefined;
      return {
        campaign: toRecord(d), cursor: d.cursor, batchNo: d.batchNo, sentInBatch: d.sentInBatch, chunkNo: d.chunkNo, totalCounted: d.totalCounted,
        failures: d.failures ?? 0,
      };
    },
    async setTotal(id, owner, total) {
      await col.updateOne({ ...leased(id, owner), totalCounted: false }, { $set: { total, totalCounted: true } });
    },
    async advance(id, owner, p, now, leaseMs) {
      const d = await col.findOneAndUpdate(
        leased(id, owner),
        { $set: { cursor: p.cursor, sentInBatch: p.sentInBatch, chunkNo: p.chunkNo, failures: 0, leaseUntil: new Date(now.getTime() + leaseMs), updatedAt: now } },
        { returnDocument: 'after' },
      );
      return d?.status;
    },
    async finishBatch(id, owner, done, nextBatchAt, now) {
      const update: UpdateFilter<CampaignDoc> = done
        ? { $set: { status: 'COMPLETED', leaseOwner: null, leaseUntil: EPOCH, updatedAt: now } }
        : { $set: { sentInBatch: 0, chunkNo: 0, nextBatchAt, leaseOwner: null, leaseUntil: EPOCH, updatedAt: now }, $inc: { batchNo: 1 } };
      await col.updateOne({ ...leased(id, owner), status: { $in: ['SENDING', 'PAUSED'] } }, update);
    },
    async release(id, owner) {
      await col.updateOne(leased(id, owner), { $set: { leaseOwner: null, leaseUntil: EPOCH } });
    },
    async backOff(id, owner, until) {
      await col.updateOne(leased(id, owner), { $set: { leaseOwner: null, leaseUntil: until }, $inc: { failures: 1 } });
    },
    async pauseWithReason(id, owner, reason, now) {
      // Only from SENDING: a user's pause or delete meanwhile wins, and its state is not overwritten.
      const r = await col.updateOne(
        { ...leased(id, owner), status: 'SENDING' },
        { $set: { status: 'PAUSED', pausedReason: reason, leaseOwner: null, leaseUntil: EPOCH, failures: 0, updatedAt: now } },
      );
      if (r.matchedCount === 0) await col.updateOne(leased(id, owner), { $set: { leaseOwner: null, leaseUntil: EPOCH } });
    },
    async countOnce(input) {
      return counting.count(effectOf(input));
    },
    async countBatch(inputs) {
      return batchCounting.count(inputs.map(effectOf));
    },
  };
}

/** A key (with `expiresAt`), or a batch's settlement (`doneAt`, no `expiresAt`). */
interface OnceDoc {
  _id: string;
  at?: Date;
  expiresAt?: Date;
  doneAt?: Date;
}

/** The keys of effects that happen once (written by countOnce): their index and the sweep of expired ones. */
export interface OnceRepository {
  ensureIndexes(): Promise<void>;
  /**
   * Deletes expired keys, and the settlements of batches finished more than `settlementRetentionMs` ago: a
   * settlement is younger than every key it finishes and those expire `settlementRetentionMs` after they were
   * written, so it never goes before them (a key without its settlement would read as a counting in flight).
   */
  sweep(now: Date, settlementRetentionMs: number): Promise<number>;
}

export function createOnceRepository(db: Db): OnceRepository {
  const col: Collection<OnceDoc> = db.collection<OnceDoc>(ONCE_KEYS);
  return {
    async ensureIndexes() {
      await col.createIndex({ expiresAt: 1 }, { name: 'expires' });
      // A batch of counters finishes its keys by batch id (and a take-over finishes a crashed batch's).
      await col.createIndex({ batchId: 1 }, { name: 'batch' });
    },
    async sweep(now, settlementRetentionMs) {
      const settledBefore = new Date(now.getTime() - settlementRetentionMs);
      return (await col.deleteMany({ $or: [{ expiresAt: { $lt: now } }, { expiresAt: { $exists: false }, doneAt: { $lt: settledBefore } }] } as Filter<OnceDoc>)).deletedCount;
    },
  };
}
