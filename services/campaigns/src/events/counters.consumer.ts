import { createDurableConsumer, subjectFor, type DurableConsumer, type Logger, type NatsHandle, type ServiceMetrics } from '@mailfleet/kit';
import { COUNTER_EVENT_TYPES, counterEffectsOf } from '../domain/counters.js';
import type { CampaignsRepository } from '../repositories/campaigns.repository.js';

export const COUNTERS_DURABLE = 'campaigns-counters';

export interface CountersConsumerDeps {
  readonly nats: NatsHandle;
  readonly logger: Logger;
  readonly metrics?: ServiceMetrics;
  readonly campaigns: CampaignsRepository;
  readonly retentionMs: number;
  readonly now?: () => Date;
}

/**
 * Keeps the campaign counters from `email.*` events that carry a
 * campaignId. Each effect has a unique key (the event id; for sent,
 * delivered, opens and clicks the email id, so they count once per email)
 * and is counted with the kit's count-once protocol: a redelivery changes
 * nothing, and a crash between claiming the key and adding to the counter
 * is finished by the redelivery instead of losing the count. An effect whose
 * key another delivery of the same event holds right now throws
 * CountingBusyError, and the event is retried.
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
        await deps.campaigns.countOnce({
          id: effect.campaignId, key: `count:${effect.campaignId}:${effect.onceKey}`, eventId: event.id, counters: effect.counters,
          now: now(), retentionMs: deps.retentionMs,
        });
      }
    },
  });
}
