import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createLogger } from '@mailfleet/kit';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { CONSOLE_CSP } from '../../src/plugins/console.plugin.js';

let app: FastifyInstance;
let dir: string;
beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-'));
  fs.mkdirSync(path.join(dir, 'assets'));
  fs.writeFileSync(path.join(dir, 'index.html'), '<!doctype html><div id="root"></div>');
  fs.writeFileSync(path.join(dir, 'assets', 'index-abc.js'), 'console.log(1)');
  app = await buildApp({
    logger: createLogger({ service: 'gateway-test', level: 'silent' }),
    registry: new Registry(),
    authenticate: async () => ({ teamId: 'team_1', keyId: 'key_1', userId: 'user_1', permission: 'FULL' }),
    info: { version: '9.9.9', environment: 'test', startedAt: Date.now() },
    consoleDir: dir,
  });
});
afterAll(async () => {
  await app.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('the web console served by the gateway', () => {
  it('serves index.html at / with a strict CSP and no framing', async () => {
    const res = await app.inject({ url: '/' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect(res.body).toContain('id="root"');
    expect(res.headers['content-security-policy']).toBe(CONSOLE_CSP);
    expect(CONSOLE_CSP).toContain("frame-ancestors 'none'");
    expect(CONSOLE_CSP).toContain("script-src 'self'");
    expect(CONSOLE_CSP).not.toMatch(/script-src[^;]*unsafe-inline/);
  });

  it('falls back to index.html for client-side routes (a reload of /emails/em_1 works)', async () => {
    for (const url of ['/emails/em_1', '/domains?x=1', '/dev/inbox', '/invite']) {
      const res = await app.inject({ url });
      expect(res.statusCode, url).toBe(200);
      expect(res.body, url).toContain('id="root"');
      expect(res.headers['content-security-policy'], url).toBe(CONSOLE_CSP);
    }
  });

  it('serves built assets with a long cache, without a session or key', async () => {
    const res = await app.inject({ url: '/assets/index-abc.js' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toContain('immutable');
    expect(res.headers['content-security-policy']).toBe(CONSOLE_CSP);
  });

  it('leaves the API, docs and metrics paths alone', async () => {
    const missing = await app.inject({ url: '/v1/nothing-here' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ code: 'NOT_FOUND', message: 'Route GET /v1/nothing-here not found' });
    expect((await app.inject({ url: '/api/v1/nothing' })).statusCode).toBe(404);
    expect((await app.inject({ url: '/metrics/x' })).statusCode).toBe(404);
    const health = await app.inject({ url: '/v1/health' });
    expect(health.statusCode).toBe(200);
    expect(health.headers['content-security-policy']).toBeUndefined();
    expect((await app.inject({ url: '/v1/openapi.json' })).json<{ openapi: string }>().openapi).toBe('3.1.0');
    // A non-GET to a console path is not the SPA's.
    expect((await app.inject({ method: 'POST', url: '/emails' })).statusCode).toBe(404);
  });
});
