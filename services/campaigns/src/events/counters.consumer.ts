import { createDurableConsumer, subjectFor, type DurableConsumer, type Logger, type NatsHandle, type ServiceMetrics } from '@mailfleet/kit';
import { COUNTER_EVENT_TYPES, counterEffectsOf } from '../domain/counters.js';
import type { CampaignsRepository, OnceRepository } from '../repositories/campaigns.repository.js';

export const COUNTERS_DURABLE = 'campaigns-counters';

export interface CountersConsumerDeps {
  readonly nats: NatsHandle;
  readonly logger: Logger;
  readonly metrics?: ServiceMetrics;
  readonly campaigns: CampaignsRepository;
  readonly once: OnceRepository;
  readonly retentionMs: number;
  readonly now?: () => Date;
}

/**
 * Keeps the campaign counters from `email.*` events that carry a
 * campaignId. Each effect is claimed first with a unique key (the event id;
 * for opens and clicks the email id, so they count once per email), then
 * applied: a redelivery finds the key and changes nothing.
 */
export function createCountersConsumer(deps: CountersConsumerDeps): DurableConsumer {
  const now = deps.now ?? (() => new Date());
  return createDurableConsumer({
    nats: deps.nats,
    durable: COUNTERS_DURABLE,
    filterSubjects: COUNTER_EVENT_TYPES.map(subjectFor),
    logger: deps.logger,
    metrics: deps.metrics,
    concurrency: 4,
    handler: async (event) => {
      for (const effect of counterEffectsOf(event)) {
        if (await deps.once.claim(`count:${effect.campaignId}:${effect.onceKey}`, now(), deps.retentionMs)) {
          await deps.campaigns.incCounters(effect.campaignId, effect.counters, now());
        }
      }
    },
  });
}
