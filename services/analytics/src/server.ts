import { bindService, type ServiceInfra, type ServiceParts } from '@mailfleet/kit';
import { analyticsV1 } from '@mailfleet/proto';
import type { AnalyticsConfig } from './config.js';
import { createDomainEventsConsumer } from './events/domain-events.consumer.js';
import { createEmailEventsConsumer } from './events/email-events.consumer.js';
import { createDomainsRepository } from './repositories/domains.repository.js';
import { createFeedRepository } from './repositories/feed.repository.js';
import { createRollupsRepository } from './repositories/rollups.repository.js';
import { createAnalyticsHandlers } from './rpc/analytics.rpc.js';

const DAY_MS = 86_400_000;

/**
 * Binds the analytics service: repositories (indexes created at start), the
 * read RPCs, the durable consumers of `email.*` (rollups and feed) and
 * `domain.*` (names), and the sweeper of expired feed events and count
 * marks. Publishes nothing, so it has no outbox.
 */
export async function createAnalyticsServer(deps: { config: AnalyticsConfig; infra: ServiceInfra }): Promise<ServiceParts> {
  const { db } = deps.infra.mongo;
  const { logger, metrics, nats } = deps.infra;
  const { config } = deps;
  const rollups = createRollupsRepository(db);
  const feed = createFeedRepository(db);
  const domains = createDomainsRepository(db);
  await Promise.all([rollups.ensureIndexes(), feed.ensureIndexes(), domains.ensureIndexes()]);

  const sweep = async () => {
    const now = Date.now();
    if (config.feedRetentionDays > 0) await feed.sweep(new Date(now - config.feedRetentionDays * DAY_MS));
    if (config.markRetentionDays > 0) await rollups.sweepMarks(new Date(now - config.markRetentionDays * DAY_MS));
  };
  const sweeper = setInterval(() => {
    sweep().catch((err: unknown) => logger.warn({ err }, 'analytics sweep failed'));
  }, config.sweepIntervalMs);
  sweeper.unref();

  return {
    services: [bindService<analyticsV1.AnalyticsServiceServer>({
      name: 'analytics', definition: analyticsV1.AnalyticsServiceService,
      handlers: createAnalyticsHandlers({ rollups, feed, domains }), logger, metrics,
    })],
    consumers: [
      createEmailEventsConsumer({ rollups, feed, nats, logger, metrics }),
      createDomainEventsConsumer({ domains, nats, logger, metrics }),
    ],
    workers: [{ name: 'analytics sweeper', stop: async () => clearInterval(sweeper) }],
  };
}
