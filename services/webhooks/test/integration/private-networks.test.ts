import { status, type ServiceError } from '@grpc/grpc-js';
import { createGrpcClient, createLogger, startService, type RunningService, type UpstreamClient } from '@mailfleet/kit';
import { webhooksV1 } from '@mailfleet/proto';
import { isolatedNats, startHttpsReceiver, stopNats, testMongoUrl, uniqueDbName, type HttpsReceiver } from '@mailfleet/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemResolver } from '../../src/clients/endpoint.client.js';
import { loadWebhooksConfig } from '../../src/config.js';
import { createWebhooksServer } from '../../src/server.js';
import { connectPublisher, newTeamId, type Publisher } from './helpers.js';

// The SSRF guard as shipped: WEBHOOK_ALLOW_PRIVATE_NETWORKS is off.
const logger = createLogger({ service: 'webhooks-ssrf-test', level: 'silent' });
const dbName = uniqueDbName('webhooks_ssrf');
const REBIND_NAME = 'rebind.mailfleet.test';
let natsInstance: string;
let svc: RunningService;
let client: UpstreamClient<webhooksV1.WebhooksServiceClient>;
let publisher: Publisher;
let receiver: HttpsReceiver;
let rebindLookups = 0;

beforeAll(async () => {
  const nats = await isolatedNats();
  natsInstance = nats.instance;
  receiver = await startHttpsReceiver({ hosts: ['localhost', '127.0.0.1', REBIND_NAME] });
  const config = loadWebhooksConfig({
    GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: testMongoUrl(), MONGO_DB: dbName, NATS_URL: nats.url, LOG_LEVEL: 'silent',
    WEBHOOK_RETRY_BASE_MS: '50', WEBHOOK_MAX_ATTEMPTS: '2', WEBHOOK_POLL_INTERVAL_MS: '100',
  });
  expect(config.allowPrivateNetworks).toBe(false);
  svc = await startService({
    name: 'webhooks', config, env: {}, logger,
    build: (infra) => createWebhooksServer({
      config, infra, extraCa: [receiver.caPem],
      // DNS rebinding: public when the webhook is created, loopback when it is delivered to.
      resolver: async (host) => {
        if (host !== REBIND_NAME) return systemResolver(host);
        return [{ address: rebindLookups++ === 0 ? '93.184.216.34' : '127.0.0.1', family: 4 }];
      },
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
  await stopNats({ instance: natsInstance }).catch(() => undefined);
});

const rejection = (p: Promise<unknown>) => p.then(() => 'OK', (e: ServiceError) => `${status[e.code]}: ${e.details}`);

describe('private networks refused (flag off)', () => {
  it.each([
    ['https://127.0.0.1:8443/hook', '127.0.0.1 is a loopback address'],
    ['https://[::1]:8443/hook', '::1 is a loopback address'],
    ['https://169.254.169.254/latest/meta-data', '169.254.169.254 is a metadata address'],
    ['https://10.1.2.3/hook', '10.1.2.3 is a private address'],
    ['https://[::ffff:192.168.0.1]/hook', 'a private address'],
  ])('refuses %s at creation', async (url, reason) => {
    const res = await rejection(client.call.createWebhook({ teamId: newTeamId(), url, eventTypes: ['domain.created'], createdByUserId: 'u' }));
    expect(res).toMatch(/^INVALID_ARGUMENT: url refused: /);
    expect(res).toContain(reason);
  });

  it('refuses a name that resolves to loopback, at creation and at update', async () => {
    const teamId = newTeamId();
    const res = await rejection(client.call.createWebhook({ teamId, url: `${receiver.url}/hook`, eventTypes: ['domain.created'], createdByUserId: 'u' }));
    expect(res).toMatch(/^INVALID_ARGUMENT: url refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address/);

    const { webhook } = await client.call.createWebhook({ teamId, url: 'https://hooks.example.invalid/in', eventTypes: ['domain.created'], createdByUserId: 'u' });
    const update = await rejection(client.call.updateWebhook({
      teamId, webhookId: webhook!.id, url: 'https://127.0.0.1/hook', clearDescription: false, rotateSecret: false,
    }));
    expect(update).toMatch(/^INVALID_ARGUMENT: url refused: 127\.0\.0\.1 is a loopback address/);
    expect((await client.call.getWebhook({ teamId, webhookId: webhook!.id })).webhook!.url).toBe('https://hooks.example.invalid/in');
    expect(receiver.requests()).toHaveLength(0);
  });

  it('checks again at delivery, after resolving: a name rebound to loopback gets nothing', async () => {
    const teamId = newTeamId();
    const url = `https://${REBIND_NAME}:${receiver.port}/rebind`;
    const { webhook } = await client.call.createWebhook({ teamId, url, eventTypes: ['domain.created'], createdByUserId: 'u' });
    expect(webhook!.url).toBe(url);
    await publisher.publish('domain.created', teamId);
    await expect.poll(async () => (await client.call.listWebhookDeliveries({ teamId, webhookId: webhook!.id, page: 1, limit: 10, status: 0 })).deliveries[0]?.status,
      { timeout: 15_000 }).toBe(webhooksV1.DeliveryStatus.DELIVERY_STATUS_FAILED);
    const [d] = (await client.call.listWebhookDeliveries({ teamId, webhookId: webhook!.id, page: 1, limit: 10, status: 0 })).deliveries;
    expect(d).toMatchObject({ attempt: 2, lastError: `refused: ${REBIND_NAME} resolves to 127.0.0.1, a loopback address; webhooks may only reach public addresses` });
    expect(d!.responseStatus).toBeUndefined();

    const test = (await client.call.testWebhook({ teamId, webhookId: webhook!.id })).delivery!;
    expect(test).toMatchObject({ status: webhooksV1.DeliveryStatus.DELIVERY_STATUS_FAILED, lastError: expect.stringMatching(/^refused: .* loopback/) });
    expect(receiver.requests()).toHaveLength(0);
  });
});
