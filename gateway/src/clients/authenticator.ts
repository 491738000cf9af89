import { authV1 } from '@mailfleet/proto';
import type { Authenticator, Permission } from '../plugins/auth.plugin.js';
import type { RateLimitFamilyName } from '../plugins/errors.plugin.js';
import type { FoldCounts } from './rate-limiter.js';
import type { Upstreams } from './upstreams.js';

export function permissionName(p: authV1.Permission): Permission {
  return p === authV1.Permission.PERMISSION_SENDING ? 'SENDING' : 'FULL';
}

/**
 * Resolves bearer keys through auth.Admit: one call that authenticates the key
 * and reads the team once, returning its rate limits with the principal so
 * that the gateway can count requests locally (the rate limiter).
 */
export function createAuthAuthenticator(upstreams: Pick<Upstreams, 'auth'>): Authenticator {
  return async (token) => {
    const res = await upstreams.auth.call.admit({ token, teamId: '', quotaMin: 0, quotaMax: 0 });
    return {
      teamId: res.teamId, keyId: res.keyId, userId: res.userId, permission: permissionName(res.permission), domainId: res.domainId,
      rateLimits: res.rateLimits as Partial<Record<RateLimitFamilyName, number>>,
    };
  };
}

const familyName = (f: authV1.RateLimitFamily) => authV1.rateLimitFamilyToJSON(f).replace('RATE_LIMIT_FAMILY_', '') as RateLimitFamilyName;

/** Folds the rate limiter's local counts through auth.FoldRateLimits. */
export function createAuthFold(upstreams: Pick<Upstreams, 'auth'>): FoldCounts {
  return async (counts) => {
    const res = await upstreams.auth.call.foldRateLimits({
      counts: counts.map((c) => ({ ...c, family: authV1.RateLimitFamily[`RATE_LIMIT_FAMILY_${c.family}`], limit: 0 })),
    });
    return res.counts.map((c) => ({ ...c, family: familyName(c.family) }));
  };
}
