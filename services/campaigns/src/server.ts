import { bindService, type ServiceInfra, type ServiceParts } from '@mailfleet/kit';
import { campaignsV1 } from '@mailfleet/proto';
import { createUpstreams, type CampaignUpstreams } from './clients/upstreams.js';
import type { CampaignsConfig } from './config.js';
import { isValidTimeZone } from './domain/schedule.js';
import { createCountersConsumer } from './events/counters.consumer.js';
import { createCampaignsRepository, createOnceRepository } from './repositories/campaigns.repository.js';
import { createCampaignsHandlers } from './rpc/campaigns.rpc.js';
import { createBatchSender } from './workers/batch-sender.js';

/**
 * Binds the campaigns service: repositories (indexes created at start), the
 * RPC handlers, the batch sender, the counters consumer and the sweeper of
 * handled keys. `upstreams` may be given (tests point it at their own peers);
 * otherwise gRPC clients of contacts, domains and emails are built.
 */
export async function createCampaignsServer(deps: { config: CampaignsConfig; infra: ServiceInfra; upstreams?: CampaignUpstreams }): Promise<ServiceParts> {
  const { config, infra } = deps;
  if (!isValidTimeZone(config.scheduleTimeZone)) throw new Error(`CAMPAIGN_TIME_ZONE ${config.scheduleTimeZone} is not a known time zone`);
  const { db } = infra.mongo;
  const campaigns = createCampaignsRepository(db);
  const once = createOnceRepository(db);
  await Promise.all([campaigns.ensureIndexes(), once.ensureIndexes()]);
  const upstreams = deps.upstreams ?? createUpstreams({
    contactsAddr: config.contactsAddr, domainsAddr: config.domainsAddr, emailsAddr: config.emailsAddr, suppressionsAddr: config.suppressionsAddr,
    deadlineMs: config.upstreamDeadlineMs, sendBatchDeadlineMs: config.sendBatchDeadlineMs, logger: infra.logger, metrics: infra.metrics,
  });

  const sender = createBatchSender({
    campaigns, upstreams, logger: infra.logger, publicUrl: config.publicUrl, signingKey: config.trackingSigningKey,
    pollMs: config.senderPollMs, leaseMs: config.batchLeaseMs, retryDelayMs: config.batchRetryDelayMs, windowUnitMs: config.batchWindowUnitMs,
    chunksInFlight: config.chunksInFlight,
  });
  const handlers = createCampaignsHandlers({
    campaigns, upstreams, timeZone: config.scheduleTimeZone, signingKey: config.trackingSigningKey,
    kickSender: () => void sender.tick().catch((err: unknown) => infra.logger.warn({ err }, 'campaign sender pass failed')),
  });
  const consumer = createCountersConsumer({
    nats: infra.nats, logger: infra.logger, metrics: infra.metrics, campaigns, retentionMs: config.processedEventRetentionMs,
  });

  const sweeper = setInterval(() => {
    void once.sweep(new Date(), config.processedEventRetentionMs).catch((err: unknown) => infra.logger.warn({ err }, 'once-key sweep failed'));
  }, 3_600_000);
  sweeper.unref();
  sender.start();

  return {
    services: [bindService<campaignsV1.CampaignsServiceServer>({
      name: 'campaigns', definition: campaignsV1.CampaignsServiceService, handlers, logger: infra.logger, metrics: infra.metrics,
    })],
    consumers: [consumer],
    workers: [
      { name: 'campaign batch sender', stop: () => sender.stop() },
      { name: 'once-key sweeper', stop: async () => clearInterval(sweeper) },
      { name: 'campaign upstream clients', stop: async () => upstreams.close() },
    ],
  };
}
