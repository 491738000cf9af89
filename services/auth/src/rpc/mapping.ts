import { authV1 } from '@mailfleet/proto';
import type { PlanName } from '../domain/plans.js';
import { RATE_LIMIT_FAMILIES, type RateLimitFamily } from '../domain/rate-limits.js';
import type { ApiKeyRecord, Permission } from '../repositories/api-keys.repository.js';
import type { TeamRecord } from '../repositories/teams.repository.js';

export function permissionToProto(p: Permission): authV1.Permission {
  return p === 'SENDING' ? authV1.Permission.PERMISSION_SENDING : authV1.Permission.PERMISSION_FULL;
}
export function permissionFromProto(p: authV1.Permission): Permission {
  return p === authV1.Permission.PERMISSION_SENDING ? 'SENDING' : 'FULL';
}

const PLANS: Record<PlanName, authV1.Plan> = { FREE: authV1.Plan.PLAN_FREE, PREMIUM: authV1.Plan.PLAN_PREMIUM, PRO: authV1.Plan.PLAN_PRO };
export function planToProto(p: PlanName): authV1.Plan {
  return PLANS[p];
}
export function planFromProto(p: authV1.Plan): PlanName | undefined {
  return (Object.entries(PLANS) as [PlanName, authV1.Plan][]).find(([, v]) => v === p)?.[0];
}

const FAMILY_BY_PROTO: Partial<Record<authV1.RateLimitFamily, RateLimitFamily>> = {
  [authV1.RateLimitFamily.RATE_LIMIT_FAMILY_SEND_EMAIL]: 'SEND_EMAIL',
  [authV1.RateLimitFamily.RATE_LIMIT_FAMILY_BATCH_EMAIL]: 'BATCH_EMAIL',
  [authV1.RateLimitFamily.RATE_LIMIT_FAMILY_READ_EMAIL]: 'READ_EMAIL',
  [authV1.RateLimitFamily.RATE_LIMIT_FAMILY_FEEDBACK_LIST]: 'FEEDBACK_LIST',
  [authV1.RateLimitFamily.RATE_LIMIT_FAMILY_CONTACT]: 'CONTACT',
  [authV1.RateLimitFamily.RATE_LIMIT_FAMILY_BULK_CONTACT]: 'BULK_CONTACT',
  [authV1.RateLimitFamily.RATE_LIMIT_FAMILY_DEFAULT]: 'DEFAULT',
};
export function familyFromProto(f: authV1.RateLimitFamily): RateLimitFamily | undefined {
  return FAMILY_BY_PROTO[f];
}
export function isFamilyName(name: string): name is RateLimitFamily {
  return (RATE_LIMIT_FAMILIES as readonly string[]).includes(name);
}

export function teamToProto(t: TeamRecord): authV1.Team {
  return { id: t.id, name: t.name, slug: t.slug, plan: planToProto(t.plan), createdAt: t.createdAt, updatedAt: t.updatedAt };
}

export function apiKeyToProto(k: ApiKeyRecord): authV1.ApiKey {
  return {
    id: k.id, teamId: k.teamId, name: k.name, partialToken: k.partialToken, permission: permissionToProto(k.permission),
    domainId: k.domainId, createdByUserId: k.createdByUserId, createdAt: k.createdAt, lastUsed: k.lastUsed,
  };
}

export function settingsToProto(t: TeamRecord): authV1.Settings {
  return { teamId: t.id, name: t.name, plan: planToProto(t.plan), dailyEmailLimit: t.dailyEmailLimit, monthlyEmailLimit: t.monthlyEmailLimit };
}
