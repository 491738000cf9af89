import {
  createBatchConsumer, type BatchHandler, type DurableConsumer, type Logger, type NatsHandle, type ServiceMetrics,
} from '@mailfleet/kit';
import { MalformedEventError, readEmailEvent, type EmailFact } from '../domain/events.js';
import type { FeedRepository } from '../repositories/feed.repository.js';
import type { CountInput, RollupsRepository } from '../repositories/rollups.repository.js';

/** Durable name shared by every replica: each event is applied by one of them. */
export const EMAIL_EVENTS_DURABLE = 'analytics-email-events';

export interface EmailEventsDeps {
  readonly rollups: RollupsRepository;
  readonly feed: FeedRepository;
}

/**
 * Applies a batch of `email.*` events: every counter they advance is counted
 * once per email with one batched counting (one write per rollup document, not
 * per event), and meanwhile the events join the feed in one insert keyed by event id.
 * Both are idempotent on the event, so a batch that fails is simply delivered
 * again and resumes where it stopped. A malformed event is terminated alone; an
 * event whose counting another delivery holds right now is retried later (its
 * feed entry is written already, once).
 */
export function createEmailEventsHandler(deps: EmailEventsDeps): BatchHandler {
  return async (batch, { log }) => {
    const poison = new Map<string, string>();
    const facts: EmailFact[] = [];
    for (const { event } of batch) {
      try {
        const fact = readEmailEvent(event);
        if (fact) facts.push(fact);
      } catch (err) {
        if (!(err instanceof MalformedEventError)) throw err;
        poison.set(event.id, err.message);
      }
    }
    const countings: CountInput[] = facts.flatMap((fact) => {
      const rollup = { teamId: fact.teamId, day: fact.day, domainId: fact.domainId, kind: fact.kind };
      return fact.metrics.map((metric) => ({ teamId: fact.teamId, emailId: fact.emailId, metric, eventId: fact.eventId, rollup }));
    });
    // Two collections, so the store writes them side by side; both are idempotent, so either may go first.
    const [result] = await Promise.all([
      countings.length > 0 ? deps.rollups.countBatch(countings) : undefined,
      deps.feed.addMany(facts),
    ]);
    log.debug({ events: batch.length, counted: result?.counted ?? 0, alreadyCounted: result?.alreadyCounted ?? 0 }, 'email events applied');
    return { poison, ...(result && result.busy.size > 0 ? { retry: result.busy } : {}) };
  };
}

/**
 * Batches handled at once: while one batch waits on one collection (its marks), the next is written to the others.
 * Safe for counting: two batches claiming one mark are told apart by its unique insert, exactly as two replicas are.
 */
export const EMAIL_EVENTS_IN_FLIGHT = 2;

/**
 * How long a batch's first event waits for others: a batch costs about five writes whatever its size (marks,
 * rollups, settlements, pulls, feed), so at a steady trickle a batch of what 250 ms bring costs the store far less than
 * one of what arrived during the last batch's writes, or of what 50 ms bring (at 70 sends a second, about ten events).
 * Counters and the feed trail by at most this much more, well inside the two seconds a counter may lag.
 */
export const EMAIL_EVENTS_LINGER_MS = 250;

export function createEmailEventsConsumer(opts: EmailEventsDeps & { nats: NatsHandle; logger: Logger; metrics?: ServiceMetrics }): DurableConsumer {
  return createBatchConsumer({
    nats: opts.nats,
    durable: EMAIL_EVENTS_DURABLE,
    filterSubjects: ['mailfleet.email.>'],
    handler: createEmailEventsHandler(opts),
    maxInFlight: EMAIL_EVENTS_IN_FLIGHT,
    lingerMs: EMAIL_EVENTS_LINGER_MS,
    logger: opts.logger,
    metrics: opts.metrics,
  });
}
