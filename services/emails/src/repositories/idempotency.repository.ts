import { createHash } from 'node:crypto';
import { isDuplicateKeyError } from '@mailfleet/kit';
import type { Collection, Db } from 'mongodb';
import type { IdempotencyState } from '../domain/idempotency.js';

interface IdempotencyDoc {
  /** `<teamId>:<sha256 of the key>`: the unique index that settles races between replicas. */
  _id: string;
  teamId: string;
  state: 'PROCESSING' | 'COMPLETED';
  bodyHash: string;
  /** Random id of the request holding the claim; every write of the claim is conditional on it. */
  owner: string;
  claimedAt: Date;
  /** FerretDB has no TTL indexes: a sweeper deletes entries past this date, and readers treat them as absent. */
  expiresAt: Date;
  /** Ids decided for the request: set before its emails are inserted, so a takeover reuses them. */
  emailIds?: string[];
}

export interface IdempotencyEntry extends IdempotencyState {
  readonly id: string;
  readonly owner: string;
}

export type ClaimResult = { readonly claimed: true; readonly id: string } | { readonly claimed: false; readonly existing: IdempotencyEntry };

export interface IdempotencyRepository {
  ensureIndexes(): Promise<void>;
  /** Unique insert of a PROCESSING claim; when the key exists, what is there. */
  claim(input: { teamId: string; key: string; bodyHash: string; owner: string; now: Date; ttlMs: number }): Promise<ClaimResult>;
  /** Takes a stale PROCESSING claim from its (crashed) owner; false if someone else moved first. */
  takeOver(existing: IdempotencyEntry, owner: string, now: Date): Promise<boolean>;
  /** Replaces an expired entry by a fresh claim; false if someone else moved first. */
  reclaimExpired(existing: IdempotencyEntry, input: { bodyHash: string; owner: string; now: Date; ttlMs: number }): Promise<boolean>;
  setPlannedIds(id: string, owner: string, emailIds: readonly string[]): Promise<boolean>;
  complete(id: string, owner: string, emailIds: readonly string[]): Promise<boolean>;
  /** Frees the key after the request failed, so a corrected retry can use it. */
  release(id: string, owner: string): Promise<void>;
  sweep(now?: Date): Promise<number>;
}

function toEntry(d: IdempotencyDoc): IdempotencyEntry {
  return { id: d._id, owner: d.owner, state: d.state, bodyHash: d.bodyHash, claimedAt: d.claimedAt, expiresAt: d.expiresAt, emailIds: d.emailIds };
}

export function idempotencyId(teamId: string, key: string): string {
  return `${teamId}:${createHash('sha256').update(key).digest('hex')}`;
}

export function createIdempotencyRepository(db: Db): IdempotencyRepository {
  const col: Collection<IdempotencyDoc> = db.collection<IdempotencyDoc>('idempotency_keys');

  async function current(id: string): Promise<IdempotencyDoc | null> {
    return col.findOne({ _id: id });
  }

  return {
    async ensureIndexes() {
      await col.createIndex({ expiresAt: 1 }, { name: 'expires' });
    },
    async claim({ teamId, key, bodyHash, owner, now, ttlMs }) {
      const id = idempotencyId(teamId, key);
      for (let i = 0; i < 5; i++) {
        try {
          await col.insertOne({ _id: id, teamId, state: 'PROCESSING', bodyHash, owner, claimedAt: now, expiresAt: new Date(now.getTime() + ttlMs) });
          return { claimed: true, id };
        } catch (err) {
          if (!isDuplicateKeyError(err)) throw err;
        }
        const existing = await current(id);
        // Released between our insert and our read: try the insert again.
        if (existing) return { claimed: false, existing: toEntry(existing) };
      }
      throw new Error('idempotency claim kept racing with releases');
    },
    async takeOver(existing, owner, now) {
      const res = await col.updateOne({ _id: existing.id, owner: existing.owner, state: 'PROCESSING' }, { $set: { owner, claimedAt: now } });
      return res.modifiedCount === 1;
    },
    async reclaimExpired(existing, { bodyHash, owner, now, ttlMs }) {
      const res = await col.replaceOne(
        { _id: existing.id, owner: existing.owner, expiresAt: { $lte: now } },
        { teamId: existing.id.split(':')[0] ?? '', state: 'PROCESSING', bodyHash, owner, claimedAt: now, expiresAt: new Date(now.getTime() + ttlMs) },
      );
      return res.modifiedCount === 1;
    },
    async setPlannedIds(id, owner, emailIds) {
      const res = await col.updateOne({ _id: id, owner, state: 'PROCESSING' }, { $set: { emailIds: [...emailIds] } });
      return res.matchedCount === 1;
    },
    async complete(id, owner, emailIds) {
      const res = await col.updateOne({ _id: id, owner }, { $set: { state: 'COMPLETED', emailIds: [...emailIds] } });
      return res.matchedCount === 1;
    },
    async release(id, owner) {
      await col.deleteOne({ _id: id, owner, state: 'PROCESSING' });
    },
    async sweep(now = new Date()) {
      return (await col.deleteMany({ expiresAt: { $lt: now } })).deletedCount;
    },
  };
}
