import { connectNats, createLogger, type NatsHandle } from '@mailfleet/kit';
import { isolatedNats, stopNats, testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectSubscriptionCache, withSubscriptionCache, type CachedWebhooksRepository } from '../../src/repositories/subscription-cache.js';
import { createWebhooksRepository } from '../../src/repositories/webhooks.repository.js';

// Two replicas' caches over one FerretDB database and one NATS server: a change made through one
// reaches the other's fan-out at once, long before the cache lifetime.
const logger = createLogger({ service: 'webhooks-cache-test', level: 'silent' });
const dbName = uniqueDbName('webhooks_cache');
let natsInstance: string;
let mongo: MongoClient;
let natsA: NatsHandle;
let natsB: NatsHandle;
let replicaA: CachedWebhooksRepository;
let replicaB: CachedWebhooksRepository;
const detach: (() => void)[] = [];

beforeAll(async () => {
  const nats = await isolatedNats();
  natsInstance = nats.instance;
  mongo = new MongoClient(testMongoUrl());
  const stored = createWebhooksRepository(mongo.db(dbName));
  await stored.ensureIndexes();
  natsA = await connectNats({ url: nats.url, name: 'replica-a', logger });
  natsB = await connectNats({ url: nats.url, name: 'replica-b', logger });
  const replica = (nats: NatsHandle) => {
    const changes = connectSubscriptionCache(nats, logger);
    const cache = withSubscriptionCache(stored, { ttlMs: 3_600_000, broadcast: changes.broadcast });
    detach.push(changes.attach(cache));
    return cache;
  };
  replicaA = replica(natsA);
  replicaB = replica(natsB);
  // Both subscriptions are registered with the server once a round trip on each connection is done.
  await Promise.all([natsA.nc.flush(), natsB.nc.flush()]);
});

afterAll(async () => {
  for (const d of detach) d();
  await natsA?.drain();
  await natsB?.drain();
  await mongo?.db(dbName).dropDatabase();
  await mongo?.close();
  await stopNats({ instance: natsInstance }).catch(() => undefined);
});

describe('the fan-out\'s webhook cache across replicas', () => {
  it('a webhook made, changed or paused through one replica is seen by the other at once', async () => {
    const teamId = `team_cache_${Date.now().toString(36)}`;
    const later = new Date(Date.now() + 60_000);
    const subscribedAtB = async (type: string) => (await replicaB.subscribed(teamId, type, later)).map((w) => w.id);
    expect(await subscribedAtB('email.sent')).toEqual([]);

    const made = await replicaA.create({
      id: `wh_${Date.now().toString(36)}`, teamId, url: 'https://hooks.example/a', description: null, eventTypes: ['email.sent'],
      secret: 'whsec_0123456789abcdef', createdAt: new Date(), createdByUserId: 'user_it',
    });
    await expect.poll(() => subscribedAtB('email.sent'), { timeout: 5_000 }).toEqual([made.id]);

    await replicaA.update(teamId, made.id, { eventTypes: ['email.delivered'] }, new Date());
    await expect.poll(() => subscribedAtB('email.delivered'), { timeout: 5_000 }).toEqual([made.id]);
    expect(await subscribedAtB('email.sent')).toEqual([]);

    await replicaA.update(teamId, made.id, { status: 'PAUSED' }, new Date());
    await expect.poll(() => subscribedAtB('email.delivered'), { timeout: 5_000 }).toEqual([]);
  });
});
