import { Metadata, status } from '@grpc/grpc-js';
import { APP_CODE_KEY, createLogger, currentRequestContext } from '@mailfleet/kit';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { principalOf, type Authenticator } from '../../src/plugins/auth.plugin.js';

function grpcError(code: status, details: string, appCode?: string) {
  const metadata = new Metadata();
  if (appCode) metadata.set(APP_CODE_KEY, appCode);
  return Object.assign(new Error(details), { code, details, metadata });
}

const authenticate: Authenticator = async (token) => {
  if (token === 'mf_good') return { teamId: 'team_1', keyId: 'key_1', userId: 'user_1', permission: 'FULL' };
  if (token === 'mf_down') throw grpcError(status.UNAVAILABLE, 'connect ECONNREFUSED 10.0.0.1:50051');
  throw grpcError(status.UNAUTHENTICATED, 'Invalid API key');
};

let app: FastifyInstance;
beforeAll(async () => {
  app = await buildApp({
    logger: createLogger({ service: 'gateway-test', level: 'silent' }),
    registry: new Registry(),
    authenticate,
    info: { version: '9.9.9', environment: 'test', startedAt: Date.now() },
    areas: [
      async (v1) => {
        v1.get('/things/:id', async (req) => ({ team: principalOf(req).teamId, requestId: currentRequestContext()?.requestId }));
        v1.get('/contactBooks/x/contacts/:id', { config: { errorForm: 'nested' } }, async () => { throw grpcError(status.NOT_FOUND, 'Contact not found', 'NOT_FOUND'); });
        v1.get('/domains/:id', { config: { errorForm: 'string' } }, async () => { throw grpcError(status.PERMISSION_DENIED, 'API key has no access to this domain'); });
        v1.delete('/suppressions/email/:email', { config: { errorForm: 'success' } }, async () => { throw grpcError(status.NOT_FOUND, 'Address is not suppressed'); });
        v1.post('/conflict', async () => { throw grpcError(status.ABORTED, 'Idempotency key reused with a different body', 'NOT_UNIQUE'); });
        v1.get('/boom', async () => { throw grpcError(status.INTERNAL, 'mongo exploded at 10.1.2.3'); });
        v1.post('/validated', { schema: { body: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1 } } } } }, async () => ({ ok: true }));
      },
    ],
  });
});
afterAll(async () => app.close());

const auth = { authorization: 'Bearer mf_good' };

describe('system routes (SPEC 4.12)', () => {
  it.each(['/v1/health', '/api/v1/health'])('%s answers without auth', async (url) => {
    const res = await app.inject({ url });
    expect(res.statusCode).toBe(200);
    const body = res.json<{ status: string; uptime: number; timestamp: number }>();
    expect(body.status).toBe('ok');
    expect(typeof body.uptime).toBe('number');
    expect(Math.abs(body.timestamp - Date.now())).toBeLessThan(60_000);
  });

  it('version carries every field of the SPEC', async () => {
    const res = await app.inject({ url: '/v1/version' });
    expect(res.statusCode).toBe(200);
    const body = res.json<Record<string, unknown>>();
    expect(body).toMatchObject({ version: '9.9.9', environment: 'test', nodeVersion: process.version, platform: process.platform, arch: process.arch });
    expect(new Date(body.timestamp as string).toISOString()).toBe(body.timestamp);
    expect(body.versions).toEqual({ node: process.versions.node, v8: process.versions.v8 });
    expect(Object.keys(body.memory as object).sort()).toEqual(['external', 'heapTotal', 'heapUsed', 'rss']);
  });

  it('serves an OpenAPI 3.1 document of the /v1 routes and Swagger UI', async () => {
    const doc = (await app.inject({ url: '/v1/openapi.json' })).json<{ openapi: string; paths: Record<string, unknown> }>();
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toContain('/v1/health');
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/api/'))).toBe(false);
    const ui = await app.inject({ url: '/docs/' });
    expect(ui.statusCode).toBe(200);
    expect(ui.headers['content-type']).toMatch(/text\/html/);
  });
});

describe('authentication', () => {
  it('rejects a missing or malformed key with 401', async () => {
    expect((await app.inject({ url: '/v1/things/1' })).json()).toEqual({ code: 'UNAUTHORIZED', message: 'Missing API key: send Authorization: Bearer <API_KEY>' });
    expect((await app.inject({ url: '/v1/things/1', headers: { authorization: 'Basic abc' } })).statusCode).toBe(401);
    const bad = await app.inject({ url: '/api/v1/things/1', headers: { authorization: 'Bearer nope' } });
    expect(bad.statusCode).toBe(401);
    expect(bad.json()).toEqual({ code: 'UNAUTHORIZED', message: 'Invalid API key' });
  });

  it('passes the principal and request id to the handler', async () => {
    const res = await app.inject({ url: '/v1/things/1', headers: { ...auth, 'x-request-id': 'rid-42' } });
    expect(res.json()).toEqual({ team: 'team_1', requestId: 'rid-42' });
    expect(res.headers['x-request-id']).toBe('rid-42');
  });

  it('is 503 with a generic message when the auth service is unreachable', async () => {
    const res = await app.inject({ url: '/v1/things/1', headers: { authorization: 'Bearer mf_down' } });
    expect(res.statusCode).toBe(503);
    expect(JSON.stringify(res.json())).not.toContain('10.0.0.1');
  });
});

describe('error bodies per endpoint family (SPEC 7)', () => {
  it('contacts: {error: {code, message}}', async () => {
    const res = await app.inject({ url: '/v1/contactBooks/x/contacts/c1', headers: auth });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: { code: 'NOT_FOUND', message: 'Contact not found' } });
  });
  it('domains: {error: string}', async () => {
    const res = await app.inject({ url: '/v1/domains/d1', headers: auth });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ error: 'API key has no access to this domain' });
  });
  it('suppression delete: {success: false, error}', async () => {
    const res = await app.inject({ method: 'DELETE', url: '/v1/suppressions/email/a@b.co', headers: auth });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ success: false, error: 'Address is not suppressed' });
  });
  it('conflict keeps its app code', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/conflict', headers: auth });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual({ code: 'NOT_UNIQUE', message: 'Idempotency key reused with a different body' });
  });
  it('5xx hides internals', async () => {
    const res = await app.inject({ url: '/v1/boom', headers: auth });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ code: 'INTERNAL_SERVER_ERROR', message: 'Internal server error' });
  });
  it('schema validation is 400 naming the field', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/validated', headers: auth, payload: {} });
    expect(res.statusCode).toBe(400);
    expect(res.json<{ code: string; message: string }>()).toMatchObject({ code: 'BAD_REQUEST' });
    expect(res.json<{ message: string }>().message).toContain('name');
  });
  it('unknown routes are 404 without needing auth', async () => {
    const res = await app.inject({ url: '/v1/nothing-here' });
    expect(res.statusCode).toBe(404);
    expect(res.json<{ code: string }>().code).toBe('NOT_FOUND');
  });
});

describe('draining', () => {
  it('health answers 503 draining once shutdown began, so load balancers stop routing', async () => {
    let draining = false;
    const drainApp = await buildApp({
      logger: createLogger({ service: 'gateway-test', level: 'silent' }),
      registry: new Registry(),
      authenticate,
      info: { version: '1', environment: 'test', startedAt: Date.now(), draining: () => draining },
    });
    try {
      expect((await drainApp.inject({ url: '/v1/health' })).statusCode).toBe(200);
      draining = true;
      const res = await drainApp.inject({ url: '/v1/health' });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({ status: 'draining' });
    } finally {
      await drainApp.close();
    }
  });
});
