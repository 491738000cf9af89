import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiAt, createTeam, gatewayUrl, mailfleet, startSecondGateway } from './helpers.js';

const api = apiAt(gatewayUrl());
let second: Awaited<ReturnType<typeof startSecondGateway>>;
let api2: ReturnType<typeof apiAt>;

beforeAll(async () => {
  second = await startSecondGateway();
  api2 = apiAt(second.url);
});
afterAll(async () => second?.stop());

describe('health and version are public', () => {
  it('answers without a key on /v1 and /api/v1', async () => {
    const h = await api('GET', '/v1/health');
    expect(h.status).toBe(200);
    expect(h.body).toMatchObject({ status: 'ok' });
    expect((await api('GET', '/api/v1/version')).status).toBe(200);
  });
  it('everything else needs a key', async () => {
    expect((await api('GET', '/v1/api-keys')).status).toBe(401);
    expect((await api('GET', '/v1/api-keys', { token: 'mf_' + 'A'.repeat(40) })).body).toEqual({ code: 'UNAUTHORIZED', message: 'Invalid API key' });
  });
});

describe('the mailfleet CLI', () => {
  it('creates a team with a FULL key, lists teams, and fails clearly on bad input', async () => {
    const { teamId, token } = await createTeam('CLI Team');
    expect(teamId).toMatch(/^team_/);
    expect(token).toMatch(/^mf_/);
    const list = await mailfleet(['team', 'list', '--json']);
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as { id: string }[]).some((t) => t.id === teamId)).toBe(true);
    const bad = await mailfleet(['team', 'create', '--json']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--name is required');
    const unknown = await mailfleet(['key', 'create', '--team', 'team_nope']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('NOT_FOUND');
    const key = await mailfleet(['key', 'create', '--team', teamId, '--permission', 'SENDING', '--json']);
    expect(key.code).toBe(0);
    expect(JSON.parse(key.stdout)).toMatchObject({ teamId, permission: 'SENDING' });
  });
});

describe('API keys (SPEC 4.1)', () => {
  it('creates, lists and deletes keys; a deleted key is refused at once on both gateways', async () => {
    const { token } = await createTeam('Keys Team');
    const created = await api('POST', '/v1/api-keys', { token, body: { name: 'ci key' } });
    expect(created.status).toBe(200);
    const newToken = (created.body as { token: string }).token;
    expect(created.body).toEqual({ token: newToken });

    // Both gateways accept it (and cache it).
    expect((await api('GET', '/v1/settings', { token: newToken })).status).toBe(200);
    expect((await api2('GET', '/v1/settings', { token: newToken })).status).toBe(200);

    const list = await api('GET', '/v1/api-keys', { token });
    const keys = list.body as { id: string; name: string; partialToken: string; permission: string; createdAt: string; lastUsed: string | null }[];
    expect(keys.map((k) => k.name)).toEqual(['ci key', 'default']);
    const ciKey = keys[0]!;
    expect(ciKey).toMatchObject({ permission: 'FULL', partialToken: `${newToken.slice(0, 7)}...${newToken.slice(-4)}` });
    expect(JSON.stringify(list.body)).not.toContain(newToken);

    const del = await api('DELETE', `/v1/api-keys/${ciKey.id}`, { token });
    expect(del).toMatchObject({ status: 200, body: { success: true } });
    // The very next request on either replica is refused.
    expect((await api2('GET', '/v1/settings', { token: newToken })).status).toBe(401);
    expect((await api('GET', '/v1/settings', { token: newToken })).status).toBe(401);
    expect((await api('DELETE', `/v1/api-keys/${ciKey.id}`, { token })).status).toBe(404);
  });

  it('another team\'s key id is 404', async () => {
    const a = await createTeam('Team A');
    const b = await createTeam('Team B');
    const keys = (await api('GET', '/v1/api-keys', { token: a.token })).body as { id: string }[];
    const res = await api('DELETE', `/v1/api-keys/${keys[0]!.id}`, { token: b.token });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ code: 'NOT_FOUND', message: 'API key not found' });
    expect((await api('GET', '/v1/settings', { token: a.token })).status).toBe(200);
  });

  it('validates the body', async () => {
    const { token } = await createTeam('Validation');
    const res = await api('POST', '/v1/api-keys', { token, body: { name: '' } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'BAD_REQUEST' });
    expect((await api('POST', '/v1/api-keys', { token, body: { name: 'x', permission: 'ADMIN' } })).status).toBe(400);
  });

  it('records lastUsed without a write per request', async () => {
    const { token } = await createTeam('Last Used');
    await api('GET', '/v1/settings', { token });
    // The gateway flushes coalesced touches periodically (KEY_TOUCH_INTERVAL_MS).
    await expect.poll(async () => ((await api('GET', '/v1/api-keys', { token })).body as { lastUsed: string | null }[])[0]?.lastUsed, { timeout: 20_000, interval: 500 }).not.toBeNull();
  });
});

describe('permissions', () => {
  it('a SENDING key is refused everything but sending', async () => {
    const { token } = await createTeam('Sender');
    const { body } = await api('POST', '/v1/api-keys', { token, body: { name: 'send only', permission: 'SENDING' } });
    const sending = (body as { token: string }).token;
    for (const path of ['/v1/domains', '/v1/api-keys', '/v1/settings', '/v1/teams']) {
      const res = await api('GET', path, { token: sending });
      expect(res.status, path).toBe(403);
      expect((res.body as { message?: string; error?: string }).message ?? (res.body as { error?: string }).error).toContain('SENDING');
    }
  });
});

describe('teams and settings', () => {
  it('lists the caller\'s teams and guards others', async () => {
    const a = await createTeam('Alpha Mail');
    const b = await createTeam('Beta Mail');
    const list = await api('GET', '/v1/teams', { token: a.token });
    expect(list.status).toBe(200);
    expect(list.body).toEqual([expect.objectContaining({ id: a.teamId, name: 'Alpha Mail', plan: 'FREE' })]);
    const one = await api('GET', `/v1/teams/${a.teamId}`, { token: a.token });
    expect(one.body).toMatchObject({ id: a.teamId, slug: expect.stringMatching(/^alpha-mail/) as unknown });
    expect((await api('GET', `/v1/teams/${b.teamId}`, { token: a.token })).status).toBe(403);
    expect((await api('GET', '/v1/teams/team_nope', { token: a.token })).status).toBe(404);
    expect((await api('GET', '/v1/settings', { token: a.token })).body).toEqual({ id: a.teamId, name: 'Alpha Mail', plan: 'FREE', dailyEmailLimit: 100, monthlyEmailLimit: 3000 });
  });
});

describe('rate limits hold across gateway replicas', () => {
  it('the team\'s budget is shared: the request past it is 429 with headers on either gateway', async () => {
    const { teamId, token } = await createTeam('Limited');
    const set = await mailfleet(['team', 'update', '--team', teamId, '--rate-limit', 'DEFAULT=10', '--json']);
    expect(set.code).toBe(0);
    // Fixed one-minute windows: start early in a minute so the eleven requests share one.
    const second = new Date().getUTCSeconds();
    if (second > 45) await new Promise((r) => setTimeout(r, (61 - second) * 1000));
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await (i % 2 === 0 ? api : api2)('GET', '/v1/settings', { token });
      statuses.push(res.status);
      expect(res.headers.get('ratelimit-limit')).toBe('10');
      expect(res.headers.get('ratelimit-remaining')).toBe(String(9 - i));
    }
    expect(statuses.every((s) => s === 200)).toBe(true);
    const over = await api2('GET', '/v1/settings', { token });
    expect(over.status).toBe(429);
    expect(over.body).toMatchObject({ code: 'RATE_LIMITED' });
    expect(over.headers.get('ratelimit-remaining')).toBe('0');
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await api('GET', '/v1/settings', { token })).status).toBe(429);
  });
});
