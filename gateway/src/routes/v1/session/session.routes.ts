import type { FastifyInstance } from 'fastify';
import { toSessionView } from '../../../clients/sessions.js';
import type { Upstreams } from '../../../clients/upstreams.js';
import {
  clearSessionCookie, principalOf, readCookie, SESSION_COOKIE, setSessionCookie, type CookieOptions,
} from '../../../plugins/auth.plugin.js';
import { GatewayError } from '../../../plugins/errors.plugin.js';
import { errorCodeResponse } from '../../../schemas/common.js';

const named = {
  type: 'object', required: ['id', 'name'], properties: { id: { type: 'string' }, name: { type: 'string' } },
} as const;

/** The contract's `Session`: the signed-in user, the current team, every team of the user, the expiry. */
export const sessionSchema = {
  type: 'object',
  required: ['user', 'team', 'teams', 'expiresAt'],
  properties: {
    user: {
      type: 'object', required: ['id', 'email', 'name'],
      properties: { id: { type: 'string' }, email: { type: 'string' }, name: { type: ['string', 'null'] } },
    },
    team: { ...named, description: 'the current team: every call made with the cookie acts as it' },
    teams: { type: 'array', items: named },
    expiresAt: { type: 'string', format: 'date-time', description: 'idle (12 h) or absolute (7 days) expiry, whichever is first' },
  },
} as const;

function publicSession(view: ReturnType<typeof toSessionView>) {
  return { user: view.user, team: view.team, teams: view.teams, expiresAt: view.expiresAt };
}

/**
 * The console's sign-in (contract: Sessions). POST is public (with the Origin
 * rule); GET, PATCH and DELETE need the cookie. API keys have no session.
 */
export function sessionRoutes(deps: { upstreams: Upstreams } & CookieOptions) {
  const { auth } = deps.upstreams;
  const requireSession = (req: Parameters<typeof principalOf>[0]) => {
    const p = principalOf(req);
    if (!p.session) throw new GatewayError(401, 'No session: sign in with POST /v1/session (API keys have none)');
    return p.session;
  };
  return async (app: FastifyInstance): Promise<void> => {
    app.post<{ Body: { email: string; password: string } }>('/session', {
      config: { public: true, originCheck: true },
      schema: {
        tags: ['Session'],
        summary: 'Sign in with an email and a password; sets the mf_session cookie',
        security: [],
        body: {
          type: 'object', required: ['email', 'password'], additionalProperties: false,
          properties: { email: { type: 'string', minLength: 1, maxLength: 254 }, password: { type: 'string', minLength: 1, maxLength: 1024 } },
        },
        response: { 200: sessionSchema, 401: errorCodeResponse, 429: errorCodeResponse },
      },
    }, async (req, reply) => {
      const res = await auth.call.login({ email: req.body.email, password: req.body.password, clientIp: req.ip });
      if (res.rateLimited) {
        reply.header('retry-after', String(res.retryAfterSeconds));
        throw new GatewayError(429, `Too many failed sign-in attempts; retry in ${res.retryAfterSeconds} s`);
      }
      const view = toSessionView(res.session);
      setSessionCookie(req, reply, deps, res.token);
      return publicSession(view);
    });

    app.get('/session', {
      schema: { tags: ['Session'], summary: 'The signed-in session', response: { 200: sessionSchema, 401: errorCodeResponse } },
    }, async (req) => publicSession(requireSession(req)));

    app.patch<{ Body: { teamId: string } }>('/session', {
      schema: {
        tags: ['Session'],
        summary: 'Switch the session to another team of the user',
        body: { type: 'object', required: ['teamId'], additionalProperties: false, properties: { teamId: { type: 'string', minLength: 1, maxLength: 200 } } },
        response: { 200: sessionSchema, 401: errorCodeResponse, 404: errorCodeResponse },
      },
    }, async (req) => {
      requireSession(req);
      const token = readCookie(req.headers.cookie, SESSION_COOKIE)!;
      const res = await auth.call.switchSessionTeam({ token, teamId: req.body.teamId });
      return publicSession(toSessionView(res.session));
    });

    app.delete('/session', {
      schema: { tags: ['Session'], summary: 'Sign out: revokes the session and clears the cookie', response: { 204: { type: 'null' }, 401: errorCodeResponse } },
    }, async (req, reply) => {
      requireSession(req);
      await auth.call.revokeSession({ token: readCookie(req.headers.cookie, SESSION_COOKIE)! });
      clearSessionCookie(req, reply, deps);
      return reply.code(204).send();
    });
  };
}
