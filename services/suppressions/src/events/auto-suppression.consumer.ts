import {
  createDurableConsumer, PoisonEventError, subjectFor, type DurableConsumer, type EventEnvelope, type EventHandler, type Logger,
  type NatsHandle, type ServiceMetrics,
} from '@mailfleet/kit';
import { AUTO_EVENT_TYPES, isIgnored, MalformedEventError, planAutoSuppression } from '../domain/auto-suppression.js';
import type { ProcessedEventsRepository } from '../repositories/processed-events.repository.js';
import type { SuppressionsRepository } from '../repositories/suppressions.repository.js';

/** Durable name shared by every replica: each event is applied by one of them. */
export const AUTO_SUPPRESSION_DURABLE = 'suppressions-auto';

export interface AutoSuppressionDeps {
  readonly suppressions: SuppressionsRepository;
  readonly processed: ProcessedEventsRepository;
  readonly now?: () => Date;
}

/**
 * Applies one event. Idempotent on the event id: an id already recorded
 * changes nothing. The id is recorded only after every address is written,
 * so a crash in between leads to a redelivery that rewrites the same values.
 */
export function createAutoSuppressionHandler(deps: AutoSuppressionDeps): EventHandler {
  const now = deps.now ?? (() => new Date());
  return async (event: EventEnvelope, { log }) => {
    if (await deps.processed.has(event.id)) {
      log.debug('event already applied');
      return;
    }
    let plan;
    try {
      plan = planAutoSuppression(event.type, event.data);
    } catch (err) {
      if (err instanceof MalformedEventError) throw new PoisonEventError(err.message);
      throw err;
    }
    if (isIgnored(plan)) {
      log.debug({ why: plan.ignored }, 'event does not suppress');
      return;
    }
    if (!event.teamId) throw new PoisonEventError(`${event.type}: teamId is required`);
    if (plan.skipped.length > 0) log.warn({ skipped: plan.skipped.length }, 'recipients without a well-formed address were not suppressed');
    for (const email of plan.emails) {
      await deps.suppressions.upsert({ teamId: event.teamId, email, reason: plan.reason, source: plan.source, now: now() });
    }
    await deps.processed.record({ eventId: event.id, type: event.type, teamId: event.teamId, now: now() });
    log.info({ reason: plan.reason, addresses: plan.emails.length }, 'addresses suppressed automatically');
  };
}

export function createAutoSuppressionConsumer(opts: AutoSuppressionDeps & { nats: NatsHandle; logger: Logger; metrics?: ServiceMetrics }): DurableConsumer {
  return createDurableConsumer({
    nats: opts.nats,
    durable: AUTO_SUPPRESSION_DURABLE,
    filterSubjects: AUTO_EVENT_TYPES.map(subjectFor),
    handler: createAutoSuppressionHandler(opts),
    logger: opts.logger,
    metrics: opts.metrics,
  });
}
