import { connectNats, createEvent, createLogger, encodeEvent, ensureEventStream, subjectFor, type DurableConsumer, type NatsHandle } from '@mailfleet/kit';
import { createTestCa, isolatedNats, startHttpsReceiver, stopNats, testMongoUrl, uniqueDbName, type HttpsReceiver } from '@mailfleet/testkit';
import { MongoClient, type CommandStartedEvent, type Db } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpointClient } from '../../src/clients/endpoint.client.js';
import { loadWebhooksConfig, retryPolicyOf } from '../../src/config.js';
import { createFanoutConsumer } from '../../src/events/fanout.consumer.js';
import { createDeliveriesRepository } from '../../src/repositories/deliveries.repository.js';
import { withSubscriptionCache } from '../../src/repositories/subscription-cache.js';
import { createWebhooksRepository } from '../../src/repositories/webhooks.repository.js';
import { handOffMaxAgeOf, roundSizeOf } from '../../src/server.js';
import { createDeliverer } from '../../src/workers/deliverer.js';
import { createDeliveryWorker, type DeliveryWorker } from '../../src/workers/delivery.worker.js';
import { bodyOf } from './helpers.js';

/**
 * A few thousand events through the real pipeline (JetStream -> fan-out consumer -> delivery worker -> HTTPS
 * receiver) on FerretDB, its storage operations counted by command monitoring: they follow batches and rounds,
 * not events. Counts only; how fast it goes is the bench's business.
 */
const logger = createLogger({ service: 'webhooks-pipeline-test', level: 'silent' });
const dbName = uniqueDbName('webhooks_pipeline');
const TEAM = 'team_pipeline';
const EVENTS = 2_000;
const WRITES = new Set(['insert', 'update', 'delete', 'findAndModify']);
let client: MongoClient;
let db: Db;
let nats: NatsHandle;
let natsInstance: string;
let receiver: HttpsReceiver;
let consumer: DurableConsumer | undefined;
let worker: DeliveryWorker | undefined;
/** Per command: its name, collection and statements (documents inserted, updates, deletes; 1 for the rest). */
const commands: { name: string; collection: string; statements: number }[] = [];

beforeAll(async () => {
  client = await new MongoClient(testMongoUrl(), { monitorCommands: true }).connect();
  client.on('commandStarted', (e: CommandStartedEvent) => {
    if (e.databaseName !== dbName) return;
    const list = (e.command.documents ?? e.command.updates ?? e.command.deletes) as unknown[] | undefined;
    commands.push({ name: e.commandName, collection: String(e.command[e.commandName]), statements: Array.isArray(list) ? list.length : 1 });
  });
  db = client.db(dbName);
  const started = await isolatedNats();
  natsInstance = started.instance;
  nats = await connectNats({ url: started.url, name: 'webhooks-pipeline-test', logger });
  await ensureEventStream(nats.jsm);
  receiver = await startHttpsReceiver({ ca: await createTestCa() });
});

async function stopPipeline(): Promise<void> {
  await consumer?.stop();
  await worker?.stop();
  consumer = undefined;
  worker = undefined;
}

/**
 * A webhook subscribed to email.delivered at the receiver's `path`, and a delivery worker for it (not started),
 * built as the service builds them; `handOffLimit` caps the fan-out's hand-off.
 */
async function startWorker(config: ReturnType<typeof loadWebhooksConfig>, hook: { id: string; teamId: string; path: string }, handOffLimit?: number) {
  const stored = createWebhooksRepository(db);
  const deliveries = createDeliveriesRepository(db);
  await Promise.all([stored.ensureIndexes(), deliveries.ensureIndexes()]);
  const webhooks = withSubscriptionCache(stored, { ttlMs: 3_600_000 });
  await webhooks.create({
    id: hook.id, teamId: hook.teamId, url: `${receiver.url}${hook.path}`, description: null, eventTypes: ['email.delivered'],
    secret: 'whsec_0123456789abcdefghij', createdAt: new Date(Date.now() - 120_000), createdByUserId: 'u',
  });
  const endpoint = createEndpointClient({
    allowPrivateNetworks: true, timeoutMs: config.timeoutMs, responseTextLimit: config.responseTextLimit, extraCa: [receiver.caPem],
  });
  const deliverer = createDeliverer({ webhooks, deliveries, endpoint, policy: retryPolicyOf(config), logger });
  const w = createDeliveryWorker({
    deliveries, deliverer, concurrency: config.concurrency, perWebhookConcurrency: config.perWebhookConcurrency,
    roundSize: roundSizeOf(config), leaseMs: config.claimLeaseMs, pollIntervalMs: config.pollIntervalMs,
    handOffMaxAgeMs: handOffMaxAgeOf(config), ...(handOffLimit !== undefined ? { handOffLimit } : {}), logger,
  });
  worker = w;
  return { webhooks, deliveries, w };
}

afterAll(async () => {
  await stopPipeline();
  await receiver?.close();
  await nats?.drain();
  await stopNats({ instance: natsInstance }).catch(() => undefined);
  await db?.dropDatabase();
  await client?.close();
});

describe('the webhook pipeline in batches and rounds', () => {
  it(`${EVENTS} events to one webhook: each delivered, with writes per batch and round, not per event`, async () => {
    const config = loadWebhooksConfig({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
    const { webhooks, deliveries, w } = await startWorker(config, { id: 'wh_pipe', teamId: TEAM, path: '/in' });

    const events = Array.from({ length: EVENTS }, (_, i) => createEvent('email.delivered', TEAM, { id: `em_${i}`, to: ['a@example.com'] }));
    await Promise.all(events.map((e) => nats.js.publish(subjectFor(e.type), encodeEvent(e), { msgID: e.id })));
    commands.length = 0;
    w.start();
    consumer = createFanoutConsumer({ webhooks, deliveries, nats, logger, onDeliveries: () => w.kick(), ...(w.handOff ? { handOff: w.handOff } : {}) });
    await consumer.start();

    await expect.poll(() => new Set(receiver.requests().map((r) => bodyOf(r).id)).size, { timeout: 120_000, interval: 200 }).toBe(EVENTS);
    await expect.poll(() => db.collection('delivery_queue').countDocuments({}), { timeout: 30_000 }).toBe(0);
    expect(await db.collection('deliveries').countDocuments({ status: 'SUCCESS' })).toBe(EVENTS);

    const writes = commands.filter((c) => WRITES.has(c.name));
    const of = (name: string, collection: string) => writes.filter((c) => c.name === name && c.collection === collection).length;
    // Fan-out: one insert into the queue per batch (of up to 200 events); the records are inserted there too when
    // stored free, or with their first result, one insert per round, when handed to the worker.
    const batches = of('insert', 'delivery_queue');
    expect(batches).toBeLessThanOrEqual(EVENTS / 20);
    // Rounds: the queue leased and the records locked with one bulk write each (no findAndModify per record),
    // the results with one per collection, and the webhook's health once. A bulk write goes as one command per
    // 50 statements, so a round of up to 64 is at most two commands per step.
    expect(of('findAndModify', 'deliveries')).toBe(0);
    // A round reads its webhook once; its health is written at most once per round (a run of successes skips it for
    // SUCCESS_WRITE_GRANULARITY_MS after the last one written).
    const rounds = commands.filter((c) => c.name === 'find' && c.collection === 'webhooks').length;
    expect(rounds).toBeGreaterThan(0);
    expect(rounds).toBeLessThanOrEqual(EVENTS / 8);
    const healthWrites = of('update', 'webhooks');
    expect(healthWrites).toBeGreaterThan(0);
    expect(healthWrites).toBeLessThan(rounds);
    for (const step of [of('update', 'delivery_queue'), of('update', 'deliveries'), of('delete', 'delivery_queue')]) expect(step).toBeLessThanOrEqual(2 * 2 * rounds);
    expect(of('insert', 'deliveries')).toBeLessThanOrEqual(batches + rounds);
    // One read by `_id` per delivery at fan-out (an event published again finds its record); the deliveries are not
    // read back to be claimed.
    expect(commands.filter((c) => c.name === 'find' && c.collection === 'deliveries').length).toBeLessThanOrEqual(EVENTS + EVENTS / 10);
    // Every event costs far fewer than one write: 7 writes per event before the batching.
    expect(writes.length).toBeLessThan(EVENTS / 2);
    await stopPipeline();
  }, 180_000);

  it('deliveries handed from the fan-out to the worker: three statements and one read each, no claim, nothing rewritten', async () => {
    // A lease long enough that no handed delivery waits past it, and room for all: every delivery takes the hand-off.
    const config = loadWebhooksConfig({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_CLAIM_LEASE_MS: '600000' });
    const n = 500;
    const { webhooks, deliveries, w } = await startWorker(config, { id: 'wh_handoff', teamId: 'team_handoff', path: '/handoff' }, n);
    expect(w.handOff).toBeDefined();

    const events = Array.from({ length: n }, (_, i) => createEvent('email.delivered', 'team_handoff', { id: `em_h${i}`, to: ['a@example.com'] }));
    await Promise.all(events.map((e) => nats.js.publish(subjectFor(e.type), encodeEvent(e), { msgID: e.id })));
    commands.length = 0;
    w.start();
    // Not straight from the fan-out (the next test): stored claimed and handed over, as when older deliveries wait.
    consumer = createFanoutConsumer({ webhooks, deliveries, nats, logger, onDeliveries: () => w.kick(), handOff: w.handOff!, direct: false });
    await consumer.start();

    const mine = () => receiver.requests().filter((r) => r.path.startsWith('/handoff'));
    await expect.poll(() => new Set(mine().map((r) => bodyOf(r).id)).size, { timeout: 120_000, interval: 200 }).toBe(n);
    await expect.poll(() => db.collection('delivery_queue').countDocuments({ webhookId: 'wh_handoff' }), { timeout: 30_000 }).toBe(0);
    expect(await db.collection('deliveries').countDocuments({ webhookId: 'wh_handoff', status: 'SUCCESS' })).toBe(n);
    expect(mine().length).toBe(n);

    const statements = (name: string, collection: string) => commands
      .filter((c) => c.name === name && c.collection === collection).reduce((sum, c) => sum + c.statements, 0);
    // Per delivery: its entry inserted at fan-out, its record inserted once with its result, its entry deleted; no
    // pending record rewritten with the result, no claim's two updates (entry leased, record locked), no read.
    expect(statements('insert', 'delivery_queue')).toBe(n);
    expect(statements('insert', 'deliveries')).toBe(n);
    expect(statements('update', 'deliveries')).toBe(0);
    expect(statements('update', 'delivery_queue')).toBe(0);
    // The entries of a round's results go in one `_id: {$in}` delete: one statement per round (a round inserts its
    // records in one command), not one per delivery.
    const commandsOf = (name: string, collection: string) => commands.filter((c) => c.name === name && c.collection === collection);
    expect(commandsOf('delete', 'delivery_queue').every((c) => c.statements === 1)).toBe(true);
    expect(commandsOf('delete', 'delivery_queue').length).toBeLessThanOrEqual(commandsOf('insert', 'deliveries').length);
    // Read once at fan-out, by `_id: {$in}` with the batch's entries (one read per insert of entries), not after.
    expect(commandsOf('find', 'deliveries').length).toBe(commandsOf('insert', 'delivery_queue').length);
    await stopPipeline();
  }, 180_000);

  it('deliveries attempted straight from the fan-out: one statement each (the record, with its result), no queue entry', async () => {
    // Room for every delivery at once, so no batch waits behind another's attempts and each goes straight.
    const config = loadWebhooksConfig({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_CONCURRENCY: '1000' });
    const n = 400;
    const { webhooks, deliveries, w } = await startWorker(config, { id: 'wh_direct', teamId: 'team_direct', path: '/direct' });

    const events = Array.from({ length: n }, (_, i) => createEvent('email.delivered', 'team_direct', { id: `em_d${i}`, to: ['a@example.com'] }));
    await Promise.all(events.map((e) => nats.js.publish(subjectFor(e.type), encodeEvent(e), { msgID: e.id })));
    commands.length = 0;
    w.start();
    consumer = createFanoutConsumer({ webhooks, deliveries, nats, logger, onDeliveries: () => w.kick(), handOff: w.handOff! });
    await consumer.start();

    const mine = () => receiver.requests().filter((r) => r.path.startsWith('/direct'));
    await expect.poll(() => db.collection('deliveries').countDocuments({ webhookId: 'wh_direct', status: 'SUCCESS' }), { timeout: 120_000, interval: 200 }).toBe(n);
    expect(new Set(mine().map((r) => bodyOf(r).id)).size).toBe(n);
    expect(mine().length).toBe(n);
    await stopPipeline();

    const statements = (name: string, collection: string) => commands
      .filter((c) => c.name === name && c.collection === collection).reduce((sum, c) => sum + c.statements, 0);
    // Per delivery, its record inserted with its result; the queue is not touched, nothing is rewritten.
    expect(statements('insert', 'deliveries')).toBe(n);
    expect(statements('update', 'deliveries')).toBe(0);
    for (const name of ['insert', 'update', 'delete']) expect(statements(name, 'delivery_queue')).toBe(0);
    // The batch's records are read once at fan-out by `_id: {$in}` (an event published again finds its delivery).
    const finds = commands.filter((c) => c.name === 'find' && c.collection === 'deliveries').length;
    expect(finds).toBeGreaterThan(0);
    expect(finds).toBeLessThanOrEqual(n / 20);
    expect(await db.collection('delivery_queue').countDocuments({ webhookId: 'wh_direct' })).toBe(0);
  }, 180_000);

  it('a direct attempt that cannot start in time (a slow endpoint at its cap) is stored for the queue, and delivered once from there', async () => {
    const config = loadWebhooksConfig({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_PER_WEBHOOK_CONCURRENCY: '1' });
    const n = 12;
    receiver.setResponse((r) => (r.path.startsWith('/slow') ? { status: 200, delayMs: 300 } : { status: 200 }));
    try {
      const { webhooks, deliveries, w } = await startWorker(config, { id: 'wh_slow', teamId: 'team_slow', path: '/slow' });
      const events = Array.from({ length: n }, (_, i) => createEvent('email.delivered', 'team_slow', { id: `em_s${i}`, to: ['a@example.com'] }));
      await Promise.all(events.map((e) => nats.js.publish(subjectFor(e.type), encodeEvent(e), { msgID: e.id })));
      commands.length = 0;
      w.start();
      consumer = createFanoutConsumer({ webhooks, deliveries, nats, logger, onDeliveries: () => w.kick(), handOff: w.handOff!, directStartWithinMs: 100 });
      await consumer.start();

      const mine = () => receiver.requests().filter((r) => r.path.startsWith('/slow'));
      await expect.poll(() => db.collection('deliveries').countDocuments({ webhookId: 'wh_slow', status: 'SUCCESS' }), { timeout: 60_000, interval: 200 }).toBe(n);
      await expect.poll(() => db.collection('delivery_queue').countDocuments({ webhookId: 'wh_slow' }), { timeout: 30_000 }).toBe(0);
      // Each event exactly once at the endpoint: the posts that started straight away, then the stored rest.
      expect(new Set(mine().map((r) => bodyOf(r).id)).size).toBe(n);
      expect(mine().length).toBe(n);
      const queued = commands.filter((c) => c.name === 'insert' && c.collection === 'delivery_queue').reduce((sum, c) => sum + c.statements, 0);
      expect(queued).toBeGreaterThan(0);
      expect(queued).toBeLessThan(n);
    } finally {
      await stopPipeline();
      receiver.setResponse({ status: 200 });
    }
  }, 120_000);
});
