import { Metadata, status } from '@grpc/grpc-js';
import { createLogger } from '@mailfleet/kit';
import type { authV1 } from '@mailfleet/proto';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import type { Upstreams } from '../../src/clients/upstreams.js';
import { principalOf, type Authenticator, type SessionAuthenticator } from '../../src/plugins/auth.plugin.js';
import { sessionRoutes } from '../../src/routes/v1/session/session.routes.js';

// The gateway's half of sign-in, with auth faked through the factories (auth's half runs on real servers in
// services/auth/test/integration/people.test.ts and end to end in gateway/test/e2e/session.e2e.test.ts).

const unauthenticated = () => Object.assign(new Error('Session expired or signed out'), {
  code: status.UNAUTHENTICATED, details: 'Session expired or signed out', metadata: new Metadata(),
});
const session: authV1.SessionInfo = {
  sessionId: 'ses_1', user: { id: 'usr_1', email: 'ann@example.com', name: undefined, createdAt: new Date() },
  team: { id: 'team_1', name: 'One', slug: 'one', plan: 1, createdAt: new Date(), updatedAt: new Date() },
  teams: [{ id: 'team_1', name: 'One', slug: 'one', plan: 1, createdAt: new Date(), updatedAt: new Date() }],
  expiresAt: new Date(Date.now() + 3_600_000),
};
const GOOD = 'mfs_good';
const authenticate: Authenticator = async (token) => {
  if (token === 'mf_key') return { teamId: 'team_key', keyId: 'key_1', userId: 'usr_key', permission: 'FULL' };
  throw unauthenticated();
};
const authenticateSession: SessionAuthenticator = async (token) => {
  if (token !== GOOD) throw unauthenticated();
  return {
    teamId: 'team_1', keyId: '', userId: 'usr_1', permission: 'FULL',
    session: { id: 'ses_1', user: { id: 'usr_1', email: 'ann@example.com', name: null }, team: { id: 'team_1', name: 'One' }, teams: [{ id: 'team_1', name: 'One' }], expiresAt: session.expiresAt!.toISOString() },
  };
};
const revoked: string[] = [];
const upstreams = {
  auth: {
    call: {
      login: async (req: authV1.LoginRequest): Promise<authV1.LoginResponse> => {
        if (req.email === 'limited@example.com') return { token: '', rateLimited: true, retryAfterSeconds: 42 };
        if (req.password !== 'right password') throw Object.assign(unauthenticated(), { details: 'Invalid email or password' });
        return { token: GOOD, session, rateLimited: false, retryAfterSeconds: 0 };
      },
      revokeSession: async (req: authV1.RevokeSessionRequest) => {
        revoked.push(req.token);
        return {};
      },
    },
  },
} as unknown as Upstreams;

function appWith(publicUrl?: string): Promise<FastifyInstance> {
  return buildApp({
    logger: createLogger({ service: 'gateway-test', level: 'silent' }),
    registry: new Registry(),
    authenticate,
    authenticateSession,
    ...(publicUrl ? { publicUrl } : {}),
    info: { version: '0.0.0', environment: 'test', startedAt: Date.now() },
    areas: [
      sessionRoutes({ upstreams, publicUrl }),
      async (v1) => {
        v1.get('/whoami', async (req) => ({ team: principalOf(req).teamId, session: principalOf(req).session?.id ?? null }));
        v1.post('/things', async (req) => ({ team: principalOf(req).teamId }));
      },
    ],
  });
}

let app: FastifyInstance;
let httpsApp: FastifyInstance;
beforeAll(async () => {
  app = await appWith();
  httpsApp = await appWith('https://mail.example.com');
});
afterAll(async () => {
  await app.close();
  await httpsApp.close();
});

const cookie = { cookie: `other=1; mf_session=${GOOD}` };
const ownOrigin = { origin: 'http://localhost:80' };

describe('the session cookie authenticates /v1 requests', () => {
  it('acts as the session\'s team; a bad or missing cookie is 401; a key still works without Origin', async () => {
    expect((await app.inject({ url: '/v1/whoami', headers: cookie })).json()).toEqual({ team: 'team_1', session: 'ses_1' });
    expect((await app.inject({ url: '/api/v1/whoami', headers: cookie })).statusCode).toBe(200);
    expect((await app.inject({ url: '/v1/whoami', headers: { cookie: 'mf_session=mfs_bad' } })).statusCode).toBe(401);
    expect((await app.inject({ url: '/v1/whoami' })).statusCode).toBe(401);
    const keyed = await app.inject({ method: 'POST', url: '/v1/things', headers: { authorization: 'Bearer mf_key', origin: 'https://evil.example' } });
    expect(keyed.json()).toEqual({ team: 'team_key' });
  });

  it('refuses a state-changing cookie request from another origin or without one', async () => {
    for (const headers of [{ ...cookie, origin: 'https://evil.example' }, cookie]) {
      const res = await app.inject({ method: 'POST', url: '/v1/things', headers });
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({ code: 'FORBIDDEN', message: 'Cross-origin request refused' });
    }
    expect((await app.inject({ method: 'POST', url: '/v1/things', headers: { ...cookie, ...ownOrigin } })).json()).toEqual({ team: 'team_1' });
  });

  it('takes the own origin from PUBLIC_URL when set', async () => {
    const headers = { ...cookie, host: 'internal:3000' };
    expect((await httpsApp.inject({ method: 'POST', url: '/v1/things', headers: { ...headers, origin: 'http://internal:3000' } })).statusCode).toBe(403);
    expect((await httpsApp.inject({ method: 'POST', url: '/v1/things', headers: { ...headers, origin: 'https://mail.example.com' } })).statusCode).toBe(200);
  });
});

describe('sign-in and sign-out', () => {
  it('POST /v1/session sets an HttpOnly SameSite=Strict cookie, Secure only over HTTPS', async () => {
    const body = { email: 'ann@example.com', password: 'right password' };
    const res = await app.inject({ method: 'POST', url: '/v1/session', headers: ownOrigin, payload: body });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ user: { id: 'usr_1', email: 'ann@example.com', name: null }, team: { id: 'team_1', name: 'One' }, teams: [{ id: 'team_1', name: 'One' }] });
    const set = String(res.headers['set-cookie']);
    // The cookie outlives the idle expiry (auth enforces that): 7 days, the session's longest life.
    expect(set).toBe('mf_session=mfs_good; Path=/; HttpOnly; SameSite=Strict; Max-Age=604800');
    const secure = await httpsApp.inject({ method: 'POST', url: '/v1/session', headers: { origin: 'https://mail.example.com' }, payload: body });
    expect(String(secure.headers['set-cookie'])).toMatch(/; Secure$/);
  });

  it('POST /v1/session is refused from another origin, 401 on bad credentials, 429 with Retry-After when limited', async () => {
    const refused = await app.inject({ method: 'POST', url: '/v1/session', headers: { origin: 'https://evil.example' }, payload: { email: 'ann@example.com', password: 'right password' } });
    expect(refused.statusCode).toBe(403);
    const wrong = await app.inject({ method: 'POST', url: '/v1/session', headers: ownOrigin, payload: { email: 'ann@example.com', password: 'nope' } });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json()).toEqual({ code: 'UNAUTHORIZED', message: 'Invalid email or password' });
    const limited = await app.inject({ method: 'POST', url: '/v1/session', headers: ownOrigin, payload: { email: 'limited@example.com', password: 'x' } });
    expect(limited.statusCode).toBe(429);
    expect(limited.headers['retry-after']).toBe('42');
    expect(limited.json()).toMatchObject({ code: 'RATE_LIMITED' });
  });

  it('GET /v1/session answers the session; DELETE revokes it and clears the cookie; a key has no session', async () => {
    expect((await app.inject({ url: '/v1/session', headers: cookie })).json()).toMatchObject({ user: { id: 'usr_1' } });
    expect((await app.inject({ url: '/v1/session', headers: { authorization: 'Bearer mf_key' } })).statusCode).toBe(401);
    const out = await app.inject({ method: 'DELETE', url: '/v1/session', headers: { ...cookie, ...ownOrigin } });
    expect(out.statusCode).toBe(204);
    expect(String(out.headers['set-cookie'])).toMatch(/^mf_session=; Path=\/; HttpOnly; SameSite=Strict; Max-Age=0$/);
    expect(revoked).toEqual([GOOD]);
  });
});
