import { isDuplicateKeyError, newId, randomBase62 } from '@mailfleet/kit';
import type { Collection, Db } from 'mongodb';
import { PLAN_LIMITS, slugify, type PlanName } from '../domain/plans.js';
import type { RateLimitFamily } from '../domain/rate-limits.js';

export interface TeamRecord {
  readonly id: string;
  readonly name: string;
  readonly slug: string;
  readonly plan: PlanName;
  readonly dailyEmailLimit: number;
  readonly monthlyEmailLimit: number;
  readonly rateLimits: Partial<Record<RateLimitFamily, number>>;
  readonly memberIds: readonly string[];
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

interface TeamDoc {
  _id: string;
  name: string;
  slug: string;
  plan: PlanName;
  dailyEmailLimit: number;
  monthlyEmailLimit: number;
  rateLimits?: Partial<Record<RateLimitFamily, number>>;
  memberIds: string[];
  createdAt: Date;
  updatedAt: Date;
}

interface UserDoc {
  _id: string;
  createdAt: Date;
}

export interface TeamLimitsUpdate {
  plan?: PlanName;
  dailyEmailLimit?: number;
  monthlyEmailLimit?: number;
  rateLimits?: Partial<Record<RateLimitFamily, number>>;
}

export interface TeamsRepository {
  ensureIndexes(): Promise<void>;
  createUser(): Promise<string>;
  userExists(userId: string): Promise<boolean>;
  createTeam(input: { name: string; plan: PlanName; ownerUserId: string; now?: Date }): Promise<TeamRecord>;
  getTeam(teamId: string): Promise<TeamRecord | undefined>;
  /** Several teams in one read (a rate-limit fold names every team it counts). */
  getTeams(teamIds: readonly string[]): Promise<TeamRecord[]>;
  listTeamsOfUser(userId: string): Promise<TeamRecord[]>;
  listAll(): Promise<TeamRecord[]>;
  updateLimits(teamId: string, update: TeamLimitsUpdate, now?: Date): Promise<TeamRecord | undefined>;
  /** Makes a user a member (idempotent); false when the team does not exist. */
  addMember(teamId: string, userId: string, now?: Date): Promise<boolean>;
  /** Removes a member; false when the user was not one. */
  removeMember(teamId: string, userId: string, now?: Date): Promise<boolean>;
}

function toRecord(d: TeamDoc): TeamRecord {
  return {
    id: d._id, name: d.name, slug: d.slug, plan: d.plan, dailyEmailLimit: d.dailyEmailLimit, monthlyEmailLimit: d.monthlyEmailLimit,
    rateLimits: d.rateLimits ?? {}, memberIds: d.memberIds, createdAt: d.createdAt, updatedAt: d.updatedAt,
  };
}

export function createTeamsRepository(db: Db): TeamsRepository {
  const teams: Collection<TeamDoc> = db.collection<TeamDoc>('teams');
  const users: Collection<UserDoc> = db.collection<UserDoc>('users');

  return {
    async ensureIndexes() {
      await teams.createIndex({ slug: 1 }, { unique: true, name: 'slug_unique' });
      await teams.createIndex({ memberIds: 1, createdAt: 1 }, { name: 'members' });
    },
    async createUser() {
      const id = newId('usr');
      await users.insertOne({ _id: id, createdAt: new Date() });
      return id;
    },
    async userExists(userId) {
      return (await users.countDocuments({ _id: userId }, { limit: 1 })) > 0;
    },
    async createTeam({ name, plan, ownerUserId, now = new Date() }) {
      const base = slugify(name);
      const limits = PLAN_LIMITS[plan];
      // The unique slug index settles races between replicas; on collision try a suffixed slug.
      for (let attempt = 0; attempt < 20; attempt++) {
        const slug = attempt === 0 ? base : `${base}-${randomBase62(6).toLowerCase()}`;
        const doc: TeamDoc = {
          _id: newId('team'), name, slug, plan, dailyEmailLimit: limits.dailyEmailLimit, monthlyEmailLimit: limits.monthlyEmailLimit,
          rateLimits: {}, memberIds: [ownerUserId], createdAt: now, updatedAt: now,
        };
        try {
          await teams.insertOne(doc);
          return toRecord(doc);
        } catch (err) {
          if (!isDuplicateKeyError(err)) throw err;
        }
      }
      throw new Error('could not find a free team slug');
    },
    async getTeam(teamId) {
      const d = await teams.findOne({ _id: teamId });
      return d ? toRecord(d) : undefined;
    },
    async getTeams(teamIds) {
      if (teamIds.length === 0) return [];
      return (await teams.find({ _id: { $in: [...teamIds] } }).toArray()).map(toRecord);
    },
    async listTeamsOfUser(userId) {
      return (await teams.find({ memberIds: userId }).sort({ createdAt: 1, _id: 1 }).toArray()).map(toRecord);
    },
    async listAll() {
      return (await teams.find({}).sort({ createdAt: 1, _id: 1 }).toArray()).map(toRecord);
    },
    async updateLimits(teamId, update, now = new Date()) {
      const set: Record<string, unknown> = { updatedAt: now };
      if (update.plan) set.plan = update.plan;
      if (update.dailyEmailLimit !== undefined) set.dailyEmailLimit = update.dailyEmailLimit;
      if (update.monthlyEmailLimit !== undefined) set.monthlyEmailLimit = update.monthlyEmailLimit;
      for (const [family, limit] of Object.entries(update.rateLimits ?? {})) set[`rateLimits.${family}`] = limit;
      const res = await teams.findOneAndUpdate({ _id: teamId }, { $set: set }, { returnDocument: 'after' });
      return res ? toRecord(res) : undefined;
    },
    async addMember(teamId, userId, now = new Date()) {
      const res = await teams.updateOne({ _id: teamId }, { $addToSet: { memberIds: userId }, $set: { updatedAt: now } });
      return res.matchedCount === 1;
    },
    async removeMember(teamId, userId, now = new Date()) {
      const res = await teams.updateOne({ _id: teamId, memberIds: userId }, { $pull: { memberIds: userId }, $set: { updatedAt: now } });
      return res.modifiedCount === 1;
    },
  };
}
