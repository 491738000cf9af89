import { createBatchConsumer, subjectFor, type DurableConsumer, type Logger, type NatsHandle, type ServiceMetrics } from '@mailfleet/kit';
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
 * campaignId, a batch of events at a time. Each effect has a unique key (the
 * event id; for sent, delivered, opens and clicks the email id, so they count
 * once per email) and the batch is counted with the kit's batched count-once:
 * one claim for all keys, one update per campaign, so a batch costs a few
 * writes whatever its size. A redelivery changes nothing, and a crash between
 * the steps is finished by the redelivery instead of losing or repeating the
 * count. An event whose key another delivery of the same event holds right
 * now is retried later.
 */
export function createCountersConsumer(deps: CountersConsumerDeps): DurableConsumer {
  const now = deps.now ?? (() => new Date());
  return createBatchConsumer({
    nats: deps.nats,
    durable: COUNTERS_DURABLE,
    filterSubjects: COUNTER_EVENT_TYPES.map(subjectFor),
    logger: deps.logger,
    metrics: deps.metrics,
    // Two batches at once: one writes its marks while the other writes the campaigns. Counting stays exact, as two
    // batches claiming one mark are told apart by its unique insert, exactly as two replicas are.
    maxInFlight: 2,
    // A batch costs a few writes whatever its size: gather what 250 ms bring (the counters trail by that much more).
    lingerMs: 250,
    handler: async (batch) => {
      const at = now();
      const inputs = batch.flatMap(({ event }) => counterEffectsOf(event).map((effect) => ({
        id: effect.campaignId, key: `count:${effect.campaignId}:${effect.onceKey}`, eventId: event.id, counters: effect.counters,
        now: at, retentionMs: deps.retentionMs,
      })));
      if (inputs.length === 0) return;
      const { busy } = await deps.campaigns.countBatch(inputs);
      return busy.size > 0 ? { retry: busy } : undefined;
    },
  });
}
