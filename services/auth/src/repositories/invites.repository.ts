import type { Collection, Db } from 'mongodb';

export interface InviteRecord {
  readonly id: string;
  readonly teamId: string;
  readonly email: string;
  readonly emailKey: string;
  readonly invitedByUserId: string;
  readonly createdAt: Date;
  readonly expiresAt: Date;
  readonly acceptedAt?: Date | undefined;
  readonly deletedAt?: Date | undefined;
}

interface InviteDoc {
  _id: string;
  teamId: string;
  email: string;
  emailKey: string;
  /** SHA-256 of the one-time token; the token itself is never stored. */
  tokenHash: string;
  invitedByUserId: string;
  createdAt: Date;
  expiresAt: Date;
  acceptedAt?: Date;
  deletedAt?: Date;
}

export interface InvitesRepository {
  ensureIndexes(): Promise<void>;
  create(input: Omit<InviteRecord, 'acceptedAt' | 'deletedAt'> & { tokenHash: string }): Promise<InviteRecord>;
  findByHash(tokenHash: string): Promise<InviteRecord | undefined>;
  list(teamId: string): Promise<InviteRecord[]>;
  /** Withdraws an invite; false when the team has no such invite. */
  delete(teamId: string, inviteId: string, now: Date): Promise<boolean>;
  /** Marks an invite used, once: false when it was already used or withdrawn. */
  accept(inviteId: string, now: Date): Promise<boolean>;
  /** Deletes invites that expired 30 days ago (the list keeps recent ones, used or not; FerretDB has no TTL index). */
  sweep(now?: Date): Promise<number>;
}

function toRecord(d: InviteDoc): InviteRecord {
  return {
    id: d._id, teamId: d.teamId, email: d.email, emailKey: d.emailKey, invitedByUserId: d.invitedByUserId,
    createdAt: d.createdAt, expiresAt: d.expiresAt, acceptedAt: d.acceptedAt, deletedAt: d.deletedAt,
  };
}

export function createInvitesRepository(db: Db): InvitesRepository {
  const invites: Collection<InviteDoc> = db.collection<InviteDoc>('invites');
  return {
    async ensureIndexes() {
      await invites.createIndex({ tokenHash: 1 }, { unique: true, name: 'token_hash_unique' });
      await invites.createIndex({ teamId: 1, createdAt: -1 }, { name: 'team_created' });
    },
    async create(input) {
      const doc: InviteDoc = {
        _id: input.id, teamId: input.teamId, email: input.email, emailKey: input.emailKey, tokenHash: input.tokenHash,
        invitedByUserId: input.invitedByUserId, createdAt: input.createdAt, expiresAt: input.expiresAt,
      };
      await invites.insertOne(doc);
      return toRecord(doc);
    },
    async findByHash(tokenHash) {
      const d = await invites.findOne({ tokenHash });
      return d ? toRecord(d) : undefined;
    },
    async list(teamId) {
      return (await invites.find({ teamId, deletedAt: { $exists: false } }).sort({ createdAt: -1, _id: -1 }).toArray()).map(toRecord);
    },
    async delete(teamId, inviteId, now) {
      const res = await invites.updateOne({ _id: inviteId, teamId, deletedAt: { $exists: false } }, { $set: { deletedAt: now } });
      return res.matchedCount === 1;
    },
    async accept(inviteId, now) {
      const res = await invites.updateOne(
        { _id: inviteId, acceptedAt: { $exists: false }, deletedAt: { $exists: false } }, { $set: { acceptedAt: now } },
      );
      return res.modifiedCount === 1;
    },
    async sweep(now = new Date()) {
      return (await invites.deleteMany({ expiresAt: { $lt: new Date(now.getTime() - 30 * 86_400_000) } })).deletedCount;
    },
  };
}
