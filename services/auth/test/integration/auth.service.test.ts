import { status, type ServiceError } from '@grpc/grpc-js';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createGrpcClient, createLogger, decodeEvent, startService, type RunningService, type UpstreamClient } from '@mailfleet/kit';
import { authV1 } from '@mailfleet/proto';
import { testMongoUrl, testNatsUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAuthConfig } from '../../src/config.js';
import { createAuthServer } from '../../src/server.js';

const logger = createLogger({ service: 'auth-test', level: 'silent' });
const dbName = uniqueDbName('auth');
const HASH_SECRET = 'integration-test-secret-0123456789abcdef';
let svc: RunningService;
let auth: UpstreamClient<authV1.AuthServiceClient>;

beforeAll(async () => {
  const config = loadAuthConfig({
    GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: testMongoUrl(), MONGO_DB: dbName, NATS_URL: testNatsUrl(),
    API_KEY_HASH_SECRET: HASH_SECRET, LOG_LEVEL: 'silent',
  });
  svc = await startService({ name: 'auth', config, env: {}, logger, build: (infra) => createAuthServer({ config, infra }) });
  auth = createGrpcClient({ name: 'auth', address: `127.0.0.1:${svc.grpc.port}`, ctor: authV1.AuthServiceClient, logger });
});
afterAll(async () => {
  auth?.close();
  await svc?.infra.mongo.db.dropDatabase();
  await svc?.shutdown('test over');
});

const code = (p: Promise<unknown>) => p.then(() => 'OK', (e: ServiceError) => status[e.code]);

async function newTeam(name = 'Acme') {
  const { team, userId } = await auth.call.createTeam({ name, plan: authV1.Plan.PLAN_UNSPECIFIED });
  return { teamId: team!.id, userId, team: team! };
}

describe('teams', () => {
  it('creates teams with unique slugs, lists a user\'s teams, guards access', async () => {
    const a = await newTeam('Slug Team');
    const b = await newTeam('Slug Team');
    expect(a.team.slug).toBe('slug-team');
    expect(b.team.slug).toMatch(/^slug-team-[a-z0-9]+$/);
    const second = await auth.call.createTeam({ name: 'Second', userId: a.userId, plan: authV1.Plan.PLAN_PREMIUM });
    const listed = await auth.call.listTeams({ userId: a.userId });
    expect(listed.teams.map((t) => t.id)).toEqual([a.teamId, second.team!.id]);
    expect((await auth.call.getTeam({ userId: a.userId, teamId: a.teamId })).team?.slug).toBe('slug-team');
    expect(await code(auth.call.getTeam({ userId: b.userId, teamId: a.teamId }))).toBe('PERMISSION_DENIED');
    expect(await code(auth.call.getTeam({ userId: a.userId, teamId: 'team_missing' }))).toBe('NOT_FOUND');
    expect(await code(auth.call.createTeam({ name: '  ', plan: 0 }))).toBe('INVALID_ARGUMENT');
  });

  it('reports plan settings', async () => {
    const { teamId } = await newTeam('Settings');
    expect((await auth.call.getSettings({ teamId })).settings).toEqual({
      teamId, name: 'Settings', plan: authV1.Plan.PLAN_FREE, dailyEmailLimit: 100, monthlyEmailLimit: 3000,
    });
  });
});

describe('API keys', () => {
  it('stores only a hash, authenticates the token, lists partial tokens newest first', async () => {
    const { teamId, userId } = await newTeam();
    const first = await auth.call.createApiKey({ teamId, name: 'first', permission: 0, createdByUserId: userId });
    const second = await auth.call.createApiKey({ teamId, name: 'sender', permission: authV1.Permission.PERMISSION_SENDING, domainId: 'dom_1', createdByUserId: userId });
    expect(first.token).toMatch(/^mf_[0-9A-Za-z]{40}$/);
    expect(first.apiKey?.partialToken).toBe(`${first.token.slice(0, 7)}...${first.token.slice(-4)}`);

    const who = await auth.call.authenticateKey({ token: second.token });
    expect(who).toEqual({ teamId, keyId: second.apiKey!.id, permission: authV1.Permission.PERMISSION_SENDING, domainId: 'dom_1', userId });

    const listed = await auth.call.listApiKeys({ teamId });
    expect(listed.apiKeys.map((k) => k.name)).toEqual(['sender', 'first']);

    // Nothing in the database holds the token.
    const client = new MongoClient(testMongoUrl());
    try {
      const docs = await client.db(dbName).collection('api_keys').find({ teamId }).toArray();
      const dump = JSON.stringify(docs);
      expect(dump).not.toContain(first.token);
      expect(dump).not.toContain(first.token.slice(3));
      expect(docs.every((d) => typeof d.tokenHash === 'string' && d.tokenHash.length === 64)).toBe(true);
    } finally {
      await client.close();
    }
  });

  it('rejects unknown and malformed tokens', async () => {
    expect(await code(auth.call.authenticateKey({ token: 'mf_' + 'x'.repeat(40) }))).toBe('UNAUTHENTICATED');
    expect(await code(auth.call.authenticateKey({ token: 'nonsense' }))).toBe('UNAUTHENTICATED');
    expect(await code(auth.call.authenticateKey({ token: '' }))).toBe('UNAUTHENTICATED');
  });

  it('revokes at once, publishes key.revoked, and hides other teams\' keys', async () => {
    const { teamId, userId } = await newTeam();
    const other = await newTeam('Other');
    const { token, apiKey } = await auth.call.createApiKey({ teamId, name: 'doomed', permission: 0, createdByUserId: userId });

    const nc = await connect({ servers: testNatsUrl() });
    try {
      const js = jetstream(nc);
      const consumer = await js.consumers.get('MAILFLEET_EVENTS', { filter_subjects: ['mailfleet.key.revoked'], deliver_policy: 'new' as never });
      const messages = await consumer.consume();

      expect(await code(auth.call.deleteApiKey({ teamId: other.teamId, keyId: apiKey!.id }))).toBe('NOT_FOUND');
      expect((await auth.call.authenticateKey({ token })).keyId).toBe(apiKey!.id);

      await auth.call.deleteApiKey({ teamId, keyId: apiKey!.id });
      expect(await code(auth.call.authenticateKey({ token }))).toBe('UNAUTHENTICATED');
      expect((await auth.call.listApiKeys({ teamId })).apiKeys).toEqual([]);
      expect(await code(auth.call.deleteApiKey({ teamId, keyId: apiKey!.id }))).toBe('NOT_FOUND');

      let found: ReturnType<typeof decodeEvent> | undefined;
      for await (const m of messages) {
        const e = decodeEvent(m.data);
        m.ack();
        if ((e.data as { keyId?: string }).keyId === apiKey!.id) {
          found = e;
          break;
        }
      }
      expect(found).toMatchObject({ type: 'key.revoked', teamId, data: { keyId: apiKey!.id, teamId } });
    } finally {
      await nc.close();
    }
  });

  it('touches move lastUsed forward only, scoped by team', async () => {
    const { teamId, userId } = await newTeam();
    const { apiKey } = await auth.call.createApiKey({ teamId, name: 'k', permission: 0, createdByUserId: userId });
    const id = apiKey!.id;
    const t1 = new Date('2026-01-01T10:00:00.000Z');
    const t0 = new Date('2026-01-01T09:00:00.000Z');
    expect((await auth.call.touchKeys({ touches: [{ teamId, keyId: id, lastUsed: t1 }] })).updatedCount).toBe(1);
    expect((await auth.call.touchKeys({ touches: [{ teamId, keyId: id, lastUsed: t0 }, { teamId: 'team_other', keyId: id, lastUsed: new Date() }] })).updatedCount).toBe(0);
    expect((await auth.call.listApiKeys({ teamId })).apiKeys[0]?.lastUsed?.toISOString()).toBe(t1.toISOString());
  });
});

describe('rate limits and quotas', () => {
  it('never lets concurrent callers past the limit, and a denied check consumes nothing', async () => {
    const { teamId } = await newTeam();
    await auth.call.updateTeamLimits({ teamId, plan: 0, rateLimits: { SEND_EMAIL: 5 } });
    const results = await Promise.all(Array.from({ length: 12 }, () => auth.call.checkRateLimit({ teamId, family: authV1.RateLimitFamily.RATE_LIMIT_FAMILY_SEND_EMAIL, cost: 1 })));
    expect(results.filter((r) => r.allowed)).toHaveLength(5);
    const denied = results.find((r) => !r.allowed)!;
    expect(denied).toMatchObject({ limit: 5, remaining: 0 });
    expect(denied.resetSeconds).toBeGreaterThanOrEqual(1);
    expect(denied.resetSeconds).toBeLessThanOrEqual(60);
    // Other families keep their own budget.
    expect((await auth.call.checkRateLimit({ teamId, family: authV1.RateLimitFamily.RATE_LIMIT_FAMILY_CONTACT, cost: 1 }))).toMatchObject({ allowed: true, limit: 500, remaining: 499 });
    // A batch larger than the remaining budget is refused whole.
    expect((await auth.call.checkRateLimit({ teamId, family: authV1.RateLimitFamily.RATE_LIMIT_FAMILY_BATCH_EMAIL, cost: 1001 })).allowed).toBe(false);
    expect((await auth.call.checkRateLimit({ teamId, family: authV1.RateLimitFamily.RATE_LIMIT_FAMILY_BATCH_EMAIL, cost: 1000 }))).toMatchObject({ allowed: true, remaining: 0 });
    expect(await code(auth.call.updateTeamLimits({ teamId, plan: 0, rateLimits: { NOPE: 1 } }))).toBe('INVALID_ARGUMENT');
  });

  it('quotas are all or nothing across day and month', async () => {
    const { teamId } = await newTeam();
    await auth.call.updateTeamLimits({ teamId, plan: 0, dailyEmailLimit: 5, monthlyEmailLimit: 6, rateLimits: {} });
    expect(await auth.call.consumeQuota({ teamId, count: 3 })).toEqual({ allowed: true, dailyLimit: 5, dailyRemaining: 2, monthlyLimit: 6, monthlyRemaining: 3 });
    expect(await auth.call.consumeQuota({ teamId, count: 3 })).toMatchObject({ allowed: false, dailyRemaining: 2, monthlyRemaining: 3 });
    await auth.call.updateTeamLimits({ teamId, plan: 0, dailyEmailLimit: 10, rateLimits: {} });
    // The day has room, the month not: nothing is taken from either.
    expect(await auth.call.consumeQuota({ teamId, count: 4 })).toMatchObject({ allowed: false, dailyRemaining: 7, monthlyRemaining: 3 });
    expect(await auth.call.consumeQuota({ teamId, count: 3 })).toMatchObject({ allowed: true, dailyRemaining: 4, monthlyRemaining: 0 });
    await auth.call.updateTeamLimits({ teamId, plan: 0, monthlyEmailLimit: -1, rateLimits: {} });
    expect(await auth.call.consumeQuota({ teamId, count: 4 })).toMatchObject({ allowed: true, dailyRemaining: 0, monthlyLimit: -1, monthlyRemaining: -1 });
  });
});

describe('admission (Admit, FoldRateLimits, ReleaseQuota)', () => {
  const SEND = authV1.RateLimitFamily.RATE_LIMIT_FAMILY_SEND_EMAIL;

  it('Admit authenticates a key and returns the team\'s rate limits in force; unknown tokens and teams are refused', async () => {
    const { teamId, userId } = await newTeam('Admit');
    await auth.call.updateTeamLimits({ teamId, plan: 0, rateLimits: { SEND_EMAIL: 7 } });
    const { token, apiKey } = await auth.call.createApiKey({ teamId, name: 'k', permission: authV1.Permission.PERMISSION_SENDING, domainId: 'dom_9', createdByUserId: userId });
    const admitted = await auth.call.admit({ token, teamId: '', quotaMin: 0, quotaMax: 0 });
    expect(admitted).toMatchObject({ teamId, keyId: apiKey!.id, userId, permission: authV1.Permission.PERMISSION_SENDING, domainId: 'dom_9', quotaAllowed: true, quotaGranted: 0 });
    expect(admitted.rateLimits).toEqual({ SEND_EMAIL: 7, BATCH_EMAIL: 1000, READ_EMAIL: 100, FEEDBACK_LIST: 100, CONTACT: 500, BULK_CONTACT: 100, DEFAULT: 300 });
    expect(await code(auth.call.admit({ token: 'mf_' + 'x'.repeat(40), teamId, quotaMin: 0, quotaMax: 0 }))).toBe('UNAUTHENTICATED');
    expect(await code(auth.call.admit({ token: '', teamId: 'team_missing', quotaMin: 1, quotaMax: 1 }))).toBe('NOT_FOUND');
    expect(await code(auth.call.admit({ token: '', teamId: '', quotaMin: 1, quotaMax: 1 }))).toBe('INVALID_ARGUMENT');
    await auth.call.deleteApiKey({ teamId, keyId: apiKey!.id });
    expect(await code(auth.call.admit({ token, teamId: '', quotaMin: 0, quotaMax: 0 }))).toBe('UNAUTHENTICATED');
  });

  it('Admit reserves quota between min and max, never past the day or the month; ReleaseQuota gives it back', async () => {
    const { teamId } = await newTeam('Reserve');
    await auth.call.updateTeamLimits({ teamId, plan: 0, dailyEmailLimit: 50, monthlyEmailLimit: 60, rateLimits: {} });
    const first = await auth.call.admit({ token: '', teamId, quotaMin: 2, quotaMax: 100 });
    // The block beyond the send is capped at a tenth of the limits (5 of 50).
    expect(first).toMatchObject({ quotaAllowed: true, quotaGranted: 7, dailyLimit: 50, dailyRemaining: 43, monthlyLimit: 60, monthlyRemaining: 53 });
    expect(first.quotaDay).toBe(new Date().toISOString().slice(0, 10));
    expect(await auth.call.admit({ token: '', teamId, quotaMin: 44, quotaMax: 44 })).toMatchObject({ quotaAllowed: false, quotaGranted: 0, dailyRemaining: 43 });
    expect(await auth.call.admit({ token: '', teamId, quotaMin: 40, quotaMax: 45 })).toMatchObject({ quotaAllowed: true, quotaGranted: 43, dailyRemaining: 0, monthlyRemaining: 10 });
    await auth.call.releaseQuota({ teamId, day: first.quotaDay, count: 5 });
    expect(await auth.call.admit({ token: '', teamId, quotaMin: 5, quotaMax: 5 })).toMatchObject({ quotaAllowed: true, dailyRemaining: 0, monthlyRemaining: 10 });
    expect(await code(auth.call.releaseQuota({ teamId, day: 'yesterday', count: 1 }))).toBe('INVALID_ARGUMENT');
    expect(await code(auth.call.releaseQuota({ teamId, day: first.quotaDay, count: 0 }))).toBe('INVALID_ARGUMENT');
  });

  it('FoldRateLimits adds every replica\'s counts to one shared window and returns it with the limit', async () => {
    const { teamId } = await newTeam('Fold');
    await auth.call.updateTeamLimits({ teamId, plan: 0, rateLimits: { SEND_EMAIL: 40 } });
    const windowStartMs = Math.floor(Date.now() / 60_000) * 60_000;
    const a = await auth.call.foldRateLimits({ counts: [{ teamId, family: SEND, windowStartMs, count: 5, limit: 0 }] });
    expect(a.counts).toEqual([{ teamId, family: SEND, windowStartMs, count: 5, limit: 40 }]);
    const b = await auth.call.foldRateLimits({
      counts: [
        { teamId, family: SEND, windowStartMs, count: 3, limit: 0 },
        { teamId: 'team_missing', family: SEND, windowStartMs, count: 3, limit: 0 },
        { teamId, family: authV1.RateLimitFamily.RATE_LIMIT_FAMILY_CONTACT, windowStartMs, count: 0, limit: 0 },
      ],
    });
    // Counts of an unknown team are dropped; a count of 0 only reads.
    expect(b.counts).toEqual([
      { teamId, family: SEND, windowStartMs, count: 8, limit: 40 },
      { teamId, family: authV1.RateLimitFamily.RATE_LIMIT_FAMILY_CONTACT, windowStartMs, count: 0, limit: 500 },
    ]);
    expect(await code(auth.call.foldRateLimits({ counts: [{ teamId, family: SEND, windowStartMs: windowStartMs + 1, count: 1, limit: 0 }] }))).toBe('INVALID_ARGUMENT');
    expect(await code(auth.call.foldRateLimits({ counts: [{ teamId, family: 0, windowStartMs, count: 1, limit: 0 }] }))).toBe('INVALID_ARGUMENT');
  });
});
