import { randomUUID } from 'node:crypto';
import { isDuplicateKeyError, newId } from '@mailfleet/kit';
import type { Collection, Db, Filter } from 'mongodb';
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
  /** Claimable once this is past (EPOCH when free). */
  leaseUntil: Date;
  leaseToken?: string;
  /** Held while its webhook is not ACTIVE; activation releases it. */
  parked?: boolean;
}

const EPOCH = new Date(0);

export interface DeliveriesRepository {
  ensureIndexes(): Promise<void>;
  /** A PENDING delivery due now; false when this (webhook, event) pair already has one (a redelivered event). */
  createPending(input: { teamId: string; webhookId: string; eventId: string; type: string; payload: string; now: Date }): Promise<boolean>;
  /** A delivery that is already finished (test events: attempted before they are stored). */
  insertFinished(input: Omit<DeliveryRecord, 'id'> & { id?: string }): Promise<DeliveryRecord>;
  /** Claims the most overdue unleased PENDING delivery, skipping parked ones and the webhooks given. */
  claimDue(now: Date, leaseMs: number, excludeWebhookIds: readonly string[]): Promise<ClaimedDelivery | undefined>;
  /** Claims one delivery for a manual retry: 'busy' when another attempt holds it now. */
  claimForRetry(teamId: string, webhookId: string, deliveryId: string, now: Date, leaseMs: number): Promise<ClaimedDelivery | 'busy' | undefined>;
  /** Writes a result and releases the claim; undefined when the claim was lost (lease expired and taken). */
  finish(claim: ClaimedDelivery, result: DeliveryResult, now: Date): Promise<DeliveryRecord | undefined>;
  /** Releases the claim without writing a result (the attempt could not be made). */
  release(claim: ClaimedDelivery): Promise<void>;
  /** Holds a delivery of a webhook that is not ACTIVE. */
  park(claim: ClaimedDelivery): Promise<void>;
  /** Releases the held deliveries of an activated webhook. */
  unpark(webhookId: string): Promise<number>;
  /** Cancels every PENDING delivery of a webhook (deleted). */
  cancelPending(webhookId: string, reason: string, now: Date): Promise<number>;
  get(teamId: string, webhookId: string, id: string): Promise<DeliveryRecord | undefined>;
  list(teamId: string, webhookId: string, q: { skip: number; limit: number; status?: DeliveryState | undefined }): Promise<{ records: DeliveryRecord[]; count: number }>;
  /** When the next unleased, unparked PENDING delivery falls due. */
  nextDueAt(now: Date, excludeWebhookIds: readonly string[]): Promise<Date | undefined>;
  /** Deletes unleased deliveries created before `cutoff`. */
  sweep(cutoff: Date, now: Date): Promise<number>;
}

function toRecord(d: DeliveryDoc): DeliveryRecord {
  return {
    id: d._id, teamId: d.teamId, webhookId: d.webhookId, eventId: d.eventId, type: d.type, payload: d.payload, status: d.status,
    attempt: d.attempt, nextAttemptAt: d.nextAttemptAt, lastError: d.lastError, responseStatus: d.responseStatus,
    responseTimeMs: d.responseTimeMs, responseText: d.responseText, createdAt: d.createdAt, updatedAt: d.updatedAt,
  };
}

export function createDeliveriesRepository(db: Db): DeliveriesRepository {
  const col: Collection<DeliveryDoc> = db.collection<DeliveryDoc>('deliveries');

  const claimable = (now: Date, exclude: readonly string[]): Filter<DeliveryDoc> => ({
    status: 'PENDING',
    leaseUntil: { $lt: now },
    parked: { $ne: true },
    ...(exclude.length > 0 ? { webhookId: { $nin: [...exclude] } } : {}),
  });

  return {
    async ensureIndexes() {
      // One delivery per (webhook, event): a redelivered event never makes a second.
      await col.createIndex({ webhookId: 1, eventId: 1 }, { unique: true, name: 'webhook_event_unique' });
      await col.createIndex({ status: 1, nextAttemptAt: 1 }, { name: 'due' });
      await col.createIndex({ teamId: 1, webhookId: 1, createdAt: -1 }, { name: 'webhook_created' });
      await col.createIndex({ createdAt: 1 }, { name: 'created' });
    },

    async createPending(input) {
      try {
        await col.insertOne({
          _id: newId('whd'), teamId: input.teamId, webhookId: input.webhookId, eventId: input.eventId, type: input.type,
          payload: input.payload, status: 'PENDING', attempt: 0, nextAttemptAt: input.now, lastError: null, responseStatus: null,
          responseTimeMs: null, responseText: null, createdAt: input.now, updatedAt: input.now, leaseUntil: EPOCH,
        });
        return true;
      } catch (err) {
        if (isDuplicateKeyError(err)) return false;
        throw err;
      }
    },

    async insertFinished(input) {
      const doc: DeliveryDoc = {
        _id: input.id ?? newId('whd'), teamId: input.teamId, webhookId: input.webhookId, eventId: input.eventId, type: input.type,
        payload: input.payload, status: input.status, attempt: input.attempt, nextAttemptAt: input.nextAttemptAt, lastError: input.lastError,
        responseStatus: input.responseStatus, responseTimeMs: input.responseTimeMs, responseText: input.responseText,
        createdAt: input.createdAt, updatedAt: input.updatedAt, leaseUntil: EPOCH,
      };
      await col.insertOne(doc);
      return toRecord(doc);
    },

    async claimDue(now, leaseMs, exclude) {
      const leaseToken = randomUUID();
      const d = await col.findOneAndUpdate(
        { ...claimable(now, exclude), nextAttemptAt: { $lte: now } },
        { $set: { leaseUntil: new Date(now.getTime() + leaseMs), leaseToken } },
        { sort: { nextAttemptAt: 1 }, returnDocument: 'after' },
      );
      if (!d || d.leaseToken !== leaseToken) return undefined;
      return { record: toRecord(d), leaseToken, scheduled: true };
    },

    async claimForRetry(teamId, webhookId, deliveryId, now, leaseMs) {
      const leaseToken = randomUUID();
      const d = await col.findOneAndUpdate(
        { _id: deliveryId, teamId, webhookId, leaseUntil: { $lt: now } },
        { $set: { leaseUntil: new Date(now.getTime() + leaseMs), leaseToken }, $unset: { parked: '' } },
        { returnDocument: 'after' },
      );
      if (d && d.leaseToken === leaseToken) return { record: toRecord(d), leaseToken, scheduled: d.status === 'PENDING' };
      return (await col.countDocuments({ _id: deliveryId, teamId, webhookId }, { limit: 1 })) > 0 ? 'busy' : undefined;
    },

    async finish(claim, result, now) {
      const d = await col.findOneAndUpdate(
        { _id: claim.record.id, leaseToken: claim.leaseToken },
        { $set: { ...result, updatedAt: now, leaseUntil: EPOCH }, $unset: { leaseToken: '' } },
        { returnDocument: 'after' },
      );
      return d ? toRecord(d) : undefined;
    },

    async release(claim) {
      await col.updateOne({ _id: claim.record.id, leaseToken: claim.leaseToken }, { $set: { leaseUntil: EPOCH }, $unset: { leaseToken: '' } });
    },

    async park(claim) {
      await col.updateOne({ _id: claim.record.id, leaseToken: claim.leaseToken }, { $set: { leaseUntil: EPOCH, parked: true }, $unset: { leaseToken: '' } });
    },

    async unpark(webhookId) {
      return (await col.updateMany({ webhookId, parked: true }, { $unset: { parked: '' } })).modifiedCount;
    },

    async cancelPending(webhookId, reason, now) {
      const res = await col.updateMany(
        { webhookId, status: 'PENDING' },
        { $set: { status: 'FAILED', nextAttemptAt: null, lastError: reason, updatedAt: now }, $unset: { parked: '' } },
      );
      return res.modifiedCount;
    },

    async get(teamId, webhookId, id) {
      const d = await col.findOne({ _id: id, teamId, webhookId });
      return d ? toRecord(d) : undefined;
    },

    async list(teamId, webhookId, q) {
      const filter: Filter<DeliveryDoc> = { teamId, webhookId, ...(q.status ? { status: q.status } : {}) };
      const [docs, count] = await Promise.all([
        col.find(filter).sort({ createdAt: -1, _id: -1 }).skip(q.skip).limit(q.limit).toArray(),
        col.countDocuments(filter),
      ]);
      return { records: docs.map(toRecord), count };
    },

    async nextDueAt(now, exclude) {
      const [d] = await col.find(claimable(now, exclude), { projection: { nextAttemptAt: 1 } }).sort({ nextAttemptAt: 1 }).limit(1).toArray();
      return d?.nextAttemptAt ?? undefined;
    },

    async sweep(cutoff, now) {
      return (await col.deleteMany({ createdAt: { $lt: cutoff }, leaseUntil: { $lt: now } })).deletedCount;
    },
  };
}
