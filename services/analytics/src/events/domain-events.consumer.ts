import {
  createDurableConsumer, PoisonEventError, type DurableConsumer, type EventHandler, type Logger, type NatsHandle, type ServiceMetrics,
} from '@mailfleet/kit';
import { MalformedEventError, readDomainEvent, type DomainFact } from '../domain/events.js';
import type { DomainsRepository } from '../repositories/domains.repository.js';

/** Durable name shared by every replica. */
export const DOMAIN_EVENTS_DURABLE = 'analytics-domains';

/** Keeps the domain id -> name projection (filters by name, names in GET /v1/metrics). Naturally idempotent: newer facts win. */
export function createDomainEventsHandler(deps: { domains: DomainsRepository }): EventHandler {
  return async (event, { log }) => {
    let fact: DomainFact | undefined;
    try {
      fact = readDomainEvent(event);
    } catch (err) {
      if (err instanceof MalformedEventError) throw new PoisonEventError(err.message);
      throw err;
    }
    if (!fact) {
      log.debug('domain event type not projected; ignored');
      return;
    }
    await deps.domains.apply(fact);
  };
}

export function createDomainEventsConsumer(opts: { domains: DomainsRepository; nats: NatsHandle; logger: Logger; metrics?: ServiceMetrics }): DurableConsumer {
  return createDurableConsumer({
    nats: opts.nats,
    durable: DOMAIN_EVENTS_DURABLE,
    filterSubjects: ['mailfleet.domain.>'],
    handler: createDomainEventsHandler(opts),
    logger: opts.logger,
    metrics: opts.metrics,
  });
}
