import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createGrpcClient, createLogger, type UpstreamClient } from '@mailfleet/kit';
import { webhooksV1 } from '@mailfleet/proto';
import { isolatedNats, startHttpsReceiver, stopNats, testMongoUrl, uniqueDbName, type HttpsReceiver } from '@mailfleet/testkit';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodyOf, connectPublisher, freePort, newTeamId, signatureValid, type Publisher } from './helpers.js';

// The built service as a process of its own, killed with SIGKILL mid-delivery (run `npx tsc -b` first).
const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const logger = createLogger({ service: 'webhooks-crash-test', level: 'silent' });
const dbName = uniqueDbName('webhooks_crash');
let natsInstance: string;
let natsUrl: string;
let receiver: HttpsReceiver;
let publisher: Publisher;
let grpcPort: number;
let child: ChildProcess | undefined;
let output = '';

function startChild(env: Record<string, string>): ChildProcess {
  const proc = spawn(process.execPath, [MAIN], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout?.on('data', (b: Buffer) => { output += b.toString(); });
  proc.stderr?.on('data', (b: Buffer) => { output += b.toString(); });
  return proc;
}

async function ready(client: UpstreamClient<webhooksV1.WebhooksServiceClient>): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await client.call.listWebhooks({ teamId: 'team_probe' }, { deadlineMs: 1_000 });
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`webhooks process did not start: ${String(err)}\n${output.slice(-3_000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function kill(proc: ChildProcess | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = once(proc, 'exit');
  proc.kill(signal);
  await exited;
}

beforeAll(async () => {
  ({ instance: natsInstance, url: natsUrl } = await isolatedNats());
  receiver = await startHttpsReceiver();
  // Every answer is slow: when the process dies, deliveries are in flight.
  receiver.setResponse({ delayMs: 600 });
  publisher = await connectPublisher(natsUrl);
  grpcPort = await freePort();
});

afterAll(async () => {
  await kill(child, 'SIGKILL');
  await publisher?.close();
  await receiver?.close();
  const mongo = new MongoClient(testMongoUrl());
  await mongo.db(dbName).dropDatabase().finally(() => mongo.close());
  await stopNats({ instance: natsInstance }).catch(() => undefined);
});

/**
 * Two settings: a lease too short to hand deliveries from the fan-out to the worker (each one is claimed from the
 * queue), and one that leaves room for it (the first rounds are handed over, claimed when they were stored; the
 * ones that wait past their time are released to the queue), so a kill finds deliveries in flight either way.
 */
const CASES = [
  { name: 'claimed from the queue', lease: { WEBHOOK_TIMEOUT_MS: '2000', WEBHOOK_CLAIM_LEASE_MS: '4000' } },
  { name: 'handed over by the fan-out', lease: { WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_CLAIM_LEASE_MS: '10000' } },
];

describe('crash recovery', () => {
  it.each(CASES)('the service killed mid-delivery delivers every event after a restart (duplicates allowed, ids equal): $name', { timeout: 180_000 }, async ({ lease }) => {
    receiver.reset();
    receiver.setResponse({ delayMs: 600 });
    const env = {
      GRPC_PORT: String(grpcPort), GRPC_HOST: '127.0.0.1', METRICS_PORT: '0', MONGO_URL: testMongoUrl(), MONGO_DB: dbName, NATS_URL: natsUrl,
      LOG_LEVEL: 'warn', NODE_EXTRA_CA_CERTS: receiver.caFile, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', ...lease,
      WEBHOOK_RETRY_BASE_MS: '200', WEBHOOK_POLL_INTERVAL_MS: '200', WEBHOOK_PER_WEBHOOK_CONCURRENCY: '2',
    };
    const client = createGrpcClient({ name: 'webhooks', address: `127.0.0.1:${grpcPort}`, ctor: webhooksV1.WebhooksServiceClient, logger, deadlineMs: 5_000 });
    try {
      child = startChild(env);
      await ready(client);
      const teamId = newTeamId();
      const { webhook } = await client.call.createWebhook({ teamId, url: `${receiver.url}/crash`, eventTypes: ['domain.created', 'domain.updated'], createdByUserId: 'u' });

      const published: string[] = [];
      for (let i = 0; i < 12; i++) published.push((await publisher.publish(i % 2 ? 'domain.updated' : 'domain.created', teamId)).id);
      // Mid-delivery: some requests arrived, their answers (600 ms) not yet.
      const inFlight = (await receiver.waitForRequests(2, 30_000)).map((r) => bodyOf(r).id);
      await kill(child, 'SIGKILL');
      expect(receiver.requests().length).toBeLessThan(12);

      // Events that happen while the service is down wait in the stream.
      for (let i = 0; i < 4; i++) published.push((await publisher.publish('domain.created', teamId)).id);

      child = startChild(env);
      await ready(client);
      const arrived = () => new Set(receiver.requests().map((r) => bodyOf(r).id));
      await expect.poll(() => published.filter((id) => !arrived().has(id)), { timeout: 120_000, interval: 500 }).toEqual([]);

      // The attempts the dead process never saw answered are claimed again once their lease lapsed (the new process
      // sees a lapsed lease at its next look at the queue, within 5 s): same event, same id.
      const attemptsOf = (id: string) => receiver.requests().filter((r) => bodyOf(r).id === id).length;
      await expect.poll(() => inFlight.map(attemptsOf).every((n) => n >= 2), { timeout: 30_000, interval: 200 }).toBe(true);
      const requests = receiver.requests();
      expect(requests.every((r) => signatureValid(r, webhook!.secret))).toBe(true);
      expect(requests.every((r) => published.includes(bodyOf(r).id))).toBe(true);
      // The records agree: every event delivered, once each in the log.
      await expect.poll(async () => {
        const list = await client.call.listWebhookDeliveries({ teamId, webhookId: webhook!.id, page: 1, limit: 100, status: webhooksV1.DeliveryStatus.DELIVERY_STATUS_SUCCESS });
        return list.deliveries.map((d) => d.eventId).sort();
      }, { timeout: 30_000 }).toEqual([...published].sort());
    } finally {
      client.close();
      await kill(child, 'SIGTERM');
    }
  });
});
