import { bulkWriteInChunks, createEvent, deleteWithOutbox, ensureOutboxIndex, NOT_DELETED, type OutboxDoc } from '@mailfleet/kit';
import type { AnyBulkWriteOperation, Collection, Db, Document } from 'mongodb';

export type Permission = 'FULL' | 'SENDING';

export interface ApiKeyRecord {
  readonly id: string;
  readonly teamId: string;
  readonly name: string;
  readonly partialToken: string;
  readonly permission: Permission;
  readonly domainId?: string | undefined;
  readonly createdByUserId: string;
  readonly createdAt: Date;
  readonly lastUsed?: Date | undefined;
}

interface ApiKeyDoc extends OutboxDoc {
  _id: string;
  teamId: string;
  name: string;
  /** HMAC of the token; the token itself is never stored. */
  tokenHash: string;
  partialToken: string;
  permission: Permission;
  domainId?: string;
  createdByUserId: string;
  createdAt: Date;
  lastUsed?: Date;
}

export interface KeyTouch {
  teamId: string;
  keyId: string;
  lastUsed: Date;
}

export interface ApiKeysRepository {
  readonly collection: Collection<Document>;
  ensureIndexes(): Promise<void>;
  create(input: Omit<ApiKeyRecord, 'lastUsed'> & { tokenHash: string }): Promise<ApiKeyRecord>;
  /** A live key by its token hash, with the stored hash for a constant-time re-check. */
  findByHash(tokenHash: string): Promise<(ApiKeyRecord & { tokenHash: string }) | undefined>;
  list(teamId: string): Promise<ApiKeyRecord[]>;
  /** Revokes a key and records `key.revoked` in the same write; false when the team has no such live key. */
  revoke(teamId: string, keyId: string, now?: Date): Promise<boolean>;
  touch(touches: readonly KeyTouch[]): Promise<number>;
}

function toRecord(d: ApiKeyDoc): ApiKeyRecord {
  return {
    id: d._id, teamId: d.teamId, name: d.name, partialToken: d.partialToken, permission: d.permission,
    domainId: d.domainId, createdByUserId: d.createdByUserId, createdAt: d.createdAt, lastUsed: d.lastUsed,
  };
}

export function createApiKeysRepository(db: Db): ApiKeysRepository {
  const keys = db.collection<ApiKeyDoc>('api_keys');
  return {
    collection: keys as unknown as Collection<Document>,
    async ensureIndexes() {
      await keys.createIndex({ tokenHash: 1 }, { unique: true, name: 'token_hash_unique' });
      await keys.createIndex({ teamId: 1, createdAt: -1 }, { name: 'team_created' });
      await ensureOutboxIndex(keys as unknown as Collection<Document>);
    },
    async create(input) {
      const doc: ApiKeyDoc = {
        _id: input.id, teamId: input.teamId, name: input.name, tokenHash: input.tokenHash, partialToken: input.partialToken,
        permission: input.permission, createdByUserId: input.createdByUserId, createdAt: input.createdAt,
        ...(input.domainId ? { domainId: input.domainId } : {}),
      };
      await keys.insertOne(doc);
      return toRecord(doc);
    },
    async findByHash(tokenHash) {
      const d = await keys.findOne({ tokenHash, ...NOT_DELETED });
      return d ? { ...toRecord(d), tokenHash: d.tokenHash } : undefined;
    },
    async list(teamId) {
      return (await keys.find({ teamId, ...NOT_DELETED }).sort({ createdAt: -1, _id: -1 }).toArray()).map(toRecord);
    },
    async revoke(teamId, keyId, now = new Date()) {
      const event = createEvent('key.revoked', teamId, { keyId, teamId }, now);
      const res = await keys.updateOne({ _id: keyId, teamId, ...NOT_DELETED }, deleteWithOutbox<ApiKeyDoc>([event], now));
      return res.matchedCount === 1;
    },
    async touch(touches) {
      if (touches.length === 0) return 0;
      // Only ever move lastUsed forward; scoped by team like every query.
      const ops: AnyBulkWriteOperation<ApiKeyDoc>[] = touches.map((t) => ({
        updateOne: {
          filter: { _id: t.keyId, teamId: t.teamId, ...NOT_DELETED, $or: [{ lastUsed: { $exists: false } }, { lastUsed: { $lt: t.lastUsed } }] },
          update: { $set: { lastUsed: t.lastUsed } },
        },
      }));
      const res = await bulkWriteInChunks(keys, ops);
      return res.modifiedCount;
    },
  };
}
