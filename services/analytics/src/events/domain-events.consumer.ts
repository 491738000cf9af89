import {
  createBatchConsumer, type BatchHandler, type DurableConsumer, type Logger, type NatsHandle, type ServiceMetrics,
} from '@mailfleet/kit';
import { MalformedEventError, readDomainEvent, type DomainFact } from '../domain/events.js';
import type { DomainsRepository } from '../repositories/domains.repository.js';

/** Durable name shared by every replica. */
export const DOMAIN_EVENTS_DURABLE = 'analytics-domains';

/** Whether `a` wins over `b` in the projection: newer, or at the same instant a deletion over an update. */
function supersedes(a: DomainFact, b: DomainFact): boolean {
  const d = a.at.getTime() - b.at.getTime();
  return d > 0 || (d === 0 && a.deleted && !b.deleted);
}

/**
 * Keeps the domain id -> name projection (filters by name, names in GET /v1/metrics), a batch at a time: of a
 * batch's facts about one domain only the one that wins is written (the repository keeps the newest anyway), so
 * a batch costs one write per domain it names, all at once. Naturally idempotent: newer facts win. A malformed
 * event is terminated alone; the rest of its batch is applied.
 */
export function createDomainEventsHandler(deps: { domains: DomainsRepository }): BatchHandler {
  return async (batch, { log }) => {
    const poison = new Map<string, string>();
    const latest = new Map<string, DomainFact>();
    for (const { event } of batch) {
      let fact: DomainFact | undefined;
      try {
        fact = readDomainEvent(event);
      } catch (err) {
        if (!(err instanceof MalformedEventError)) throw err;
        poison.set(event.id, err.message);
        continue;
      }
      if (!fact) continue;
      const key = JSON.stringify([fact.teamId, fact.id]);
      const seen = latest.get(key);
      if (!seen || supersedes(fact, seen)) latest.set(key, fact);
    }
    await Promise.all([...latest.values()].map((fact) => deps.domains.apply(fact)));
    log.debug({ events: batch.length, domains: latest.size }, 'domain events applied');
    return { poison };
  };
}

export function createDomainEventsConsumer(opts: { domains: DomainsRepository; nats: NatsHandle; logger: Logger; metrics?: ServiceMetrics }): DurableConsumer {
  return createBatchConsumer({
    nats: opts.nats,
    durable: DOMAIN_EVENTS_DURABLE,
    filterSubjects: ['mailfleet.domain.>'],
    handler: createDomainEventsHandler(opts),
    logger: opts.logger,
    metrics: opts.metrics,
  });
}
