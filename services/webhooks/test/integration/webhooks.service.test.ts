import { status, type ServiceError } from '@grpc/grpc-js';
import { createGrpcClient, createLogger, startService, type RunningService, type UpstreamClient } from '@mailfleet/kit';
import { webhooksV1 } from '@mailfleet/proto';
import {
  createTestCa, isolatedNats, startHttpsReceiver, stopNats, testMongoUrl, uniqueDbName, type HttpsReceiver, type RecordedRequest, type ResponsePlan,
  type TestCa,
} from '@mailfleet/testkit';
import fsp from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemResolver } from '../../src/clients/endpoint.client.js';
import { loadWebhooksConfig } from '../../src/config.js';
import { createWebhooksServer } from '../../src/server.js';
import { bodyOf, connectPublisher, newTeamId, signatureValid, type Publisher } from './helpers.js';

const logger = createLogger({ service: 'webhooks-test', level: 'silent' });
const dbName = uniqueDbName('webhooks');
const PINNED_NAME = 'hooks.mailfleet.test';
const { DELIVERY_STATUS_SUCCESS, DELIVERY_STATUS_FAILED, DELIVERY_STATUS_PENDING } = webhooksV1.DeliveryStatus;
const { WEBHOOK_STATUS_ACTIVE, WEBHOOK_STATUS_PAUSED, WEBHOOK_STATUS_FAILED } = webhooksV1.WebhookStatus;

let natsInstance: string;
let svc: RunningService;
let client: UpstreamClient<webhooksV1.WebhooksServiceClient>;
let publisher: Publisher;
let ca: TestCa;
let receiver: HttpsReceiver;
let pinnedReceiver: HttpsReceiver;
/** Answers by path, so each test scripts its own endpoint on the one receiver. */
const routes = new Map<string, (req: RecordedRequest) => ResponsePlan | Promise<ResponsePlan>>();

beforeAll(async () => {
  const nats = await isolatedNats();
  natsInstance = nats.instance;
  ca = await createTestCa();
  receiver = await startHttpsReceiver({ ca });
  receiver.setResponse((req) => routes.get(req.path.split('?')[0]!)?.(req) ?? {});
  pinnedReceiver = await startHttpsReceiver({ ca, hosts: [PINNED_NAME] });
  const config = loadWebhooksConfig({
    GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: testMongoUrl(), MONGO_DB: dbName, NATS_URL: nats.url, LOG_LEVEL: 'silent',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_CLAIM_LEASE_MS: '8000', WEBHOOK_RETRY_BASE_MS: '100',
    WEBHOOK_RETRY_MAX_MS: '1000', WEBHOOK_MAX_ATTEMPTS: '4', WEBHOOK_FAILURE_THRESHOLD: '2', WEBHOOK_POLL_INTERVAL_MS: '100',
    WEBHOOK_PER_WEBHOOK_CONCURRENCY: '2',
  });
  svc = await startService({
    name: 'webhooks', config, env: {}, logger,
    build: (infra) => createWebhooksServer({
      config, infra, extraCa: [ca.certPem],
      // The pinning test's name exists only here: the connection must go where this resolver said.
      resolver: async (host) => (host === PINNED_NAME ? [{ address: '127.0.0.1', family: 4 }] : systemResolver(host)),
    }),
  });
  client = createGrpcClient({ name: 'webhooks', address: `127.0.0.1:${svc.grpc.port}`, ctor: webhooksV1.WebhooksServiceClient, logger, deadlineMs: 15_000 });
  publisher = await connectPublisher(nats.url);
});

afterAll(async () => {
  client?.close();
  await publisher?.close();
  await svc?.infra.mongo.db.dropDatabase();
  await svc?.shutdown('test over');
  await receiver?.close();
  await pinnedReceiver?.close();
  await stopNats({ instance: natsInstance }).catch(() => undefined);
  if (ca) await fsp.rm(ca.dir, { recursive: true, force: true });
});

const code = (p: Promise<unknown>) => p.then(() => 'OK', (e: ServiceError) => status[e.code]);
const at = (path: string) => receiver.requests().filter((r) => r.path === path);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let pathSeq = 0;

async function webhookFor(teamId: string, eventTypes: string[], opts: { path?: string; url?: string } = {}) {
  const path = opts.path ?? `/hook-${++pathSeq}`;
  const res = await client.call.createWebhook({ teamId, url: opts.url ?? `${receiver.url}${path}`, eventTypes, createdByUserId: 'user_it' });
  return { webhook: res.webhook!, path };
}

async function deliveriesOf(teamId: string, webhookId: string) {
  return (await client.call.listWebhookDeliveries({ teamId, webhookId, page: 1, limit: 100, status: 0 })).deliveries;
}

describe('CRUD', () => {
  it('stores webhooks per team with the secret in full only at creation', async () => {
    const teamId = newTeamId();
    const { webhook } = await webhookFor(teamId, ['domain.created']);
    expect(webhook).toMatchObject({ status: WEBHOOK_STATUS_ACTIVE, consecutiveFailures: 0, teamId, createdByUserId: 'user_it' });
    expect(webhook.secret).toMatch(/^whsec_[0-9A-Za-z]{32}$/);
    const got = (await client.call.getWebhook({ teamId, webhookId: webhook.id })).webhook!;
    expect(got.secret).toBe(`whsec_****${webhook.secret.slice(-4)}`);
    expect({ ...got, secret: webhook.secret }).toEqual(webhook);
    expect(await code(client.call.getWebhook({ teamId: newTeamId(), webhookId: webhook.id }))).toBe('NOT_FOUND');
    expect(await code(client.call.createWebhook({ teamId, url: 'http://insecure.example.com/', eventTypes: ['email.sent'], createdByUserId: 'u' }))).toBe('INVALID_ARGUMENT');
    const paused = (await client.call.updateWebhook({ teamId, webhookId: webhook.id, active: false, clearDescription: false, rotateSecret: false })).webhook!;
    expect(paused.status).toBe(WEBHOOK_STATUS_PAUSED);
    const deleted = (await client.call.deleteWebhook({ teamId, webhookId: webhook.id })).webhook!;
    expect(deleted).toMatchObject({ id: webhook.id, status: WEBHOOK_STATUS_PAUSED, secret: got.secret });
    expect((await client.call.listWebhooks({ teamId })).webhooks).toEqual([]);
  });
});

describe('delivery', () => {
  it('delivers subscribed public events signed over the raw body; never unsubscribed, internal or other teams\' events', async () => {
    const teamId = newTeamId();
    const { webhook, path } = await webhookFor(teamId, ['domain.created', 'contact.created']);
    const other = await webhookFor(newTeamId(), ['domain.created'], { path });

    await publisher.publish('domain.updated', teamId);
    await publisher.publish('contact.unsubscribed', teamId, { id: 'c_1' });
    await publisher.publish('key.revoked', teamId, { keyId: 'k' });
    const created = await publisher.publish('domain.created', teamId, { id: 'dom_1', name: 'one.example', status: 'NOT_STARTED' });
    const contact = await publisher.publish('contact.created', teamId, { id: 'c_2', email: 'a@example.com', subscribed: false });
    await receiver.waitForRequests(1);
    await expect.poll(() => at(path).length, { timeout: 15_000 }).toBe(2);
    // A last event published after the others: once it arrived, the earlier ones had their chance.
    const marker = await publisher.publish('domain.created', teamId);
    await expect.poll(() => at(path).length, { timeout: 15_000 }).toBe(3);
    await sleep(300);

    const got = at(path);
    expect(got.map((r) => bodyOf(r).id).sort()).toEqual([created.id, contact.id, marker.id].sort());
    for (const r of got) {
      expect(r.method).toBe('POST');
      expect(r.headers['content-type']).toBe('application/json');
      expect(signatureValid(r, webhook.secret)).toBe(true);
      expect(signatureValid(r, other.webhook.secret)).toBe(false);
      expect(r.headers['x-service-event-id']).toBe(bodyOf(r).id);
    }
    const first = got.find((r) => bodyOf(r).id === created.id)!;
    expect(bodyOf(first)).toEqual({ id: created.id, type: 'domain.created', createdAt: created.createdAt, data: created.data });
    expect(Object.keys(bodyOf(first))).toEqual(['id', 'type', 'createdAt', 'data']);

    const records = await deliveriesOf(teamId, webhook.id);
    expect(records).toHaveLength(3);
    expect(records.every((d) => d.status === DELIVERY_STATUS_SUCCESS && d.attempt === 1 && d.responseStatus === 200)).toBe(true);
    expect((await client.call.getWebhook({ teamId, webhookId: webhook.id })).webhook!.lastSuccessAt).toBeInstanceOf(Date);
  });

  it('a receiver answering 500 three times gets the event on the 4th attempt, same id every time', async () => {
    const teamId = newTeamId();
    const path = `/flaky-${++pathSeq}`;
    let n = 0;
    routes.set(path, () => (++n <= 3 ? { status: 500, body: 'try later' } : { status: 200, body: 'thanks' }));
    const { webhook } = await webhookFor(teamId, ['email.sent'], { path });
    const e = await publisher.publish('email.sent', teamId, { id: 'em_1', status: 'SENT', to: ['x@example.com'] });
    await expect.poll(() => at(path).length, { timeout: 20_000 }).toBe(4);
    const got = at(path);
    expect(new Set(got.map((r) => bodyOf(r).id))).toEqual(new Set([e.id]));
    expect(new Set(got.map((r) => r.rawBody.toString()))).toHaveLength(1);
    await expect.poll(async () => (await deliveriesOf(teamId, webhook.id))[0]?.status, { timeout: 10_000 }).toBe(DELIVERY_STATUS_SUCCESS);
    const [d] = await deliveriesOf(teamId, webhook.id);
    expect(d).toMatchObject({ attempt: 4, responseStatus: 200, responseText: 'thanks', eventId: e.id, type: 'email.sent', nextAttemptAt: undefined, lastError: undefined });
    expect(d!.payload).toBe(got[0]!.rawBody.toString());
    expect((await client.call.getWebhook({ teamId, webhookId: webhook.id })).webhook).toMatchObject({ consecutiveFailures: 0, status: WEBHOOK_STATUS_ACTIVE });
    expect((await client.call.getWebhook({ teamId, webhookId: webhook.id })).webhook!.lastFailureAt).toBeInstanceOf(Date);
  });

  it('a receiver down long enough turns the webhook FAILED; it gets nothing until activated, then events flow again', async () => {
    const teamId = newTeamId();
    const path = `/down-${++pathSeq}`;
    let down = true;
    routes.set(path, () => (down ? { drop: true } : {}));
    const { webhook } = await webhookFor(teamId, ['domain.created']);
    await client.call.updateWebhook({ teamId, webhookId: webhook.id, url: `${receiver.url}${path}`, clearDescription: false, rotateSecret: false });
    await publisher.publish('domain.created', teamId);
    await publisher.publish('domain.created', teamId);
    await expect.poll(async () => (await client.call.getWebhook({ teamId, webhookId: webhook.id })).webhook!.status, { timeout: 30_000 })
      .toBe(WEBHOOK_STATUS_FAILED);
    const failed = (await client.call.getWebhook({ teamId, webhookId: webhook.id })).webhook!;
    expect(failed.consecutiveFailures).toBe(2);
    expect(at(path)).toHaveLength(8);
    const records = await deliveriesOf(teamId, webhook.id);
    expect(records.map((d) => [d.status, d.attempt])).toEqual([[DELIVERY_STATUS_FAILED, 4], [DELIVERY_STATUS_FAILED, 4]]);
    expect(records[0]!.lastError).toMatch(/^connection closed by the receiver before its answer/);

    down = false;
    const whileFailed = await publisher.publish('domain.created', teamId);
    await sleep(1_000);
    expect(at(path).some((r) => bodyOf(r).id === whileFailed.id)).toBe(false);

    const active = (await client.call.updateWebhook({ teamId, webhookId: webhook.id, active: true, clearDescription: false, rotateSecret: false })).webhook!;
    expect(active).toMatchObject({ status: WEBHOOK_STATUS_ACTIVE, consecutiveFailures: 0 });
    const after = await publisher.publish('domain.created', teamId);
    await expect.poll(() => at(path).some((r) => bodyOf(r).id === after.id), { timeout: 15_000 }).toBe(true);
    expect(at(path).some((r) => bodyOf(r).id === whileFailed.id)).toBe(false);
  });

  it('holds a pending retry while paused and sends it on activation', async () => {
    const teamId = newTeamId();
    const path = `/held-${++pathSeq}`;
    let n = 0;
    let answer!: () => void;
    const paused = new Promise<void>((r) => (answer = r));
    // The first attempt fails once the pause is in: it lands while the attempt is in flight, before its retry is due.
    routes.set(path, async () => {
      if (++n > 1) return {};
      await paused;
      return { status: 503 };
    });
    const { webhook } = await webhookFor(teamId, ['contact.updated'], { path });
    const e = await publisher.publish('contact.updated', teamId, { id: 'c_9' });
    await expect.poll(() => at(path).length, { timeout: 15_000 }).toBe(1);
    await client.call.updateWebhook({ teamId, webhookId: webhook.id, active: false, clearDescription: false, rotateSecret: false });
    answer();
    // Recorded with its retry due within moments; well past that, nothing more was sent.
    await expect.poll(async () => (await deliveriesOf(teamId, webhook.id))[0]?.lastError, { timeout: 15_000 }).toBe('receiver answered 503');
    await sleep(1_500);
    expect(at(path)).toHaveLength(1);
    expect((await deliveriesOf(teamId, webhook.id))[0]).toMatchObject({ status: DELIVERY_STATUS_PENDING, attempt: 1, lastError: 'receiver answered 503' });
    await client.call.updateWebhook({ teamId, webhookId: webhook.id, active: true, clearDescription: false, rotateSecret: false });
    await expect.poll(async () => (await deliveriesOf(teamId, webhook.id))[0]?.status, { timeout: 15_000 }).toBe(DELIVERY_STATUS_SUCCESS);
    expect(at(path).map((r) => bodyOf(r).id)).toEqual([e.id, e.id]);
  });

  it('a redelivered event (same id, new message) makes no second delivery', async () => {
    const teamId = newTeamId();
    const { webhook, path } = await webhookFor(teamId, ['domain.deleted']);
    const e = await publisher.publish('domain.deleted', teamId);
    await expect.poll(() => at(path).length, { timeout: 15_000 }).toBe(1);
    // A new message id passes the server's duplicate window: what the consumer sees when an event comes again after a crash.
    await publisher.republish(e, `${e.id}-again`);
    const marker = await publisher.publish('domain.deleted', teamId);
    await expect.poll(() => at(path).some((r) => bodyOf(r).id === marker.id), { timeout: 15_000 }).toBe(true);
    expect(at(path).filter((r) => bodyOf(r).id === e.id)).toHaveLength(1);
    expect(await deliveriesOf(teamId, webhook.id)).toHaveLength(2);
  });

  it('one slow endpoint does not hold up the others', async () => {
    const teamId = newTeamId();
    const slowPath = `/slow-${++pathSeq}`;
    let fastIn!: () => void;
    const fastArrived = new Promise<void>((r) => (fastIn = r));
    let inFlight = 0;
    let most = 0;
    let answered = 0;
    let answeredBeforeFast: number | undefined;
    // The slow endpoint answers once the fast one got its event, or after 2.5 s (inside the 3 s attempt timeout).
    routes.set(slowPath, async () => {
      most = Math.max(most, ++inFlight);
      await Promise.race([fastArrived, sleep(2_500)]);
      inFlight--;
      answered++;
      return {};
    });
    await webhookFor(teamId, ['email.delivered'], { path: slowPath });
    const fast = await webhookFor(teamId, ['email.opened']);
    routes.set(fast.path, () => {
      answeredBeforeFast ??= answered;
      fastIn();
      return {};
    });
    for (let i = 0; i < 6; i++) await publisher.publish('email.delivered', teamId);
    await expect.poll(() => at(slowPath).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
    const e = await publisher.publish('email.opened', teamId);
    await expect.poll(() => at(fast.path).length, { timeout: 10_000 }).toBe(1);
    expect(bodyOf(at(fast.path)[0]!).id).toBe(e.id);
    // It came while the slow endpoint's first posts were still unanswered.
    expect(answeredBeforeFast).toBe(0);
    await expect.poll(() => at(slowPath).length, { timeout: 20_000 }).toBe(6);
    // The slow endpoint never had more than its two slots busy; the rest of its events waited for them.
    expect(most).toBeLessThanOrEqual(2);
  });

  it('posts to one endpoint go over kept-alive connections, not one connection each', async () => {
    const teamId = newTeamId();
    const { path } = await webhookFor(teamId, ['email.clicked']);
    for (let i = 0; i < 12; i++) await publisher.publish('email.clicked', teamId);
    await expect.poll(() => at(path).length, { timeout: 20_000 }).toBe(12);
    // Two posts at most in flight to the webhook (WEBHOOK_PER_WEBHOOK_CONCURRENCY): its twelve go over a few
    // pooled connections (a few more if the receiver closed an idle one meanwhile), never twelve handshakes.
    const used = new Set(at(path).map((r) => r.connection));
    expect(used.has(-1)).toBe(false);
    expect(used.size).toBeLessThanOrEqual(4);
  });

  it('a redirect is a failure and is not followed; a slow answer times out', async () => {
    const teamId = newTeamId();
    const path = `/moved-${++pathSeq}`;
    routes.set(path, () => ({ status: 302, headers: { location: `${receiver.url}/elsewhere` } }));
    const { webhook } = await webhookFor(teamId, ['email.bounced'], { path });
    await publisher.publish('email.bounced', teamId);
    await expect.poll(async () => (await deliveriesOf(teamId, webhook.id))[0]?.attempt ?? 0, { timeout: 15_000 }).toBeGreaterThanOrEqual(1);
    const [d] = await deliveriesOf(teamId, webhook.id);
    expect(d).toMatchObject({ responseStatus: 302, lastError: `redirect not followed (HTTP 302 to ${receiver.url}/elsewhere)` });
    expect(at('/elsewhere')).toHaveLength(0);

    const slowPath = `/sleepy-${++pathSeq}`;
    routes.set(slowPath, () => ({ delayMs: 5_000 }));
    const sleepy = await webhookFor(teamId, ['email.complained'], { path: slowPath });
    await publisher.publish('email.complained', teamId);
    await expect.poll(async () => (await deliveriesOf(teamId, sleepy.webhook.id))[0]?.lastError, { timeout: 15_000 }).toBe('timed out after 3000 ms');
  });

  it('connects to the address it vetted, with the URL\'s name for SNI and Host', async () => {
    const teamId = newTeamId();
    const url = `https://${PINNED_NAME}:${pinnedReceiver.port}/pinned`;
    const { webhook } = await webhookFor(teamId, ['domain.verified'], { url });
    const e = await publisher.publish('domain.verified', teamId);
    const [r] = await pinnedReceiver.waitForRequests(1, 15_000);
    expect(r!.headers.host).toBe(`${PINNED_NAME}:${pinnedReceiver.port}`);
    expect(bodyOf(r!).id).toBe(e.id);
    expect(signatureValid(r!, webhook.secret)).toBe(true);
  });

  it('deleting a webhook cancels its pending deliveries', async () => {
    const teamId = newTeamId();
    const path = `/gone-${++pathSeq}`;
    let answer!: () => void;
    const deletedNow = new Promise<void>((r) => (answer = r));
    // Every attempt fails; the first once the webhook is deleted, so the deletion lands while it is in flight.
    routes.set(path, async () => {
      await deletedNow;
      return { status: 500 };
    });
    const { webhook } = await webhookFor(teamId, ['email.failed'], { path });
    await publisher.publish('email.failed', teamId);
    await expect.poll(() => at(path).length, { timeout: 15_000 }).toBe(1);
    const deleted = (await client.call.deleteWebhook({ teamId, webhookId: webhook.id })).webhook!;
    answer();
    expect(deleted.id).toBe(webhook.id);
    const deliveries = svc.infra.mongo.db.collection('deliveries');
    await expect.poll(() => deliveries.findOne({ webhookId: webhook.id }), { timeout: 15_000 })
      .toMatchObject({ status: 'FAILED', lastError: 'cancelled: webhook deleted' });
    await sleep(1_000);
    expect(at(path)).toHaveLength(1);
  });
});

describe('test endpoint and manual retry', () => {
  it('sends webhook.test synchronously and answers the record, FAILED with the reason when refused', async () => {
    const teamId = newTeamId();
    const path = `/test-${++pathSeq}`;
    let answer: ResponsePlan = { status: 200, body: 'ok!' };
    routes.set(path, () => answer);
    const { webhook } = await webhookFor(teamId, ['email.sent'], { path });
    const ok = (await client.call.testWebhook({ teamId, webhookId: webhook.id })).delivery!;
    expect(ok).toMatchObject({ type: 'webhook.test', status: DELIVERY_STATUS_SUCCESS, attempt: 1, responseStatus: 200, responseText: 'ok!', webhookId: webhook.id, teamId });
    const [r] = at(path);
    expect(r!.rawBody.toString()).toBe(ok.payload);
    expect(bodyOf(r!)).toMatchObject({ id: ok.eventId, type: 'webhook.test', data: { message: expect.any(String) } });
    expect(signatureValid(r!, webhook.secret)).toBe(true);

    answer = { status: 500, body: 'x'.repeat(5_000) };
    const bad = (await client.call.testWebhook({ teamId, webhookId: webhook.id })).delivery!;
    expect(bad).toMatchObject({ status: DELIVERY_STATUS_FAILED, lastError: 'receiver answered 500', responseStatus: 500 });
    expect(bad.responseText).toHaveLength(1_024);
    expect((await client.call.getWebhook({ teamId, webhookId: webhook.id })).webhook).toMatchObject({ consecutiveFailures: 0, lastFailureAt: undefined });
  });

  it('retries a failed delivery on request and pages the deliveries newest first', async () => {
    const teamId = newTeamId();
    const path = `/manual-${++pathSeq}`;
    let accept = false;
    routes.set(path, () => (accept ? {} : { status: 500 }));
    const { webhook } = await webhookFor(teamId, ['domain.created'], { path });
    const e1 = await publisher.publish('domain.created', teamId);
    await expect.poll(async () => (await deliveriesOf(teamId, webhook.id))[0]?.status, { timeout: 20_000 }).toBe(DELIVERY_STATUS_FAILED);
    const [failed] = await deliveriesOf(teamId, webhook.id);
    expect(failed).toMatchObject({ attempt: 4, eventId: e1.id });
    accept = true;
    const retried = (await client.call.retryWebhookDelivery({ teamId, webhookId: webhook.id, deliveryId: failed!.id })).delivery!;
    expect(retried).toMatchObject({ id: failed!.id, status: DELIVERY_STATUS_SUCCESS, attempt: 5, eventId: e1.id, responseStatus: 200 });
    expect(at(path).at(-1)!.rawBody.toString()).toBe(failed!.payload);
    expect(await code(client.call.retryWebhookDelivery({ teamId: newTeamId(), webhookId: webhook.id, deliveryId: failed!.id }))).toBe('NOT_FOUND');
    expect(await code(client.call.retryWebhookDelivery({ teamId, webhookId: webhook.id, deliveryId: 'whd_missing' }))).toBe('NOT_FOUND');

    const e2 = await publisher.publish('domain.created', teamId);
    await expect.poll(async () => (await deliveriesOf(teamId, webhook.id)).length, { timeout: 15_000 }).toBe(2);
    const page1 = await client.call.listWebhookDeliveries({ teamId, webhookId: webhook.id, page: 1, limit: 1, status: 0 });
    const page2 = await client.call.listWebhookDeliveries({ teamId, webhookId: webhook.id, page: 2, limit: 1, status: 0 });
    expect(page1.count).toBe(2);
    expect(page1.deliveries.map((d) => d.eventId)).toEqual([e2.id]);
    expect(page2.deliveries.map((d) => d.eventId)).toEqual([e1.id]);
  });
});
