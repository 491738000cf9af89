import {
  InvalidArgumentError, NotFoundError, PermissionDeniedError, UnauthenticatedError, newId, type UnaryHandlers,
} from '@mailfleet/kit';
import type { authV1 } from '@mailfleet/proto';
import { parseQuotaDay, quotaGrant, quotaRoom } from '../domain/admission.js';
import { quotaPeriods } from '../domain/plans.js';
import {
  DEFAULT_RATE_LIMITS, limitFor, RATE_LIMIT_FAMILIES, RATE_WINDOW_MS, rateWindow, type RateLimitFamily,
} from '../domain/rate-limits.js';
import { generateToken, hashesEqual, hashToken, looksLikeToken, partialToken } from '../domain/tokens.js';
import type { ApiKeysRepository } from '../repositories/api-keys.repository.js';
import type { CountersRepository } from '../repositories/counters.repository.js';
import type { InvitesRepository } from '../repositories/invites.repository.js';
import type { SessionsRepository } from '../repositories/sessions.repository.js';
import type { TeamRecord, TeamsRepository } from '../repositories/teams.repository.js';
import type { UsersRepository } from '../repositories/users.repository.js';
import {
  apiKeyToProto, familyFromProto, isFamilyName, permissionFromProto, planFromProto, settingsToProto, teamToProto,
} from './mapping.js';
import { createPeopleHandlers } from './people.rpc.js';

export interface AuthRpcDeps {
  readonly teams: TeamsRepository;
  readonly keys: ApiKeysRepository;
  readonly rateWindows: CountersRepository;
  readonly quotas: CountersRepository;
  readonly users: UsersRepository;
  readonly sessions: SessionsRepository;
  readonly loginAttempts: CountersRepository;
  readonly invites: InvitesRepository;
  readonly hashSecret: string;
  readonly defaultRateLimit: number;
  /** Asks the outbox relay for a pass now (revocations must reach gateways at once). */
  readonly kickRelay: () => Promise<void> | void;
  readonly now?: () => Date;
}

const MAX_NAME = 100;

function requireName(name: string, what: string): string {
  const n = name.trim();
  if (n.length < 1) throw new InvalidArgumentError(`${what} name must be at least 1 character`);
  if (n.length > MAX_NAME) throw new InvalidArgumentError(`${what} name must be at most ${MAX_NAME} characters`);
  return n;
}

function requireId(value: string, field: string): string {
  if (!value) throw new InvalidArgumentError(`${field} is required`);
  return value;
}

export function createAuthHandlers(deps: AuthRpcDeps): UnaryHandlers<authV1.AuthServiceServer> {
  const now = deps.now ?? (() => new Date());
  const defaults: Record<RateLimitFamily, number> = { ...DEFAULT_RATE_LIMITS, DEFAULT: deps.defaultRateLimit };

  async function team(teamId: string): Promise<TeamRecord> {
    const t = await deps.teams.getTeam(requireId(teamId, 'team_id'));
    if (!t) throw new NotFoundError('Team not found');
    return t;
  }

  function limitsInForce(t: TeamRecord): Record<string, number> {
    return Object.fromEntries(RATE_LIMIT_FAMILIES.map((f) => [f, limitFor(f, t.rateLimits, defaults)]));
  }

  async function principalOf(token: string) {
    if (!looksLikeToken(token)) throw new UnauthenticatedError('Invalid API key');
    const hash = hashToken(deps.hashSecret, token);
    const key = await deps.keys.findByHash(hash);
    if (!key || !hashesEqual(key.tokenHash, hash)) throw new UnauthenticatedError('Invalid API key');
    return {
      teamId: key.teamId, keyId: key.id, permission: apiKeyToProto(key).permission, domainId: key.domainId, userId: key.createdByUserId,
    };
  }

  /**
   * Reserves between min and max emails from the day and the month: one read
   * of both counters, then a conditional take of each. A take that loses a race
   * with another replica retries once with just `min`; what the day took is
   * handed back when the month refuses.
   */
  async function reserveQuota(t: TeamRecord, min: number, max: number) {
    const p = quotaPeriods(now());
    const dayKey = `${t.id}:day:${p.day}`;
    const monthKey = `${t.id}:month:${p.month}`;
    const unlimitedMonth = t.monthlyEmailLimit < 0;
    const dayExpires = new Date(p.dayEndsAt.getTime() + 86_400_000);
    const monthExpires = new Date(p.monthEndsAt.getTime() + 86_400_000);
    const counts = await deps.quotas.readMany(unlimitedMonth ? [dayKey] : [dayKey, monthKey]);
    let state = { dailyLimit: t.dailyEmailLimit, monthlyLimit: t.monthlyEmailLimit, dayCount: counts.get(dayKey) ?? 0, monthCount: counts.get(monthKey) ?? 0 };
    let granted = 0;
    for (const want of [quotaGrant(state, min, max), min]) {
      if (want < min || want === 0) break;
      const day = await deps.quotas.take(dayKey, want, t.dailyEmailLimit, dayExpires);
      state = { ...state, dayCount: day.count };
      if (!day.allowed) continue;
      if (!unlimitedMonth) {
        const month = await deps.quotas.take(monthKey, want, t.monthlyEmailLimit, monthExpires);
        state = { ...state, monthCount: month.count };
        if (!month.allowed) {
          await deps.quotas.give(dayKey, want);
          state = { ...state, dayCount: state.dayCount - want };
          continue;
        }
      }
      granted = want;
      break;
    }
    const room = quotaRoom(state);
    return {
      quotaAllowed: granted > 0, quotaGranted: granted, quotaDay: p.day,
      dailyLimit: t.dailyEmailLimit, dailyRemaining: room.day,
      monthlyLimit: t.monthlyEmailLimit, monthlyRemaining: unlimitedMonth ? -1 : room.month,
    };
  }

  return {
    ...createPeopleHandlers({ teams: deps.teams, users: deps.users, sessions: deps.sessions, loginAttempts: deps.loginAttempts, invites: deps.invites, limitsInForce, now }),

    async authenticateKey(req) {
      return principalOf(req.token);
    },

    async admit(req) {
      // A token is authenticated; without one the caller already holds the principal and names its team.
      const principal = req.token
        ? await principalOf(req.token)
        : { teamId: requireId(req.teamId, 'team_id'), keyId: '', permission: 0, domainId: undefined, userId: '' };
      if (req.quotaMin < 0 || req.quotaMax < 0) throw new InvalidArgumentError('quota_min and quota_max must be >= 0');
      const t = await team(principal.teamId);
      const base = { ...principal, rateLimits: limitsInForce(t) };
      if (req.quotaMin === 0) {
        return {
          ...base, quotaAllowed: true, quotaGranted: 0, quotaDay: quotaPeriods(now()).day,
          dailyLimit: t.dailyEmailLimit, dailyRemaining: 0, monthlyLimit: t.monthlyEmailLimit, monthlyRemaining: 0,
        };
      }
      return { ...base, ...(await reserveQuota(t, req.quotaMin, Math.max(req.quotaMin, req.quotaMax))) };
    },

    async foldRateLimits(req) {
      if (req.counts.length > 1000) throw new InvalidArgumentError('at most 1000 counts per call');
      const entries: { teamId: string; family: RateLimitFamily; protoFamily: authV1.RateLimitFamily; windowStartMs: number; count: number; key: string }[] = [];
      for (const c of req.counts) {
        const family = familyFromProto(c.family);
        if (!family || !c.teamId) throw new InvalidArgumentError('each count needs a team_id and a family');
        if (c.windowStartMs % RATE_WINDOW_MS !== 0 || c.count < 0) throw new InvalidArgumentError('window_start_ms must start a minute and count must be >= 0');
        entries.push({ teamId: c.teamId, family, protoFamily: c.family, windowStartMs: c.windowStartMs, count: c.count, key: `${c.teamId}:${family}:${c.windowStartMs}` });
      }
      const teams = new Map((await deps.teams.getTeams([...new Set(entries.map((e) => e.teamId))])).map((t) => [t.id, t]));
      // Counts of unknown teams are dropped: nothing is kept for a team that does not exist.
      const known = entries.filter((e) => teams.has(e.teamId));
      const amounts = new Map<string, { amount: number; expiresAt: Date }>();
      for (const e of known) {
        const cur = amounts.get(e.key);
        amounts.set(e.key, { amount: (cur?.amount ?? 0) + e.count, expiresAt: new Date(e.windowStartMs + 2 * RATE_WINDOW_MS) });
      }
      await deps.rateWindows.add([...amounts].map(([key, v]) => ({ key, ...v })));
      const shared = await deps.rateWindows.readMany([...amounts.keys()]);
      return {
        counts: known.map((e) => ({
          teamId: e.teamId, family: e.protoFamily,
          windowStartMs: e.windowStartMs, count: shared.get(e.key) ?? 0, limit: limitFor(e.family, teams.get(e.teamId)!.rateLimits, defaults),
        })),
      };
    },

    async releaseQuota(req) {
      const period = parseQuotaDay(req.day);
      if (!period) throw new InvalidArgumentError('day must be YYYY-MM-DD');
      if (req.count < 1) throw new InvalidArgumentError('count must be at least 1');
      const t = await team(req.teamId);
      await deps.quotas.give(`${t.id}:day:${period.day}`, req.count);
      if (t.monthlyEmailLimit >= 0) await deps.quotas.give(`${t.id}:month:${period.month}`, req.count);
      return {};
    },

    async createTeam(req) {
      const name = requireName(req.name, 'Team');
      const plan = req.plan ? planFromProto(req.plan) : 'FREE';
      if (!plan) throw new InvalidArgumentError('Unknown plan');
      let userId = req.userId;
      if (userId) {
        if (!(await deps.teams.userExists(userId))) throw new NotFoundError('User not found');
      } else {
        userId = await deps.teams.createUser();
      }
      const created = await deps.teams.createTeam({ name, plan, ownerUserId: userId, now: now() });
      return { team: teamToProto(created), userId };
    },

    async listTeams(req) {
      const teams = await deps.teams.listTeamsOfUser(requireId(req.userId, 'user_id'));
      return { teams: teams.map(teamToProto) };
    },

    async getTeam(req) {
      const t = await team(req.teamId);
      if (!t.memberIds.includes(req.userId)) throw new PermissionDeniedError('You do not have access to this team');
      return { team: teamToProto(t) };
    },

    async createApiKey(req) {
      const t = await team(req.teamId);
      const name = requireName(req.name, 'API key');
      const token = generateToken();
      const key = await deps.keys.create({
        id: newId('key'), teamId: t.id, name, tokenHash: hashToken(deps.hashSecret, token), partialToken: partialToken(token),
        permission: permissionFromProto(req.permission), domainId: req.domainId || undefined,
        createdByUserId: req.createdByUserId || t.memberIds[0] || '', createdAt: now(),
      });
      return { token, apiKey: apiKeyToProto(key) };
    },

    async listApiKeys(req) {
      const keys = await deps.keys.list(requireId(req.teamId, 'team_id'));
      return { apiKeys: keys.map(apiKeyToProto) };
    },

    async deleteApiKey(req) {
      const ok = await deps.keys.revoke(requireId(req.teamId, 'team_id'), requireId(req.keyId, 'key_id'), now());
      if (!ok) throw new NotFoundError('API key not found');
      // Publish key.revoked before answering, so gateway caches drop the key before the caller's next request.
      await deps.kickRelay();
      return {};
    },

    async touchKeys(req) {
      if (req.touches.length > 1000) throw new InvalidArgumentError('at most 1000 touches per call');
      const touches = req.touches
        .filter((t) => t.teamId && t.keyId && t.lastUsed)
        .map((t) => ({ teamId: t.teamId, keyId: t.keyId, lastUsed: t.lastUsed as Date }));
      return { updatedCount: await deps.keys.touch(touches) };
    },

    async getSettings(req) {
      return { settings: settingsToProto(await team(req.teamId)) };
    },

    async checkRateLimit(req) {
      const family = familyFromProto(req.family);
      if (!family) throw new InvalidArgumentError('family is required');
      const t = await team(req.teamId);
      const limit = limitFor(family, t.rateLimits, defaults);
      const cost = Math.max(1, req.cost);
      const w = rateWindow(now());
      const res = await deps.rateWindows.take(`${t.id}:${family}:${w.start}`, cost, limit, new Date(w.resetsAt + 60_000));
      return { allowed: res.allowed, limit, remaining: Math.max(0, limit - res.count), resetSeconds: w.resetSeconds };
    },

    async consumeQuota(req) {
      if (req.count < 1) throw new InvalidArgumentError('count must be at least 1');
      const t = await team(req.teamId);
      const p = quotaPeriods(now());
      const dayKey = `${t.id}:day:${p.day}`;
      const monthKey = `${t.id}:month:${p.month}`;
      const unlimitedMonth = t.monthlyEmailLimit < 0;
      const day = await deps.quotas.take(dayKey, req.count, t.dailyEmailLimit, new Date(p.dayEndsAt.getTime() + 86_400_000));
      let monthCount = unlimitedMonth ? 0 : await deps.quotas.read(monthKey);
      let allowed = day.allowed;
      if (allowed && !unlimitedMonth) {
        const month = await deps.quotas.take(monthKey, req.count, t.monthlyEmailLimit, new Date(p.monthEndsAt.getTime() + 86_400_000));
        monthCount = month.count;
        if (!month.allowed) {
          // All or nothing: hand the day's units back.
          await deps.quotas.give(dayKey, req.count);
          allowed = false;
        }
      }
      const dayCount = allowed ? day.count : await deps.quotas.read(dayKey);
      return {
        allowed,
        dailyLimit: t.dailyEmailLimit,
        dailyRemaining: Math.max(0, t.dailyEmailLimit - dayCount),
        monthlyLimit: t.monthlyEmailLimit,
        monthlyRemaining: unlimitedMonth ? -1 : Math.max(0, t.monthlyEmailLimit - monthCount),
      };
    },

    async listAllTeams() {
      return { teams: (await deps.teams.listAll()).map(teamToProto) };
    },

    async updateTeamLimits(req) {
      await team(req.teamId);
      const plan = req.plan ? planFromProto(req.plan) : undefined;
      if (req.plan && !plan) throw new InvalidArgumentError('Unknown plan');
      if (req.dailyEmailLimit !== undefined && req.dailyEmailLimit < 0) throw new InvalidArgumentError('daily_email_limit must be >= 0');
      if (req.monthlyEmailLimit !== undefined && req.monthlyEmailLimit < -1) throw new InvalidArgumentError('monthly_email_limit must be >= -1');
      const rateLimits: Partial<Record<RateLimitFamily, number>> = {};
      for (const [name, value] of Object.entries(req.rateLimits)) {
        if (!isFamilyName(name)) throw new InvalidArgumentError(`Unknown rate-limit family ${name}; use one of ${RATE_LIMIT_FAMILIES.join(', ')}`);
        if (value < 0) throw new InvalidArgumentError(`rate limit for ${name} must be >= 0`);
        rateLimits[name] = value;
      }
      const updated = await deps.teams.updateLimits(req.teamId, {
        plan, dailyEmailLimit: req.dailyEmailLimit, monthlyEmailLimit: req.monthlyEmailLimit, rateLimits,
      }, now());
      if (!updated) throw new NotFoundError('Team not found');
      return { settings: settingsToProto(updated), rateLimits: limitsInForce(updated) };
    },
  };
}
