import { createGrpcClient, createLogger, startService, type MongoHandle, type RunningService, type UpstreamClient } from '@mailfleet/kit';
import { authV1 } from '@mailfleet/proto';
import { testMongoUrl, testNatsUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAuthConfig } from '../../../auth/src/config.js';
import { createAuthServer } from '../../../auth/src/server.js';
import { createUpstreams, type QuotaVerdict } from '../../src/clients/upstreams.js';

const logger = createLogger({ service: 'quota-replicas-test', level: 'silent' });
const dbName = uniqueDbName('auth_quota');
const WRITES = new Set(['insert', 'update', 'delete', 'findAndModify']);

let monitored: MongoClient;
let svc: RunningService;
let auth: UpstreamClient<authV1.AuthServiceClient>;
const commands: { name: string; collection: string }[] = [];

beforeAll(async () => {
  // auth on real FerretDB and NATS, with a client whose every command is counted.
  monitored = new MongoClient(testMongoUrl(), { monitorCommands: true });
  await monitored.connect();
  monitored.on('commandStarted', (e) => {
    if (e.databaseName !== dbName) return;
    const collection = (e.command as Record<string, unknown>)[e.commandName];
    commands.push({ name: e.commandName, collection: typeof collection === 'string' ? collection : '' });
  });
  const mongo: MongoHandle = { client: monitored, db: monitored.db(dbName), ping: async () => undefined, close: async () => undefined };
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

/** An emails replica's upstreams (only the quota gate is used; domains and suppressions are never called). */
const emailsReplica = () => createUpstreams({
  authAddr: `127.0.0.1:${svc.grpc.port}`, domainsAddr: '127.0.0.1:9', suppressionsAddr: '127.0.0.1:9', deadlineMs: 5_000, logger,
});

async function counters(teamId: string): Promise<{ day: number; month: number }> {
  const day = new Date().toISOString().slice(0, 10);
  const col = monitored.db(dbName).collection<{ _id: string; count: number }>('quota_counters');
  return {
    day: (await col.findOne({ _id: `${teamId}:day:${day}` }))?.count ?? 0,
    month: (await col.findOne({ _id: `${teamId}:month:${day.slice(0, 7)}` }))?.count ?? 0,
  };
}

describe('plan quota reserved in blocks by two emails replicas', () => {
  it('never admit more than the quota together, refuse past it as QUOTA_EXCEEDED names it, write per block, and give back what they hold', async () => {
    const { team } = await auth.call.createTeam({ name: 'Quota', plan: 0 });
    const teamId = team!.id;
    const DAILY = 400;
    await auth.call.updateTeamLimits({ teamId, plan: 0, dailyEmailLimit: DAILY, monthlyEmailLimit: 1_000, rateLimits: {} });
    const replicas = [emailsReplica(), emailsReplica()];
    commands.length = 0;

    // 600 single sends, ten at a time on each replica.
    const verdicts: QuotaVerdict[] = [];
    for (let i = 0; i < 30; i++) {
      verdicts.push(...await Promise.all(replicas.flatMap((r) => Array.from({ length: 10 }, () => r.quota.consume(teamId, 1)))));
    }
    const admitted = verdicts.filter((v) => v.allowed).length;
    expect(admitted).toBe(DAILY);
    expect(verdicts.filter((v) => !v.allowed)).toEqual(Array.from({ length: 600 - DAILY }, () => ({ allowed: false, quota: 'daily', limit: DAILY })));
    // auth's counters hold exactly what was used: nothing past the quota was ever taken.
    expect(await counters(teamId)).toEqual({ day: DAILY, month: DAILY });

    // Writes per block of up to 1 + DAILY/10 emails (a take of the day and one of the month), not per send.
    const writes = commands.filter((c) => WRITES.has(c.name));
    expect(writes.every((c) => c.collection === 'quota_counters')).toBe(true);
    expect(writes.length).toBeLessThanOrEqual(2 * Math.ceil(DAILY / (1 + DAILY / 10)) + 8);

    // A replica that stops gives back what it reserved and did not use.
    const { team: other } = await auth.call.createTeam({ name: 'Quota 2', plan: 0 });
    await auth.call.updateTeamLimits({ teamId: other!.id, plan: 0, dailyEmailLimit: 1_000, monthlyEmailLimit: -1, rateLimits: {} });
    expect(await replicas[0]!.quota.consume(other!.id, 3)).toEqual({ allowed: true });
    expect((await counters(other!.id)).day).toBe(3 + 100);
    for (const r of replicas) r.close();
    await expect.poll(async () => (await counters(other!.id)).day, { timeout: 10_000 }).toBe(3);
  });
});
