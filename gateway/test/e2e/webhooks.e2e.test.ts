import { createHmac, randomBytes } from 'node:crypto';
import { killChild, loadTestCa, startChild, startHttpsReceiver, type HttpsReceiver, type RecordedRequest, type ResponsePlan, type TestCa } from '@mailfleet/testkit';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiAt, createTeam, gatewayUrl } from './helpers.js';

const api = apiAt(gatewayUrl());

interface Webhook {
  id: string; url: string; description: string | null; eventTypes: string[]; status: string; secret: string; apiVersion: string | null;
  consecutiveFailures: number; lastSuccessAt: string | null; lastFailureAt: string | null; createdAt: string; updatedAt: string; teamId: string;
  createdByUserId: string;
}
interface Delivery {
  id: string; type: string; createdAt: string; updatedAt: string; teamId: string; status: string; webhookId: string; eventId: string; payload: string;
  attempt: number; nextAttemptAt: string | null; lastError: string | null; responseStatus: number | null; responseTimeMs: number | null; responseText: string | null;
}
interface Envelope { id: string; type: string; createdAt: string; data: Record<string, unknown> }

let ca: TestCa;
let receiver: HttpsReceiver;
let team: { teamId: string; token: string };
/** Answers by path: each test scripts its own endpoint on the one receiver. */
const routes = new Map<string, (req: RecordedRequest) => ResponsePlan>();
let pathSeq = 0;

beforeAll(async () => {
  ca = await loadTestCa(inject('testCaDir'));
  receiver = await startHttpsReceiver({ ca });
  receiver.setResponse((req) => routes.get(req.path)?.(req) ?? {});
  team = await createTeam('Webhooks Team');
});
afterAll(async () => {
  await receiver?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const uniqueDomain = (label: string) => `${label}-${randomBytes(4).toString('hex')}.mailfleet-e2e.test`;
const body = (r: RecordedRequest) => JSON.parse(r.rawBody.toString('utf8')) as Envelope;
const validSignature = (r: RecordedRequest, secret: string) =>
  r.headers['x-service-signature'] === `sha256=${createHmac('sha256', secret).update(r.rawBody).digest('hex')}`;

async function createWebhook(eventTypes: string[], opts: { path?: string; url?: string; token?: string; secret?: string; description?: string } = {}) {
  const path = opts.path ?? `/e2e-${++pathSeq}`;
  const res = await api('POST', '/v1/webhooks', {
    token: opts.token ?? team.token,
    body: { url: opts.url ?? `${receiver.url}${path}`, eventTypes, ...(opts.secret ? { secret: opts.secret } : {}), ...(opts.description ? { description: opts.description } : {}) },
  });
  expect(res.status).toBe(200);
  return { webhook: res.body as Webhook, path };
}

async function getWebhook(id: string): Promise<Webhook> {
  const res = await api('GET', `/v1/webhooks/${id}`, { token: team.token });
  expect(res.status).toBe(200);
  return res.body as Webhook;
}

async function patchWebhook(id: string, patch: Record<string, unknown>): Promise<Webhook> {
  const res = await api('PATCH', `/v1/webhooks/${id}`, { token: team.token, body: patch });
  expect(res.status).toBe(200);
  return res.body as Webhook;
}

async function addDomain(name = uniqueDomain('hook')): Promise<{ id: string; name: string }> {
  const res = await api('POST', '/v1/domains', { token: team.token, body: { name, region: 'us-east-1' } });
  expect(res.status).toBe(200);
  return res.body as { id: string; name: string };
}

async function deliveries(webhookId: string, query = ''): Promise<{ data: Delivery[]; count: number; page: number; limit: number }> {
  const res = await api('GET', `/v1/webhooks/${webhookId}/deliveries${query}`, { token: team.token });
  expect(res.status).toBe(200);
  return res.body as { data: Delivery[]; count: number; page: number; limit: number };
}

const at = (path: string) => receiver.requests().filter((r) => r.path === path);

describe('webhooks CRUD (SPEC 4.13)', () => {
  it('creates ACTIVE with the full secret once; get, list, update and delete show it masked', async () => {
    const { webhook } = await createWebhook(['email.delivered', 'domain.created'], { description: 'prod hooks' });
    expect(webhook).toMatchObject({
      url: `${receiver.url}/e2e-${pathSeq}`, description: 'prod hooks', eventTypes: ['email.delivered', 'domain.created'], status: 'ACTIVE',
      apiVersion: null, consecutiveFailures: 0, lastSuccessAt: null, lastFailureAt: null, teamId: team.teamId,
    });
    expect(webhook.secret).toMatch(/^whsec_[0-9A-Za-z]{32}$/);
    expect(typeof webhook.createdByUserId).toBe('string');
    expect(webhook.createdByUserId.length).toBeGreaterThan(0);
    expect(Date.parse(webhook.createdAt)).not.toBeNaN();
    const masked = `whsec_****${webhook.secret.slice(-4)}`;

    expect(await getWebhook(webhook.id)).toEqual({ ...webhook, secret: masked });
    const list = await api('GET', '/v1/webhooks', { token: team.token });
    expect((list.body as Webhook[]).find((w) => w.id === webhook.id)?.secret).toBe(masked);

    const paused = await patchWebhook(webhook.id, { active: false, description: null, eventTypes: ['contact.created'] });
    expect(paused).toMatchObject({ status: 'PAUSED', description: null, eventTypes: ['contact.created'], secret: masked });
    expect((await patchWebhook(webhook.id, { active: true })).status).toBe('ACTIVE');
    const rotated = await patchWebhook(webhook.id, { rotateSecret: true });
    expect(rotated.secret).toMatch(/^whsec_[0-9A-Za-z]{32}$/);
    expect(rotated.secret).not.toBe(webhook.secret);
    expect((await patchWebhook(webhook.id, { secret: 'my-chosen-secret-0042' })).secret).toBe('my-chosen-secret-0042');
    expect((await getWebhook(webhook.id)).secret).toBe('****0042');

    const deleted = await api('DELETE', `/v1/webhooks/${webhook.id}`, { token: team.token });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ id: webhook.id, secret: '****0042', status: 'ACTIVE' });
    expect(await api('GET', `/v1/webhooks/${webhook.id}`, { token: team.token })).toMatchObject({ status: 404, body: { code: 'NOT_FOUND', message: 'Webhook not found' } });
    expect((await api('DELETE', `/v1/webhooks/${webhook.id}`, { token: team.token })).status).toBe(404);
  });

  it('refuses invalid parameters with 400 {code, message}', async () => {
    const post = (b: unknown) => api('POST', '/v1/webhooks', { token: team.token, body: b });
    const url = `${receiver.url}/never`;
    for (const [b, message] of [
      [{ url: 'http://example.com/hook', eventTypes: ['email.sent'] }, /HTTPS/],
      [{ url: 'not a url', eventTypes: ['email.sent'] }, /HTTPS URL/],
      [{ url, eventTypes: ['webhook.test'] }, /webhook\.test cannot be subscribed/],
      [{ url, eventTypes: ['email.exploded'] }, /Unknown event type "email.exploded"/],
      [{ url, eventTypes: ['key.revoked'] }, /Unknown event type/],
      [{ url, eventTypes: [] }, /eventTypes/],
      [{ url, eventTypes: ['email.sent'], secret: 'too-short' }, /secret/],
      [{ eventTypes: ['email.sent'] }, /url/],
      [{ url }, /eventTypes/],
    ] as const) {
      const res = await post(b);
      expect(res.status, JSON.stringify(b)).toBe(400);
      expect((res.body as { code: string }).code).toBe('BAD_REQUEST');
      expect((res.body as { message: string }).message).toMatch(message);
    }
    const { webhook } = await createWebhook(['email.sent']);
    expect((await api('PATCH', `/v1/webhooks/${webhook.id}`, { token: team.token, body: { url: 'http://x.example/' } })).status).toBe(400);
    expect((await api('PATCH', `/v1/webhooks/${webhook.id}`, { token: team.token, body: { rotateSecret: true, secret: '0123456789abcdefXYZ' } })).status).toBe(400);
    expect((await api('PATCH', `/v1/webhooks/${webhook.id}`, { token: team.token, body: { eventTypes: ['webhook.test'] } })).status).toBe(400);
    expect((await api('PATCH', '/v1/webhooks/wh_missing', { token: team.token, body: { active: false } }))).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } });
  });

  it('another team\'s webhook is not found', async () => {
    const { webhook } = await createWebhook(['email.sent']);
    const other = await createTeam('Webhooks Other Team');
    for (const [method, path] of [
      ['GET', `/v1/webhooks/${webhook.id}`], ['PATCH', `/v1/webhooks/${webhook.id}`], ['DELETE', `/v1/webhooks/${webhook.id}`],
      ['POST', `/v1/webhooks/${webhook.id}/test`], ['GET', `/v1/webhooks/${webhook.id}/deliveries`],
    ] as const) {
      const res = await api(method, path, { token: other.token, ...(method === 'PATCH' ? { body: { active: false } } : {}) });
      expect(res, `${method} ${path}`).toMatchObject({ status: 404, body: { code: 'NOT_FOUND', message: 'Webhook not found' } });
    }
    expect((await api('GET', '/v1/webhooks', { token: other.token })).body).toEqual([]);
    expect((await getWebhook(webhook.id)).status).toBe('ACTIVE');
  });

  it('a domain-restricted key may not manage webhooks (they see every domain\'s events)', async () => {
    const domain = await addDomain();
    const key = await api('POST', '/v1/api-keys', { token: team.token, body: { name: 'one domain', domainId: domain.id } });
    expect(key.status).toBe(200);
    const restricted = (key.body as { token: string }).token;
    for (const [method, path] of [['GET', '/v1/webhooks'], ['POST', '/v1/webhooks']] as const) {
      const res = await api(method, path, { token: restricted, ...(method === 'POST' ? { body: { url: `${receiver.url}/x`, eventTypes: ['email.sent'] } } : {}) });
      expect(res).toMatchObject({ status: 403, body: { code: 'FORBIDDEN', message: 'A domain-restricted API key cannot manage webhooks' } });
    }
  });
});

describe('webhook delivery (SPEC 6)', () => {
  it('delivers subscribed domain events signed over the raw body; unsubscribed types never arrive', async () => {
    const { webhook, path } = await createWebhook(['domain.created']);
    const d1 = await addDomain();
    // domain.updated and domain.deleted: not subscribed.
    expect((await api('PATCH', `/v1/domains/${d1.id}`, { token: team.token, body: { openTracking: true } })).status).toBe(200);
    expect((await api('DELETE', `/v1/domains/${d1.id}`, { token: team.token })).status).toBe(200);
    const d2 = await addDomain();
    await expect.poll(() => at(path).length, { timeout: 20_000 }).toBe(2);
    await sleep(1_000);

    const got = at(path);
    expect(got).toHaveLength(2);
    expect(got.map((r) => body(r).type)).toEqual(['domain.created', 'domain.created']);
    expect(got.map((r) => body(r).data.id).sort()).toEqual([d1.id, d2.id].sort());
    for (const r of got) {
      expect(r.method).toBe('POST');
      expect(r.headers['content-type']).toBe('application/json');
      expect(validSignature(r, webhook.secret)).toBe(true);
      const e = body(r);
      expect(Object.keys(e)).toEqual(['id', 'type', 'createdAt', 'data']);
      expect(e.id).toMatch(/^evt_/);
      expect(Date.parse(e.createdAt)).not.toBeNaN();
      expect(e.data).toMatchObject({ status: 'NOT_STARTED', region: 'us-east-1' });
    }
    expect(body(got.find((r) => body(r).data.id === d1.id)!).data).toMatchObject({ name: d1.name });

    const log = await deliveries(webhook.id);
    expect(log.count).toBe(2);
    expect(log.data.every((d) => d.status === 'SUCCESS' && d.attempt === 1 && d.responseStatus === 200 && d.type === 'domain.created')).toBe(true);
    expect(new Set(log.data.map((d) => d.eventId))).toEqual(new Set(got.map((r) => body(r).id)));
    expect((await getWebhook(webhook.id)).lastSuccessAt).not.toBeNull();
  });

  it('a receiver answering 500 three times gets the event on the 4th attempt', async () => {
    const path = `/flaky-${++pathSeq}`;
    let n = 0;
    routes.set(path, () => (++n <= 3 ? { status: 500, body: 'not now' } : { status: 200, body: 'got it' }));
    const { webhook } = await createWebhook(['domain.created'], { path });
    const d = await addDomain();
    await expect.poll(() => at(path).length, { timeout: 30_000 }).toBe(4);
    const got = at(path);
    expect(new Set(got.map((r) => body(r).id)).size).toBe(1);
    expect(body(got[3]!).data.id).toBe(d.id);
    expect(got.every((r) => validSignature(r, webhook.secret))).toBe(true);
    await expect.poll(async () => (await deliveries(webhook.id)).data[0]?.status, { timeout: 10_000 }).toBe('SUCCESS');
    expect((await deliveries(webhook.id)).data[0]).toMatchObject({ attempt: 4, responseStatus: 200, responseText: 'got it', lastError: null, nextAttemptAt: null });
    expect(await getWebhook(webhook.id)).toMatchObject({ status: 'ACTIVE', consecutiveFailures: 0 });
  });

  it('a receiver down long enough turns the webhook FAILED; PATCH active:true resumes', async () => {
    const down = await startHttpsReceiver({ ca });
    const port = down.port;
    const { webhook } = await createWebhook(['domain.created'], { url: `${down.url}/down` });
    await down.close();

    await addDomain();
    await addDomain();
    await expect.poll(async () => (await getWebhook(webhook.id)).status, { timeout: 60_000, interval: 500 }).toBe('FAILED');
    const failed = await getWebhook(webhook.id);
    expect(failed.consecutiveFailures).toBe(2);
    expect(failed.lastFailureAt).not.toBeNull();
    const log = await deliveries(webhook.id, '?status=FAILED');
    expect(log.count).toBe(2);
    expect(log.data.every((d) => d.attempt === 4 && d.responseStatus === null && /ECONNREFUSED/.test(d.lastError ?? ''))).toBe(true);

    const back = await startHttpsReceiver({ ca, port });
    try {
      const whileFailed = await addDomain();
      await sleep(1_500);
      expect(back.requests()).toHaveLength(0);

      expect(await patchWebhook(webhook.id, { active: true })).toMatchObject({ status: 'ACTIVE', consecutiveFailures: 0 });
      const after = await addDomain();
      const [r] = await back.waitForRequests(1, 20_000);
      expect(body(r!).data.id).toBe(after.id);
      expect(validSignature(r!, webhook.secret)).toBe(true);
      await sleep(500);
      expect(back.requests().map((x) => body(x).data.id)).not.toContain(whileFailed.id);
      // What failed while the endpoint was down can be sent again by hand.
      const retry = await api('POST', `/v1/webhooks/${webhook.id}/deliveries/${log.data[0]!.id}/retry`, { token: team.token });
      expect(retry.status).toBe(200);
      expect(retry.body).toMatchObject({ id: log.data[0]!.id, status: 'SUCCESS', attempt: 5, responseStatus: 200, eventId: log.data[0]!.eventId });
      expect(back.requests().map((x) => body(x).id)).toContain(log.data[0]!.eventId);
    } finally {
      await back.close();
    }
  });
});

describe('POST /v1/webhooks/{id}/test', () => {
  it('answers the delivery record of a webhook.test event, or 500 {code, message} when it fails', async () => {
    const path = `/test-${++pathSeq}`;
    let plan: ResponsePlan = { status: 200, body: 'pong' };
    routes.set(path, () => plan);
    const { webhook } = await createWebhook(['email.sent'], { path, secret: 'test-endpoint-secret-01' });
    const ok = await api('POST', `/v1/webhooks/${webhook.id}/test`, { token: team.token });
    expect(ok.status).toBe(200);
    const d = ok.body as Delivery;
    expect(d).toMatchObject({
      type: 'webhook.test', status: 'SUCCESS', teamId: team.teamId, webhookId: webhook.id, attempt: 1, nextAttemptAt: null, lastError: null,
      responseStatus: 200, responseText: 'pong',
    });
    expect(typeof d.responseTimeMs).toBe('number');
    expect(JSON.parse(d.payload)).toEqual({ id: d.eventId, type: 'webhook.test', createdAt: expect.any(String), data: { message: expect.any(String) } });
    const [r] = at(path);
    expect(r!.rawBody.toString('utf8')).toBe(d.payload);
    expect(validSignature(r!, 'test-endpoint-secret-01')).toBe(true);

    plan = { status: 500 };
    const bad = await api('POST', `/v1/webhooks/${webhook.id}/test`, { token: team.token });
    expect(bad).toMatchObject({ status: 500, body: { code: 'INTERNAL_SERVER_ERROR', message: 'Webhook test delivery failed: receiver answered 500' } });
    expect((await api('POST', '/v1/webhooks/wh_missing/test', { token: team.token })).status).toBe(404);
    // Tests are in the delivery log too; they leave the failure counters alone.
    expect((await deliveries(webhook.id)).data.map((x) => x.status)).toEqual(['FAILED', 'SUCCESS']);
    expect(await getWebhook(webhook.id)).toMatchObject({ consecutiveFailures: 0, status: 'ACTIVE' });
  });
});

describe('crash recovery', () => {
  it('the webhooks service killed mid-delivery delivers every event after restart (duplicates allowed, ids equal)', { timeout: 120_000 }, async () => {
    const path = `/crash-${++pathSeq}`;
    routes.set(path, () => ({ delayMs: 700 }));
    const { webhook } = await createWebhook(['domain.created'], { path });
    const domains: string[] = [];
    for (let i = 0; i < 6; i++) domains.push((await addDomain()).id);
    await expect.poll(() => at(path).length, { timeout: 20_000 }).toBeGreaterThanOrEqual(1);
    await killChild('webhooks');
    // Events of the outage wait in the stream.
    for (let i = 0; i < 2; i++) domains.push((await addDomain()).id);
    await startChild('webhooks');

    // Deliveries claimed by the dead process come back when their lease lapses; an event it had taken from the
    // stream but not acknowledged comes back from JetStream after the consumer's ack wait (30 s).
    const arrived = () => new Set(at(path).map((r) => body(r).data.id as string));
    await expect.poll(() => domains.filter((id) => !arrived().has(id)), { timeout: 90_000, interval: 500 }).toEqual([]);
    const byEvent = new Map<string, string>();
    for (const r of at(path)) {
      const e = body(r);
      expect(validSignature(r, webhook.secret)).toBe(true);
      // A duplicate carries the same event id for the same domain.
      if (byEvent.has(e.data.id as string)) expect(byEvent.get(e.data.id as string)).toBe(e.id);
      byEvent.set(e.data.id as string, e.id);
    }
  });
});
