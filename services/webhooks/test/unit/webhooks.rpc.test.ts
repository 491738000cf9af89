import { ConflictError, FailedPreconditionError, InvalidArgumentError, NotFoundError, type CallContext } from '@mailfleet/kit';
import { webhooksV1 } from '@mailfleet/proto';
import { describe, expect, it } from 'vitest';
import type { AttemptResult } from '../../src/domain/retry-policy.js';
import { createWebhooksHandlers } from '../../src/rpc/webhooks.rpc.js';
import { createDeliverer } from '../../src/workers/deliverer.js';
import { failure, fakeDeliveries, fakeEndpoint, fakeWebhooks, silentLogger, success, type PostCall } from './fakes.js';

const ctx = { requestId: 'r', log: silentLogger, remainingMs: () => 30_000 } as CallContext;
const { WEBHOOK_STATUS_ACTIVE, WEBHOOK_STATUS_PAUSED } = webhooksV1.WebhookStatus;
const { DELIVERY_STATUS_SUCCESS, DELIVERY_STATUS_FAILED, DELIVERY_STATUS_PENDING } = webhooksV1.DeliveryStatus;

function setup(answer?: (c: PostCall) => AttemptResult | Promise<AttemptResult>) {
  const webhooks = fakeWebhooks();
  const deliveries = fakeDeliveries();
  const endpoint = fakeEndpoint(answer);
  const policy = { maxAttempts: 3, baseDelayMs: 1_000, maxDelayMs: 10_000, failureThreshold: 2 };
  const deliverer = createDeliverer({ webhooks, deliveries, endpoint: endpoint.client, policy, logger: silentLogger });
  const h = createWebhooksHandlers({ webhooks, deliveries, endpoint: endpoint.client, deliverer, timeoutMs: 10_000, leaseMs: 60_000 });
  const create = (over: Partial<webhooksV1.CreateWebhookRequest> = {}) =>
    h.createWebhook({ teamId: 'team_a', url: 'https://hooks.example.com/in', eventTypes: ['domain.created'], createdByUserId: 'user_1', ...over }, ctx)
      .then((r) => r.webhook!);
  return { webhooks, deliveries, endpoint, h, create };
}

describe('webhooks RPC', () => {
  it('creates ACTIVE with a generated secret in full, then shows it masked', async () => {
    const s = setup();
    const w = await s.create({ description: 'prod' });
    expect(w).toMatchObject({ status: WEBHOOK_STATUS_ACTIVE, description: 'prod', eventTypes: ['domain.created'], consecutiveFailures: 0, teamId: 'team_a', createdByUserId: 'user_1' });
    expect(w.secret).toMatch(/^whsec_[0-9A-Za-z]{32}$/);
    expect(w.apiVersion).toBeUndefined();
    expect(s.endpoint.vetted).toEqual(['https://hooks.example.com/in']);
    const masked = `whsec_****${w.secret.slice(-4)}`;
    expect((await s.h.getWebhook({ teamId: 'team_a', webhookId: w.id }, ctx)).webhook!.secret).toBe(masked);
    expect((await s.h.listWebhooks({ teamId: 'team_a' }, ctx)).webhooks.map((x) => x.secret)).toEqual([masked]);
    const own = await s.create({ secret: 'my-own-secret-0001' });
    expect(own.secret).toBe('my-own-secret-0001');
  });

  it('refuses bad input and hides other teams', async () => {
    const s = setup();
    await expect(s.create({ url: 'http://hooks.example.com/' })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(s.create({ eventTypes: ['webhook.test'] })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(s.create({ eventTypes: [] })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(s.create({ secret: 'short' })).rejects.toBeInstanceOf(InvalidArgumentError);
    const w = await s.create();
    await expect(s.h.getWebhook({ teamId: 'team_b', webhookId: w.id }, ctx)).rejects.toBeInstanceOf(NotFoundError);
    await expect(s.h.deleteWebhook({ teamId: 'team_b', webhookId: w.id }, ctx)).rejects.toBeInstanceOf(NotFoundError);
    await expect(s.h.updateWebhook({ teamId: 'team_a', webhookId: w.id, clearDescription: false, rotateSecret: true, secret: '0123456789abcdefgh' }, ctx))
      .rejects.toThrow(/either secret or rotateSecret/);
  });

  it('PATCH: pause, activate (failures reset, held deliveries released), new secret shown once', async () => {
    const s = setup();
    const w = await s.create({ description: 'd' });
    const upd = (over: Partial<webhooksV1.UpdateWebhookRequest>) =>
      s.h.updateWebhook({ teamId: 'team_a', webhookId: w.id, clearDescription: false, rotateSecret: false, ...over }, ctx).then((r) => r.webhook!);
    expect((await upd({ active: false })).status).toBe(WEBHOOK_STATUS_PAUSED);
    s.webhooks.rows.get(w.id)!.consecutiveFailures = 7;
    await s.deliveries.createPending({ teamId: 'team_a', webhookId: w.id, eventId: 'evt_1', type: 'domain.created', payload: '{}', now: new Date() });
    [...s.deliveries.rows.values()][0]!.parked = true;
    const active = await upd({ active: true });
    expect(active).toMatchObject({ status: WEBHOOK_STATUS_ACTIVE, consecutiveFailures: 0 });
    expect([...s.deliveries.rows.values()][0]!.parked).toBe(false);
    expect(active.secret).toMatch(/^whsec_\*\*\*\*/);

    const rotated = await upd({ rotateSecret: true });
    expect(rotated.secret).toMatch(/^whsec_[0-9A-Za-z]{32}$/);
    expect(rotated.secret).not.toBe(w.secret);
    expect((await upd({ secret: 'a-brand-new-secret-42' })).secret).toBe('a-brand-new-secret-42');
    expect((await upd({ description: 'x' })).secret).toBe('****t-42');
    expect((await upd({ clearDescription: true })).description).toBeUndefined();
    expect((await upd({ eventTypes: { values: ['email.sent', 'email.bounced'] } })).eventTypes).toEqual(['email.sent', 'email.bounced']);
    await expect(upd({ eventTypes: { values: ['nope'] } })).rejects.toBeInstanceOf(InvalidArgumentError);
    expect((await upd({ url: 'https://other.example.com/x' })).url).toBe('https://other.example.com/x');
  });

  it('DELETE returns the webhook masked and cancels its pending deliveries', async () => {
    const s = setup();
    const w = await s.create();
    await s.deliveries.createPending({ teamId: 'team_a', webhookId: w.id, eventId: 'evt_1', type: 'domain.created', payload: '{}', now: new Date() });
    const deleted = (await s.h.deleteWebhook({ teamId: 'team_a', webhookId: w.id }, ctx)).webhook!;
    expect(deleted.id).toBe(w.id);
    expect(deleted.secret).toMatch(/^whsec_\*\*\*\*/);
    expect([...s.deliveries.rows.values()][0]).toMatchObject({ status: 'FAILED', lastError: 'cancelled: webhook deleted' });
    await expect(s.h.getWebhook({ teamId: 'team_a', webhookId: w.id }, ctx)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('test: a webhook.test event sent once, its record returned whatever the outcome, counters untouched', async () => {
    let answer: AttemptResult = success();
    const s = setup(() => answer);
    const w = await s.create();
    const ok = (await s.h.testWebhook({ teamId: 'team_a', webhookId: w.id }, ctx)).delivery!;
    expect(ok).toMatchObject({ type: 'webhook.test', status: DELIVERY_STATUS_SUCCESS, attempt: 1, responseStatus: 200, teamId: 'team_a', webhookId: w.id });
    expect(JSON.parse(ok.payload)).toEqual({ id: ok.eventId, type: 'webhook.test', createdAt: ok.createdAt!.toISOString(), data: { message: expect.any(String) } });
    expect(s.endpoint.calls[0]!.body).toBe(ok.payload);
    answer = failure(500);
    const bad = (await s.h.testWebhook({ teamId: 'team_a', webhookId: w.id }, ctx)).delivery!;
    expect(bad).toMatchObject({ status: DELIVERY_STATUS_FAILED, lastError: 'receiver answered 500', responseStatus: 500 });
    expect(await s.webhooks.get('team_a', w.id)).toMatchObject({ consecutiveFailures: 0, lastFailureAt: null, lastSuccessAt: null });
    const listed = await s.h.listWebhookDeliveries({ teamId: 'team_a', webhookId: w.id, page: 0, limit: 0, status: 0 }, ctx);
    expect(listed.count).toBe(2);
  });

  it('lists deliveries newest first, paged and filtered', async () => {
    const s = setup();
    const w = await s.create();
    for (let i = 0; i < 5; i++) {
      await s.deliveries.createPending({ teamId: 'team_a', webhookId: w.id, eventId: `evt_${i}`, type: 'domain.created', payload: '{}', now: new Date() });
    }
    const page2 = await s.h.listWebhookDeliveries({ teamId: 'team_a', webhookId: w.id, page: 2, limit: 2, status: DELIVERY_STATUS_PENDING }, ctx);
    expect(page2.count).toBe(5);
    expect(page2.deliveries.map((d) => d.eventId)).toEqual(['evt_2', 'evt_1']);
    expect((await s.h.listWebhookDeliveries({ teamId: 'team_a', webhookId: w.id, page: 1, limit: 20, status: DELIVERY_STATUS_SUCCESS }, ctx)).count).toBe(0);
    await expect(s.h.listWebhookDeliveries({ teamId: 'team_a', webhookId: w.id, page: 1, limit: 101, status: 0 }, ctx)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(s.h.listWebhookDeliveries({ teamId: 'team_b', webhookId: w.id, page: 1, limit: 1, status: 0 }, ctx)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('retry: one more attempt of a finished delivery, only to an ACTIVE webhook, never two at once', async () => {
    let answer: AttemptResult = failure(500);
    const s = setup(() => answer);
    const w = await s.create();
    await s.deliveries.createPending({ teamId: 'team_a', webhookId: w.id, eventId: 'evt_1', type: 'domain.created', payload: '{"id":"evt_1"}', now: new Date() });
    const id = [...s.deliveries.rows.keys()][0]!;
    Object.assign(s.deliveries.rows.get(id)!, { status: 'FAILED', attempt: 3, nextAttemptAt: null });
    const retry = () => s.h.retryWebhookDelivery({ teamId: 'team_a', webhookId: w.id, deliveryId: id }, ctx).then((r) => r.delivery!);

    expect(await retry()).toMatchObject({ status: DELIVERY_STATUS_FAILED, attempt: 4, lastError: 'receiver answered 500' });
    expect((await s.webhooks.get('team_a', w.id))!.consecutiveFailures).toBe(0);
    answer = success();
    expect(await retry()).toMatchObject({ status: DELIVERY_STATUS_SUCCESS, attempt: 5, lastError: undefined, eventId: 'evt_1' });
    expect(s.endpoint.calls.map((c) => c.body)).toEqual(['{"id":"evt_1"}', '{"id":"evt_1"}']);

    s.deliveries.rows.get(id)!.leaseUntil = Date.now() + 60_000;
    await expect(retry()).rejects.toBeInstanceOf(ConflictError);
    await expect(s.h.retryWebhookDelivery({ teamId: 'team_a', webhookId: w.id, deliveryId: 'whd_nope' }, ctx)).rejects.toBeInstanceOf(NotFoundError);
    await s.h.updateWebhook({ teamId: 'team_a', webhookId: w.id, active: false, clearDescription: false, rotateSecret: false }, ctx);
    await expect(retry()).rejects.toBeInstanceOf(FailedPreconditionError);
  });
});
