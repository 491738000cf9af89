import { createGrpcClient, createLogger, startService, type MongoHandle, type RunningService, type UpstreamClient } from '@mailfleet/kit';
import { authV1 } from '@mailfleet/proto';
import { testMongoUrl, testNatsUrl, uniqueDbName } from '@mailfleet/testkit';
import type { FastifyInstance } from 'fastify';
import { MongoClient } from 'mongodb';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAuthConfig } from '../../../services/auth/src/config.js';
import { createAuthServer } from '../../../services/auth/src/server.js';
import { buildApp } from '../../src/app.js';
import { createAuthCache } from '../../src/clients/auth-cache.js';
import { createAuthAuthenticator, createAuthFold } from '../../src/clients/authenticator.js';
import { createRateLimiter, type RateLimiter } from '../../src/clients/rate-limiter.js';

const logger = createLogger({ service: 'rate-limit-replicas-test', level: 'silent' });
const dbName = uniqueDbName('auth_rl');
const WRITES = new Set(['insert', 'update', 'delete', 'findAndModify']);

let monitored: MongoClient;
let svc: RunningService;
let auth: UpstreamClient<authV1.AuthServiceClient>;
/** Commands the auth service sent to its database, by command and collection. */
const commands: { name: string; collection: string; filter: string }[] = [];

beforeAll(async () => {
  // auth on real FerretDB and NATS, with a client whose every command is counted.
  monitored = new MongoClient(testMongoUrl(), { monitorCommands: true });
  await monitored.connect();
  monitored.on('commandStarted', (e) => {
    if (e.databaseName !== dbName) return;
    const command = e.command as Record<string, unknown>;
    const collection = command[e.commandName];
    const filter = Object.keys((command['filter'] ?? {}) as object).join(',');
    commands.push({ name: e.commandName, collection: typeof collection === 'string' ? collection : '', filter });
  });
  const db = monitored.db(dbName);
  const mongo: MongoHandle = { client: monitored, db, ping: async () => undefined, close: async () => undefined };
  const config = loadAuthConfig({
    GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: testMongoUrl(), MONGO_DB: dbName, NATS_URL: testNatsUrl(),
    API_KEY_HASH_SECRET: 'integration-test-secret-0123456789abcdef', LOG_LEVEL: 'silent',
  });
  svc = await startService({ name: 'auth', config, env: {}, logger, build: (infra) => createAuthServer({ config, infra: { ...infra, mongo } }) });
  auth = createGrpcClient({ name: 'auth', address: `127.0.0.1:${svc.grpc.port}`, ctor: authV1.AuthServiceClient, logger });
});
afterAll(async () => {
  auth?.close();
  await monitored?.db(dbName).dropDatabase();
  await svc?.shutdown('test over');
  await monitored?.close();
});

/** One gateway replica: its own key cache and rate limiter, the real plugins, a send route that only answers. */
async function replica(folds: { count: number }): Promise<{ app: FastifyInstance; limiter: RateLimiter }> {
  const upstreams = { auth };
  const cache = createAuthCache(createAuthAuthenticator(upstreams), { ttlMs: 60_000 });
  cache.setTrusted(true);
  const fold = createAuthFold(upstreams);
  // The test folds by hand at the end of each round, so what each replica could not see is known.
  const limiter = createRateLimiter({ syncIntervalMs: 3_600_000, logger, fold: async (c) => { folds.count++; return fold(c); } });
  const app = await buildApp({
    logger, registry: new Registry(), authenticate: cache.authenticate, info: { version: 'test', environment: 'test', startedAt: Date.now() },
    rateLimitCheck: (p, family, cost) => limiter.check(p, family, cost),
    areas: [async (v1) => {
      v1.post('/emails', { config: { rateLimit: { family: 'SEND_EMAIL' }, allowSendingKeys: true } }, async () => ({ id: 'em_x' }));
    }],
  });
  return { app, limiter };
}

describe('rate limits counted on two gateway replicas and folded into auth', () => {
  it('admit at most limit + what one replica admits between folds, refuse past it with the SPEC body, and write once per fold', async () => {
    const { team, userId } = await auth.call.createTeam({ name: 'Folded', plan: 0 });
    const teamId = team!.id;
    const LIMIT = 30;
    await auth.call.updateTeamLimits({ teamId, plan: 0, rateLimits: { SEND_EMAIL: LIMIT } });
    const { token } = await auth.call.createApiKey({ teamId, name: 'k', permission: 0, createdByUserId: userId });
    const folds = { count: 0 };
    const a = await replica(folds);
    const b = await replica(folds);
    // Fixed one-minute windows: start early in a minute so every round shares one.
    const second = new Date().getUTCSeconds();
    if (second > 40) await new Promise((r) => setTimeout(r, (61 - second) * 1000));
    const startedMinute = Math.floor(Date.now() / 60_000);

    const send = (r: { app: FastifyInstance }) => r.app.inject({ method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${token}` } });
    commands.length = 0;
    let requests = 0;
    let admitted = 0;
    let mostOneReplicaAdmittedInARound = 0;
    let last: Awaited<ReturnType<typeof send>> | undefined;
    for (let round = 0; round < 6; round++) {
      const perReplica = await Promise.all([a, b].map(async (r) => {
        let ok = 0;
        for (let i = 0; i < 8; i++) {
          const res = await send(r);
          requests++;
          if (res.statusCode === 200) ok++;
          else last = res;
        }
        return ok;
      }));
      admitted += perReplica[0]! + perReplica[1]!;
      mostOneReplicaAdmittedInARound = Math.max(mostOneReplicaAdmittedInARound, ...perReplica);
      // Two folds each: the second carries back what the other replica folded in the first.
      await Promise.all([a.limiter.sync(), b.limiter.sync()]);
      await Promise.all([a.limiter.sync(), b.limiter.sync()]);
    }
    expect(Math.floor(Date.now() / 60_000), 'the rounds did not fit in one rate-limit window').toBe(startedMinute);

    // The documented bound: limit + (replicas - 1) x what one replica admits between two folds, and at most replicas x limit.
    expect(admitted).toBeGreaterThanOrEqual(LIMIT);
    expect(admitted).toBeLessThanOrEqual(LIMIT + mostOneReplicaAdmittedInARound);
    expect(admitted).toBeLessThanOrEqual(2 * LIMIT);
    // The shared window holds every admitted request.
    const shared = await monitored.db(dbName).collection('rate_windows').findOne({ _id: `${teamId}:SEND_EMAIL:${startedMinute * 60_000}` as never });
    expect(shared?.['count']).toBe(admitted);

    // Past it, both replicas refuse with the SPEC's 429 and headers.
    for (const r of [a, b]) {
      const res = await send(r);
      expect(res.statusCode).toBe(429);
      expect(res.json()).toEqual({ code: 'RATE_LIMITED', message: expect.stringContaining(`${LIMIT} requests per minute`) as unknown });
      expect(res.headers['ratelimit-limit']).toBe(String(LIMIT));
      expect(res.headers['ratelimit-remaining']).toBe('0');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    }
    expect(last?.statusCode).toBe(429);

    // Storage: the rate-limit windows are written once per fold at most, never once per request; the key and
    // team are read once per replica (the key cache), not per request.
    const windowWrites = commands.filter((c) => WRITES.has(c.name) && c.collection === 'rate_windows').length;
    expect(requests).toBe(96);
    expect(windowWrites).toBeLessThanOrEqual(folds.count);
    expect(windowWrites).toBeLessThan(requests / 4);
    // (The outbox relay's periodic scan of api_keys is not a lookup by token.)
    expect(commands.filter((c) => c.collection === 'api_keys' && c.filter.startsWith('tokenHash')).length).toBe(2);
    expect(commands.filter((c) => c.collection === 'teams' && c.name === 'find').length).toBeLessThanOrEqual(2 + folds.count);
    expect(commands.filter((c) => WRITES.has(c.name) && c.collection !== 'rate_windows')).toEqual([]);

    await Promise.all([a, b].map(async (r) => {
      await r.limiter.stop();
      await r.app.close();
    }));
  });
});
