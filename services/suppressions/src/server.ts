import { bindService, type ServiceInfra, type ServiceParts } from '@mailfleet/kit';
import { suppressionsV1 } from '@mailfleet/proto';
import type { SuppressionsConfig } from './config.js';
import { createAutoSuppressionConsumer } from './events/auto-suppression.consumer.js';
import { createProcessedEventsRepository } from './repositories/processed-events.repository.js';
import { createSuppressionsRepository } from './repositories/suppressions.repository.js';
import { createSuppressionsHandlers } from './rpc/suppressions.rpc.js';

/**
 * Binds the suppressions service: repositories (indexes created and entries
 * under a random id moved to their derived one at start, and at each sweep),
 * the RPC handlers, the consumer that suppresses hard-bounced, complaining and
 * unsubscribed addresses, and the sweeper of expired applied-event ids.
 * Publishes nothing, so it has no outbox.
 */
export async function createSuppressionsServer(deps: { config: SuppressionsConfig; infra: ServiceInfra }): Promise<ServiceParts> {
  const { db } = deps.infra.mongo;
  const { logger, metrics, nats } = deps.infra;
  const suppressions = createSuppressionsRepository(db);
  const processed = createProcessedEventsRepository(db, { retentionMs: deps.config.processedEventRetentionMs });
  await Promise.all([suppressions.ensureIndexes(), processed.ensureIndexes()]);
  // Before the first check is answered: a check reads entries by their derived id only.
  const migrate = async () => {
    const moved = await suppressions.migrateLegacy();
    if (moved > 0) logger.info({ moved }, 'suppressions stored under a random id moved to their derived id');
  };
  await migrate();

  const sweeper = setInterval(() => {
    processed.sweep().catch((err: unknown) => logger.warn({ err }, 'processed-event sweep failed'));
    // Entries a replica of the older version wrote during a rolling upgrade.
    migrate().catch((err: unknown) => logger.warn({ err }, 'moving suppressions to their derived id failed'));
  }, deps.config.sweepIntervalMs);
  sweeper.unref();

  return {
    services: [bindService<suppressionsV1.SuppressionsServiceServer>({
      name: 'suppressions', definition: suppressionsV1.SuppressionsServiceService,
      handlers: createSuppressionsHandlers({ suppressions }), logger, metrics,
    })],
    consumers: [createAutoSuppressionConsumer({ suppressions, processed, nats, logger, metrics })],
    workers: [{ name: 'processed-event sweeper', stop: async () => clearInterval(sweeper) }],
  };
}
