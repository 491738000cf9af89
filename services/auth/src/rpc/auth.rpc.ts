import {
  InvalidArgumentError, NotFoundError, PermissionDeniedError, UnauthenticatedError, newId, type UnaryHandlers,
} from '@mailfleet/kit';
import type { authV1 } from '@mailfleet/proto';
import { quotaPeriods } from '../domain/plans.js';
import { DEFAULT_RATE_LIMITS, limitFor, RATE_LIMIT_FAMILIES, rateWindow, type RateLimitFamily } from '../domain/rate-limits.js';
import { generateToken, hashesEqual, hashToken, looksLikeToken, partialToken } from '../domain/tokens.js';
import type { ApiKeysRepository } from '../repositories/api-keys.repository.js';
import type { CountersRepository } from '../repositories/counters.repository.js';
import type { TeamRecord, TeamsRepository } from '../repositories/teams.repository.js';
import {
  apiKeyToProto, familyFromProto, isFamilyName, permissionFromProto, planFromProto, settingsToProto, teamToProto,
} from './mapping.js';

export interface AuthRpcDeps {
  readonly teams: TeamsRepository;
  readonly keys: ApiKeysRepository;
  readonly rateWindows: CountersRepository;
  readonly quotas: CountersRepository;
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

  return {
    async authenticateKey(req) {
      if (!looksLikeToken(req.token)) throw new UnauthenticatedError('Invalid API key');
      const hash = hashToken(deps.hashSecret, req.token);
      const key = await deps.keys.findByHash(hash);
      if (!key || !hashesEqual(key.tokenHash, hash)) throw new UnauthenticatedError('Invalid API key');
      return {
        teamId: key.teamId, keyId: key.id, permission: apiKeyToProto(key).permission, domainId: key.domainId, userId: key.createdByUserId,
      };
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
