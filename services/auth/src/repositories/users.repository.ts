import { isDuplicateKeyError, newId } from '@mailfleet/kit';
import type { Collection, Db } from 'mongodb';

export interface UserRecord {
  readonly id: string;
  readonly email: string;
  readonly name?: string | undefined;
  readonly createdAt: Date;
}

/**
 * A person. Users made by `team create` before people could sign in have only
 * `_id` and `createdAt` (they own API keys); users who sign in also have an
 * email, a name and a password hash.
 */
interface UserDoc {
  _id: string;
  createdAt: Date;
  email?: string;
  name?: string;
  /** scrypt hash (domain/passwords.ts); the password itself is never stored. */
  passwordHash?: string;
}

/**
 * Claims an email for one user: `_id` is the normalised email, so uniqueness
 * holds on MongoDB and FerretDB alike without a partial unique index over the
 * users that have no email.
 */
interface EmailClaimDoc {
  _id: string;
  userId: string;
}

export interface UsersRepository {
  /** Inserts the user, then claims the email; 'exists' (and nothing left behind) when the email is taken. */
  create(input: { email: string; emailKey: string; name?: string | undefined; passwordHash: string; now?: Date }): Promise<UserRecord | 'exists'>;
  /** The user owning a normalised email, with the password hash to check. */
  findByEmail(emailKey: string): Promise<(UserRecord & { passwordHash: string }) | undefined>;
  get(userId: string): Promise<UserRecord | undefined>;
  getMany(userIds: readonly string[]): Promise<UserRecord[]>;
}

function toRecord(d: UserDoc): UserRecord {
  return { id: d._id, email: d.email ?? '', name: d.name, createdAt: d.createdAt };
}

export function createUsersRepository(db: Db): UsersRepository {
  const users: Collection<UserDoc> = db.collection<UserDoc>('users');
  const emails: Collection<EmailClaimDoc> = db.collection<EmailClaimDoc>('user_emails');

  return {
    async create({ email, emailKey, name, passwordHash, now = new Date() }) {
      const doc: UserDoc = { _id: newId('usr'), createdAt: now, email, passwordHash, ...(name ? { name } : {}) };
      // User first, claim second: a crash in between leaves a user nobody can sign in as and no team lists,
      // never a claimed email without its user.
      await users.insertOne(doc);
      try {
        await emails.insertOne({ _id: emailKey, userId: doc._id });
      } catch (err) {
        await users.deleteOne({ _id: doc._id });
        if (isDuplicateKeyError(err)) return 'exists';
        throw err;
      }
      return toRecord(doc);
    },
    async findByEmail(emailKey) {
      const claim = await emails.findOne({ _id: emailKey });
      if (!claim) return undefined;
      const d = await users.findOne({ _id: claim.userId });
      return d?.passwordHash ? { ...toRecord(d), passwordHash: d.passwordHash } : undefined;
    },
    async get(userId) {
      const d = await users.findOne({ _id: userId });
      return d ? toRecord(d) : undefined;
    },
    async getMany(userIds) {
      if (userIds.length === 0) return [];
      return (await users.find({ _id: { $in: [...userIds] } }).toArray()).map(toRecord);
    },
  };
}
