import { bindService, type ServiceInfra, type ServiceParts } from '@mailfleet/kit';
import { webhooksV1 } from '@mailfleet/proto';
import { createEndpointClient, type Resolver } from './clients/endpoint.client.js';
import { retryPolicyOf, type WebhooksConfig } from './config.js';
import { createFanoutConsumer, directAllowed } from './events/fanout.consumer.js';
import { createDeliveriesRepository } from './repositories/deliveries.repository.js';
import { connectSubscriptionCache, withSubscriptionCache } from './repositories/subscription-cache.js';
import { createWebhooksRepository } from './repositories/webhooks.repository.js';
import { createWebhooksHandlers } from './rpc/webhooks.rpc.js';
import { createDeliverer } from './workers/deliverer.js';
import { createDeliveryWorker } from './workers/delivery.worker.js';

/**
 * Binds the webhooks service: repositories (indexes created at start), the
 * RPC handlers, the durable consumer that turns public events into pending
 * deliveries, the worker that attempts due deliveries, and the sweeper of old
 * delivery records. Publishes nothing, so it has no outbox.
 *
 * `extraCa` (trusted CA certificates beside the system's) and `resolver` are
 * for in-process tests; processes trust NODE_EXTRA_CA_CERTS and resolve with
 * the system resolver.
 */
/**
 * How many deliveries of one webhook go out as rounds at once: up to four times its concurrency, so a busy
 * endpoint's deliveries are claimed and recorded a few writes per 64 (by default) instead of per 16, but never
 * more than the lease allows: against an endpoint that times out every post, a round's posts take one time-out
 * per `perWebhookConcurrency` of them, and all of that stays 5 s inside the lease (so no claim lapses mid-round).
 */
export function roundSizeOf(config: Pick<WebhooksConfig, 'perWebhookConcurrency' | 'claimLeaseMs' | 'timeoutMs'>): number {
  const waves = Math.max(1, Math.min(4, Math.floor((config.claimLeaseMs - 5_000) / config.timeoutMs)));
  return config.perWebhookConcurrency * waves;
}

/**
 * How long a delivery claimed at fan-out may wait for its round: its lease ran from the fan-out, and a round's
 * posts may take one time-out per `perWebhookConcurrency` of them, so what is left of the lease after the wait
 * must hold all of that with 5 s to spare (as roundSizeOf keeps for a claim). 0 when the lease leaves no room (the
 * fan-out then claims nothing and the worker claims every delivery from the queue).
 */
export function handOffMaxAgeOf(config: Pick<WebhooksConfig, 'perWebhookConcurrency' | 'claimLeaseMs' | 'timeoutMs'>): number {
  const waves = roundSizeOf(config) / config.perWebhookConcurrency;
  return Math.max(0, config.claimLeaseMs - 5_000 - waves * config.timeoutMs);
}

/**
 * The floor of the deliveries handed over by the fan-out that may wait at once: four times `WEBHOOK_CONCURRENCY`, a
 * few seconds of work at hundreds of deliveries a second, well inside the 15 s a handed delivery may wait by
 * default. The worker holds more while its recent pace starts them in time (`handOffLimit` in the worker). A handed
 * delivery costs three statements (entry insert, record insert with the result, entry delete) against six for one
 * stored free and claimed from the queue, and one that waited too long is released with two more, so a worker
 * that falls behind is better off holding them as long as it starts them in time.
 */
export function handOffLimitOf(config: Pick<WebhooksConfig, 'concurrency'>): number {
  return config.concurrency * 4;
}

export async function createWebhooksServer(deps: {
  config: WebhooksConfig;
  infra: ServiceInfra;
  extraCa?: readonly string[];
  resolver?: Resolver;
}): Promise<ServiceParts> {
  const { config, infra } = deps;
  const { logger, metrics, nats } = infra;
  const stored = createWebhooksRepository(infra.mongo.db);
  const deliveries = createDeliveriesRepository(infra.mongo.db);
  await Promise.all([stored.ensureIndexes(), deliveries.ensureIndexes()]);
  // The fan-out asks which webhooks an event goes to once per event: from memory, kept current across replicas.
  const changes = connectSubscriptionCache(nats, logger);
  const webhooks = withSubscriptionCache(stored, { ttlMs: config.subscriptionCacheTtlMs, broadcast: changes.broadcast });
  const detach = changes.attach(webhooks);

  const endpoint = createEndpointClient({
    allowPrivateNetworks: config.allowPrivateNetworks,
    timeoutMs: config.timeoutMs,
    responseTextLimit: config.responseTextLimit,
    ...(deps.extraCa ? { extraCa: deps.extraCa } : {}),
    ...(deps.resolver ? { resolver: deps.resolver } : {}),
  });
  if (config.allowPrivateNetworks) logger.warn('WEBHOOK_ALLOW_PRIVATE_NETWORKS is on: webhooks may reach loopback and private addresses');

  const deliverer = createDeliverer({ webhooks, deliveries, endpoint, policy: retryPolicyOf(config), logger: logger.child({ worker: 'delivery' }) });
  const worker = createDeliveryWorker({
    deliveries,
    deliverer,
    concurrency: config.concurrency,
    perWebhookConcurrency: config.perWebhookConcurrency,
    roundSize: roundSizeOf(config),
    leaseMs: config.claimLeaseMs,
    pollIntervalMs: config.pollIntervalMs,
    handOffMaxAgeMs: handOffMaxAgeOf(config),
    handOffLimit: handOffLimitOf(config),
    logger: logger.child({ worker: 'delivery' }),
  });
  worker.start();

  // The one scan of the deliveries besides the sweep: pending ones without a queue entry (a crash between the two writes,
  // or records from before the queue) are queued again. At start (in the background) and after every sweep.
  const repair = () => deliveries.repairQueue(new Date())
    .then((n) => {
      if (n > 0) {
        logger.info({ queued: n }, 'pending deliveries without a queue entry queued again');
        worker.kick();
      }
    })
    .catch((err: unknown) => logger.warn({ err }, 'delivery queue repair failed'));
  void repair();

  const sweeper = setInterval(() => {
    const t = Date.now();
    deliveries.sweep(new Date(t - config.deliveryRetentionDays * 86_400_000), new Date(t))
      .then((n) => { if (n > 0) logger.info({ deleted: n }, 'old delivery records swept'); })
      .catch((err: unknown) => logger.warn({ err }, 'delivery sweep failed'))
      .finally(() => void repair());
  }, config.sweepIntervalMs);
  sweeper.unref();

  return {
    services: [bindService<webhooksV1.WebhooksServiceServer>({
      name: 'webhooks',
      definition: webhooksV1.WebhooksServiceService,
      handlers: createWebhooksHandlers({ webhooks, deliveries, endpoint, deliverer, timeoutMs: config.timeoutMs, leaseMs: config.claimLeaseMs }),
      logger,
      metrics,
    })],
    consumers: [createFanoutConsumer({
      webhooks, deliveries, nats, logger, metrics, onDeliveries: () => worker.kick(), ...(worker.handOff ? { handOff: worker.handOff } : {}),
      direct: directAllowed(config.timeoutMs),
    })],
    workers: [
      { name: 'delivery worker', stop: () => worker.stop() },
      { name: 'delivery sweeper', stop: async () => clearInterval(sweeper) },
      { name: 'subscription cache', stop: async () => detach() },
    ],
  };
}
