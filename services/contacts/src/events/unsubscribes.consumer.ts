import { createDurableConsumer, type DurableConsumer, type Logger, type NatsHandle, type ServiceMetrics } from '@mailfleet/kit';
import { unsubscribeDetails, type UnsubscribeReason } from '../domain/contact.js';
import { DELIVERY_SUBJECTS, unsubscribePlanFor } from '../domain/delivery-events.js';
import type { ProcessedEventsRepository } from '../repositories/processed-events.repository.js';

export const UNSUBSCRIBES_DURABLE = 'contacts-unsubscribes';

export interface UnsubscribesConsumerDeps {
  readonly nats: NatsHandle;
  readonly logger: Logger;
  readonly metrics?: ServiceMetrics;
  readonly processed: ProcessedEventsRepository;
  readonly retentionMs: number;
  /** Unsubscribes the address in every live book of the team; returns how many contacts changed. */
  readonly unsubscribeByEmail: (teamId: string, email: string, details: { reason: UnsubscribeReason; note: string | null; source: string | null }) => Promise<number>;
  readonly now?: () => Date;
}

/**
 * Hard bounces and complaints unsubscribe the recipient in every book of the
 * team (reason HARD_BOUNCE / COMPLAINT, source the email id). Idempotent on
 * the event id: a handled id is recorded and skipped on redelivery; the
 * unsubscribe itself changes nothing on a contact already unsubscribed.
 */
export function createUnsubscribesConsumer(deps: UnsubscribesConsumerDeps): DurableConsumer {
  const now = deps.now ?? (() => new Date());
  return createDurableConsumer({
    nats: deps.nats,
    durable: UNSUBSCRIBES_DURABLE,
    filterSubjects: DELIVERY_SUBJECTS,
    logger: deps.logger,
    metrics: deps.metrics,
    concurrency: 4,
    handler: async (event, { log }) => {
      if (await deps.processed.seen(UNSUBSCRIBES_DURABLE, event.id)) return;
      const plan = unsubscribePlanFor(event);
      if (plan) {
        const details = unsubscribeDetails(plan.reason, undefined, plan.source ?? undefined);
        let changed = 0;
        for (const email of plan.emails) changed += await deps.unsubscribeByEmail(plan.teamId, email, details);
        if (changed > 0) log.info({ changed, reason: plan.reason }, 'contacts unsubscribed after a delivery event');
      }
      await deps.processed.record(UNSUBSCRIBES_DURABLE, event.id, now(), deps.retentionMs);
    },
  });
}
