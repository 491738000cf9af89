import {
  createDurableConsumer, PoisonEventError, type DurableConsumer, type EventEnvelope, type EventHandler, type Logger, type NatsHandle,
  type ServiceMetrics,
} from '@mailfleet/kit';
import { MalformedEventError, readEmailEvent, type EmailFact } from '../domain/events.js';
import type { FeedRepository } from '../repositories/feed.repository.js';
import type { RollupsRepository } from '../repositories/rollups.repository.js';

/** Durable name shared by every replica: each event is applied by one of them. */
export const EMAIL_EVENTS_DURABLE = 'analytics-email-events';

export interface EmailEventsDeps {
  readonly rollups: RollupsRepository;
  readonly feed: FeedRepository;
}

function factOf(event: EventEnvelope): EmailFact | undefined {
  try {
    return readEmailEvent(event);
  } catch (err) {
    if (err instanceof MalformedEventError) throw new PoisonEventError(err.message);
    throw err;
  }
}

/**
 * Applies one `email.*` event: each counter it advances is counted once per
 * email (rollups.countOnce: idempotent on the email and counter, so on the
 * event id too), then the event joins the feed (keyed by the event id). Any
 * failure is retried by redelivery, which resumes where it stopped.
 */
export function createEmailEventsHandler(deps: EmailEventsDeps): EventHandler {
  return async (event, { log }) => {
    const fact = factOf(event);
    if (!fact) {
      log.debug('not an email status event; ignored');
      return;
    }
    const rollup = { teamId: fact.teamId, day: fact.day, domainId: fact.domainId, kind: fact.kind };
    for (const metric of fact.metrics) {
      const outcome = await deps.rollups.countOnce({ teamId: fact.teamId, emailId: fact.emailId, metric, eventId: fact.eventId, rollup });
      log.debug({ metric, outcome }, 'counter');
    }
    await deps.feed.add(fact);
  };
}

export function createEmailEventsConsumer(opts: EmailEventsDeps & { nats: NatsHandle; logger: Logger; metrics?: ServiceMetrics }): DurableConsumer {
  return createDurableConsumer({
    nats: opts.nats,
    durable: EMAIL_EVENTS_DURABLE,
    filterSubjects: ['mailfleet.email.>'],
    handler: createEmailEventsHandler(opts),
    logger: opts.logger,
    metrics: opts.metrics,
  });
}
