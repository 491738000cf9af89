import type { authV1 } from '@mailfleet/proto';
import type { SessionAuthenticator, SessionView } from '../plugins/auth.plugin.js';
import type { RateLimitFamilyName } from '../plugins/errors.plugin.js';
import type { Upstreams } from './upstreams.js';

/** auth's SessionInfo as the contract's `Session`. */
export function toSessionView(s: authV1.SessionInfo | undefined): SessionView {
  if (!s?.user || !s.team) throw new Error('auth returned a session without its user or team');
  return {
    id: s.sessionId,
    user: { id: s.user.id, email: s.user.email, name: s.user.name ?? null },
    team: { id: s.team.id, name: s.team.name },
    teams: s.teams.map((t) => ({ id: t.id, name: t.name })),
    expiresAt: (s.expiresAt ?? new Date(0)).toISOString(),
  };
}

/**
 * Resolves the console's cookie through auth.AuthenticateSession on every
 * request: no cache, so sign-out and removal from a team take effect at once.
 * A session acts for its current team with FULL permission and no domain
 * restriction.
 */
export function createSessionAuthenticator(upstreams: Pick<Upstreams, 'auth'>): SessionAuthenticator {
  return async (token) => {
    const res = await upstreams.auth.call.authenticateSession({ token });
    const session = toSessionView(res.session);
    return {
      teamId: session.team.id, keyId: '', userId: session.user.id, permission: 'FULL', domainId: undefined,
      rateLimits: res.rateLimits as Partial<Record<RateLimitFamilyName, number>>, session,
    };
  };
}
