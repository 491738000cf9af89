import type { Collection, Db } from 'mongodb';
import { SESSION_ABSOLUTE_MS, SESSION_IDLE_MS } from '../domain/sessions.js';

export interface SessionRecord {
  readonly id: string;
  readonly userId: string;
  readonly teamId: string;
  readonly createdAt: Date;
  readonly lastSeenAt: Date;
  readonly revokedAt?: Date | undefined;
}

interface SessionDoc {
  _id: string;
  /** SHA-256 of the token; the token itself is never stored. */
  tokenHash: string;
  userId: string;
  teamId: string;
  createdAt: Date;
  lastSeenAt: Date;
  revokedAt?: Date;
}

export interface SessionsRepository {
  ensureIndexes(): Promise<void>;
  create(input: { id: string; tokenHash: string; userId: string; teamId: string; now: Date }): Promise<SessionRecord>;
  findByHash(tokenHash: string): Promise<SessionRecord | undefined>;
  /** Moves lastSeenAt forward (only if no other request already did). */
  touch(id: string, now: Date): Promise<void>;
  /** Switches the current team of a live session; false when it is revoked. */
  setTeam(id: string, userId: string, teamId: string): Promise<boolean>;
  revoke(tokenHash: string, now: Date): Promise<void>;
  /** Revokes every live session of a user acting as a team (the user was removed from it). */
  revokeForUserTeam(userId: string, teamId: string, now: Date): Promise<number>;
  /** Deletes sessions past their absolute or idle expiry, and revoked ones (FerretDB has no TTL index). */
  sweep(now?: Date): Promise<number>;
}

function toRecord(d: SessionDoc): SessionRecord {
  return { id: d._id, userId: d.userId, teamId: d.teamId, createdAt: d.createdAt, lastSeenAt: d.lastSeenAt, revokedAt: d.revokedAt };
}

export function createSessionsRepository(db: Db): SessionsRepository {
  const sessions: Collection<SessionDoc> = db.collection<SessionDoc>('sessions');
  return {
    async ensureIndexes() {
      await sessions.createIndex({ tokenHash: 1 }, { unique: true, name: 'token_hash_unique' });
      await sessions.createIndex({ userId: 1, teamId: 1 }, { name: 'user_team' });
    },
    async create({ id, tokenHash, userId, teamId, now }) {
      const doc: SessionDoc = { _id: id, tokenHash, userId, teamId, createdAt: now, lastSeenAt: now };
      await sessions.insertOne(doc);
      return toRecord(doc);
    },
    async findByHash(tokenHash) {
      const d = await sessions.findOne({ tokenHash });
      return d ? toRecord(d) : undefined;
    },
    async touch(id, now) {
      await sessions.updateOne({ _id: id, lastSeenAt: { $lt: now }, revokedAt: { $exists: false } }, { $set: { lastSeenAt: now } });
    },
    async setTeam(id, userId, teamId) {
      const res = await sessions.updateOne({ _id: id, userId, revokedAt: { $exists: false } }, { $set: { teamId } });
      return res.matchedCount === 1;
    },
    async revoke(tokenHash, now) {
      await sessions.updateOne({ tokenHash, revokedAt: { $exists: false } }, { $set: { revokedAt: now } });
    },
    async revokeForUserTeam(userId, teamId, now) {
      const res = await sessions.updateMany({ userId, teamId, revokedAt: { $exists: false } }, { $set: { revokedAt: now } });
      return res.modifiedCount;
    },
    async sweep(now = new Date()) {
      const res = await sessions.deleteMany({
        $or: [
          { createdAt: { $lt: new Date(now.getTime() - SESSION_ABSOLUTE_MS) } },
          { lastSeenAt: { $lt: new Date(now.getTime() - SESSION_IDLE_MS) } },
          // Kept a day after sign-out so nothing races a revocation; then gone.
          { revokedAt: { $lt: new Date(now.getTime() - 86_400_000) } },
        ],
      });
      return res.deletedCount;
    },
  };
}
