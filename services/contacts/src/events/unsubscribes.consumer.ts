import { createBatchConsumer, PoisonEventError, type BatchHandler, type DurableConsumer, type Logger, type NatsHandle, type ServiceMetrics } from '@mailfleet/kit';
import { unsubscribeDetails } from '../domain/contact.js';
import { DELIVERY_SUBJECTS, unsubscribePlanFor } from '../domain/delivery-events.js';
import type { ProcessedEventsRepository } from '../repositories/processed-events.repository.js';
import type { UnsubscribeRequest } from '../repositories/contacts.repository.js';

export const UNSUBSCRIBES_DURABLE = 'contacts-unsubscribes';

export interface UnsubscribesHandlerDeps {
  readonly processed: ProcessedEventsRepository;
  readonly retentionMs: number;
  /** Unsubscribes each address in every live book of its team; returns how many contacts changed. */
  readonly unsubscribeMany: (requests: readonly UnsubscribeRequest[]) => Promise<number>;
  readonly now?: () => Date;
}

export interface UnsubscribesConsumerDeps extends UnsubscribesHandlerDeps {
  readonly nats: NatsHandle;
  readonly logger: Logger;
  readonly metrics?: ServiceMetrics;
}

/**
 * Hard bounces and complaints unsubscribe the recipient in every book of the
 * team (reason HARD_BOUNCE / COMPLAINT, source the email id), a batch of
 * events at a time: one read of the event ids handled already, the
 * unsubscribes of the whole batch as one bulk write (each contact's write
 * carries its own events, compare-and-set on its version), one insert of the
 * handled ids. Idempotent on the event id: the ids are recorded after the
 * writes and skipped on redelivery (so a contact the team re-subscribed stays
 * subscribed); the unsubscribe itself changes nothing on a contact already
 * unsubscribed. A malformed event is terminated alone.
 */
export function createUnsubscribesHandler(deps: UnsubscribesHandlerDeps): BatchHandler {
  const now = deps.now ?? (() => new Date());
  return async (batch, { log }) => {
    const seen = await deps.processed.seenAmong(UNSUBSCRIBES_DURABLE, batch.map(({ event }) => event.id));
    const poison = new Map<string, string>();
    const requests: UnsubscribeRequest[] = [];
    const handled: string[] = [];
    for (const { event } of batch) {
      if (seen.has(event.id)) continue;
      let plan;
      try {
        plan = unsubscribePlanFor(event);
      } catch (err) {
        if (!(err instanceof PoisonEventError)) throw err;
        poison.set(event.id, err.message);
        continue;
      }
      if (plan) {
        const details = unsubscribeDetails(plan.reason, undefined, plan.source ?? undefined);
        for (const email of plan.emails) requests.push({ teamId: plan.teamId, email, details });
      }
      handled.push(event.id);
    }
    const changed = requests.length > 0 ? await deps.unsubscribeMany(requests) : 0;
    await deps.processed.recordMany(UNSUBSCRIBES_DURABLE, handled, now(), deps.retentionMs);
    if (changed > 0) log.info({ changed, events: handled.length }, 'contacts unsubscribed after delivery events');
    return poison.size > 0 ? { poison } : undefined;
  };
}

export function createUnsubscribesConsumer(deps: UnsubscribesConsumerDeps): DurableConsumer {
  return createBatchConsumer({
    nats: deps.nats,
    durable: UNSUBSCRIBES_DURABLE,
    filterSubjects: DELIVERY_SUBJECTS,
    logger: deps.logger,
    metrics: deps.metrics,
    handler: createUnsubscribesHandler(deps),
  });
}
