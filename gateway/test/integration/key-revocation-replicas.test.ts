import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import { connectNats, createGrpcClient, createLogger, startService, type NatsHandle, type RunningService, type UpstreamClient } from '@mailfleet/kit';
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
import { createAuthAuthenticator } from '../../src/clients/authenticator.js';
import { listenForKeyRevocations } from '../../src/clients/key-revocations.js';

const logger = createLogger({ service: 'key-revocation-replicas-test', level: 'silent' });
const dbName = uniqueDbName('auth_rev');

/**
 * A TCP relay in front of NATS for one replica. `freeze` stops relaying without closing anything: the
 * replica's connection stays open but nothing arrives (a hung peer or a network partition, which the
 * NATS client only notices after its ping interval). `drop` closes every connection (a clean disconnect).
 */
interface Relay { url: string; freeze(): void; thaw(): void; drop(): void; close(): Promise<void> }

async function startRelay(natsUrl: string): Promise<Relay> {
  const target = new URL(natsUrl.split(',')[0]!);
  const pairs = new Set<[Socket, Socket]>();
  let frozen = false;
  const server: Server = createServer((client) => {
    const upstream = tcpConnect(Number(target.port), target.hostname);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    if (frozen) for (const s of pair) s.pause();
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const each = (fn: (s: Socket) => void) => { for (const p of pairs) p.forEach(fn); };
  return {
    url: `nats://127.0.0.1:${port}`,
    freeze: () => { frozen = true; each((s) => s.pause()); },
    thaw: () => { frozen = false; each((s) => s.resume()); },
    drop: () => each((s) => s.destroy()),
    close: async () => {
      each((s) => s.destroy());
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

let svc: RunningService;
let auth: UpstreamClient<authV1.AuthServiceClient>;
let mongo: MongoClient;

beforeAll(async () => {
  mongo = new MongoClient(testMongoUrl());
  await mongo.connect();
  const config = loadAuthConfig({
    GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: testMongoUrl(), MONGO_DB: dbName, NATS_URL: testNatsUrl(),
    API_KEY_HASH_SECRET: 'integration-test-secret-0123456789abcdef', LOG_LEVEL: 'silent',
  });
  svc = await startService({ name: 'auth', config, env: {}, logger, build: (infra) => createAuthServer({ config, infra }) });
  auth = createGrpcClient({ name: 'auth', address: `127.0.0.1:${svc.grpc.port}`, ctor: authV1.AuthServiceClient, logger });
});
afterAll(async () => {
  auth?.close();
  await mongo?.db(dbName).dropDatabase();
  await svc?.shutdown('test over');
  await mongo?.close();
});

interface Replica { app: FastifyInstance; admits: { count: number }; stop(): Promise<void> }

/** One gateway replica as server.ts wires it (production cache TTLs), with its own NATS connection at `natsUrl`. */
async function replica(natsUrl: string, name: string): Promise<Replica> {
  const nats: NatsHandle = await connectNats({ url: natsUrl, name, logger });
  const admits = { count: 0 };
  const admit = createAuthAuthenticator({ auth });
  const cache = createAuthCache(async (token) => { admits.count++; return admit(token); });
  const revocations = listenForKeyRevocations({ nats, cache, logger });
  const app = await buildApp({
    logger, registry: new Registry(), authenticate: cache.authenticate, info: { version: 'test', environment: 'test', startedAt: Date.now() },
    areas: [async (v1) => { v1.get('/probe', async () => ({ ok: true })); }],
  });
  return {
    app, admits,
    async stop() {
      await app.close();
      await revocations.stop();
      await nats.nc.close();
    },
  };
}

const call = (r: Replica, token: string) => r.app.inject({ method: 'GET', url: '/v1/probe', headers: { authorization: `Bearer ${token}` } });

/** Polls every 50 ms until `check` holds; fails naming `what` after `ms`. */
async function within(ms: number, what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Until the replica serves a key from its cache (its revocation listener is up): two requests, one Admit. */
async function cached(r: Replica, token: string): Promise<void> {
  await within(15_000, 'the key cache in use', async () => {
    expect((await call(r, token)).statusCode).toBe(200);
    const before = r.admits.count;
    expect((await call(r, token)).statusCode).toBe(200);
    return r.admits.count === before;
  });
}

/** Well under the cache's 30 s TTL, and generous for a loaded machine: the bound a cut-off replica must keep is about 2 s. */
const BOUND_MS = 10_000;

describe('a revoked key on two gateway replicas, one cut off from NATS', () => {
  it('stops working at once where revocations are heard, and within the short bound where they are not', async () => {
    const { team, userId } = await auth.call.createTeam({ name: 'Revoked', plan: 0 });
    const teamId = team!.id;
    const relay = await startRelay(testNatsUrl());
    const a = await replica(testNatsUrl(), 'gateway-a');
    const b = await replica(relay.url, 'gateway-b');
    try {
      const newKey = async () => {
        const k = await auth.call.createApiKey({ teamId, name: 'k', permission: 0, createdByUserId: userId });
        return { token: k.token, id: k.apiKey!.id };
      };

      // 1. Both connected: a deletion is heard by both caches.
      const first = await newKey();
      await cached(a, first.token);
      await cached(b, first.token);
      await auth.call.deleteApiKey({ teamId, keyId: first.id });
      for (const r of [a, b]) await within(BOUND_MS, 'revoked key refused', async () => (await call(r, first.token)).statusCode === 401);

      // 2. B's connection hangs (no disconnect is seen): a key it has cached is refused within the short bound.
      const second = await newKey();
      await cached(a, second.token);
      await cached(b, second.token);
      relay.freeze();
      await auth.call.deleteApiKey({ teamId, keyId: second.id });
      await within(BOUND_MS, 'A refuses the revoked key', async () => (await call(a, second.token)).statusCode === 401);
      await within(BOUND_MS, 'B (cut off) refuses the revoked key', async () => (await call(b, second.token)).statusCode === 401);
      // A live key still works on B, through auth.
      const live = await newKey();
      expect((await call(b, live.token)).statusCode).toBe(200);

      // 3. Reconnected: B trusts its cache again and hears the next deletion.
      relay.thaw();
      await cached(b, live.token);

      // 4. B's connection drops (a disconnect is seen, NATS reconnects through the relay): the same bound.
      const third = await newKey();
      await cached(b, third.token);
      relay.freeze();
      relay.drop();
      await auth.call.deleteApiKey({ teamId, keyId: third.id });
      await within(BOUND_MS, 'B (disconnected) refuses the revoked key', async () => (await call(b, third.token)).statusCode === 401);
      relay.thaw();
      await cached(b, live.token);
      await auth.call.deleteApiKey({ teamId, keyId: live.id });
      await within(BOUND_MS, 'B (reconnected) refuses the revoked key', async () => (await call(b, live.token)).statusCode === 401);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
      await relay.close();
    }
  });
});
