import type { Collection, Db, UpdateFilter } from 'mongodb';

export type WebhookStatus = 'ACTIVE' | 'PAUSED' | 'FAILED';

export interface WebhookRecord {
  readonly id: string;
  readonly teamId: string;
  readonly url: string;
  readonly description: string | null;
  readonly eventTypes: readonly string[];
  readonly status: WebhookStatus;
  /** The signing secret in full: callers mask it for every response but create and secret changes. */
  readonly secret: string;
  readonly apiVersion: string | null;
  readonly consecutiveFailures: number;
  readonly lastSuccessAt: Date | null;
  readonly lastFailureAt: Date | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  readonly createdByUserId: string;
}

interface WebhookDoc {
  _id: string;
  teamId: string;
  url: string;
  description: string | null;
  eventTypes: string[];
  status: WebhookStatus;
  /** Stored as is: it keys the HMAC of every delivery. Never logged. */
  secret: string;
  apiVersion: string | null;
  /** Events in a row that failed every attempt; reset by a success or by activation. */
  consecutiveFailures: number;
  lastSuccessAt: Date | null;
  lastFailureAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  createdByUserId: string;
}

/** A change from PATCH; absent fields stay. */
export interface WebhookPatch {
  readonly url?: string;
  readonly description?: string | null;
  readonly eventTypes?: readonly string[];
  readonly status?: WebhookStatus;
  /** Activation: consecutive failures back to 0. */
  readonly resetFailures?: boolean;
  readonly secret?: string;
}

export interface WebhooksRepository {
  ensureIndexes(): Promise<void>;
  create(input: Omit<WebhookRecord, 'consecutiveFailures' | 'lastSuccessAt' | 'lastFailureAt' | 'updatedAt' | 'status' | 'apiVersion'>): Promise<WebhookRecord>;
  /** The team's webhooks, newest first. */
  list(teamId: string): Promise<WebhookRecord[]>;
  get(teamId: string, id: string): Promise<WebhookRecord | undefined>;
  update(teamId: string, id: string, patch: WebhookPatch, now: Date): Promise<WebhookRecord | undefined>;
  /** Deletes and returns the webhook as it was. */
  delete(teamId: string, id: string): Promise<WebhookRecord | undefined>;
  /** Every ACTIVE webhook of the team, whatever it subscribes to (the fan-out filters them: subscription-cache.ts). */
  active(teamId: string): Promise<WebhookRecord[]>;
  recordSuccess(teamId: string, id: string, at: Date): Promise<void>;
  /**
   * A failed attempt: lastFailureAt moves; when `eventFailed` (the event
   * failed its last scheduled attempt) consecutive failures go up, and at
   * `threshold` an ACTIVE webhook turns FAILED. Reports that transition.
   */
  recordFailure(teamId: string, id: string, at: Date, eventFailed: boolean, threshold: number): Promise<{ turnedFailed: boolean; consecutiveFailures: number }>;
}

function toRecord(d: WebhookDoc): WebhookRecord {
  return {
    id: d._id, teamId: d.teamId, url: d.url, description: d.description, eventTypes: d.eventTypes, status: d.status, secret: d.secret,
    apiVersion: d.apiVersion, consecutiveFailures: d.consecutiveFailures, lastSuccessAt: d.lastSuccessAt, lastFailureAt: d.lastFailureAt,
    createdAt: d.createdAt, updatedAt: d.updatedAt, createdByUserId: d.createdByUserId,
  };
}

export function createWebhooksRepository(db: Db): WebhooksRepository {
  const col: Collection<WebhookDoc> = db.collection<WebhookDoc>('webhooks');
  return {
    async ensureIndexes() {
      await col.createIndex({ teamId: 1, createdAt: -1 }, { name: 'team_created' });
      await col.createIndex({ teamId: 1, status: 1 }, { name: 'team_status' });
    },

    async create(input) {
      const doc: WebhookDoc = {
        _id: input.id, teamId: input.teamId, url: input.url, description: input.description, eventTypes: [...input.eventTypes],
        status: 'ACTIVE', secret: input.secret, apiVersion: null, consecutiveFailures: 0, lastSuccessAt: null, lastFailureAt: null,
        createdAt: input.createdAt, updatedAt: input.createdAt, createdByUserId: input.createdByUserId,
      };
      await col.insertOne(doc);
      return toRecord(doc);
    },

    async list(teamId) {
      return (await col.find({ teamId }).sort({ createdAt: -1, _id: -1 }).toArray()).map(toRecord);
    },

    async get(teamId, id) {
      const d = await col.findOne({ _id: id, teamId });
      return d ? toRecord(d) : undefined;
    },

    async update(teamId, id, patch, now) {
      const set: Partial<WebhookDoc> = { updatedAt: now };
      if (patch.url !== undefined) set.url = patch.url;
      if (patch.description !== undefined) set.description = patch.description;
      if (patch.eventTypes !== undefined) set.eventTypes = [...patch.eventTypes];
      if (patch.status !== undefined) set.status = patch.status;
      if (patch.resetFailures) set.consecutiveFailures = 0;
      if (patch.secret !== undefined) set.secret = patch.secret;
      const d = await col.findOneAndUpdate({ _id: id, teamId }, { $set: set }, { returnDocument: 'after' });
      return d ? toRecord(d) : undefined;
    },

    async delete(teamId, id) {
      const d = await col.findOneAndDelete({ _id: id, teamId });
      return d ? toRecord(d) : undefined;
    },

    async active(teamId) {
      return (await col.find({ teamId, status: 'ACTIVE' }).toArray()).map(toRecord);
    },

    async recordSuccess(teamId, id, at) {
      await col.updateOne({ _id: id, teamId }, { $set: { consecutiveFailures: 0, lastSuccessAt: at } });
    },

    async recordFailure(teamId, id, at, eventFailed, threshold) {
      const update: UpdateFilter<WebhookDoc> = { $set: { lastFailureAt: at } };
      if (eventFailed) update.$inc = { consecutiveFailures: 1 };
      const d = await col.findOneAndUpdate({ _id: id, teamId }, update, { returnDocument: 'after' });
      if (!d || !eventFailed || d.consecutiveFailures < threshold) return { turnedFailed: false, consecutiveFailures: d?.consecutiveFailures ?? 0 };
      // A second single-document write: only an ACTIVE webhook still at or over the threshold turns FAILED
      // (a success or a PATCH in between wins). A crash in between is repaired by the next failure.
      const res = await col.updateOne(
        { _id: id, teamId, status: 'ACTIVE', consecutiveFailures: { $gte: threshold } },
        { $set: { status: 'FAILED', updatedAt: at } },
      );
      return { turnedFailed: res.modifiedCount === 1, consecutiveFailures: d.consecutiveFailures };
    },
  };
}
