import { DeliverPolicy, type ConsumerMessages } from '@nats-io/jetstream';
import {
  createDurableConsumer, decodeEvent, EVENT_STREAM, PoisonEventError, type DurableConsumer, type Logger, type NatsHandle, type ServiceMetrics,
} from '@mailfleet/kit';
import type { IdentityCache } from '../clients/identity-cache.js';
import type { EmailsRepository } from '../repositories/emails.repository.js';
import type { SendQueueRepository } from '../repositories/send-queue.repository.js';
import { failMutation } from '../sending/outcomes.js';
import { withQueueLock, type HandoffWithdrawal } from '../sending/queue-sync.js';

/**
 * Every replica keeps its own identity cache, so every replica must hear every
 * domain event: an ordered (ephemeral, per-process) consumer from "now" on.
 * Missing an event while disconnected only leaves an entry until its TTL.
 */
export function createIdentityInvalidator(opts: { nats: NatsHandle; cache: IdentityCache; logger: Logger }): DurableConsumer {
  let messages: ConsumerMessages | undefined;
  let stopping = false;
  let loop: Promise<void> | undefined;

  async function run(): Promise<void> {
    while (!stopping) {
      try {
        const consumer = await opts.nats.js.consumers.get(EVENT_STREAM, { filter_subjects: ['mailfleet.domain.>'], deliver_policy: DeliverPolicy.New });
        messages = await consumer.consume();
        // Anything cached before this point may have missed an event.
        opts.cache.clear();
        for await (const msg of messages) {
          try {
            const event = decodeEvent(msg.data);
            const data = event.data as { id?: unknown; name?: unknown };
            opts.cache.invalidate({
              teamId: event.teamId,
              domainId: typeof data.id === 'string' ? data.id : String(data.id ?? ''),
              domainName: typeof data.name === 'string' ? data.name : undefined,
            });
          } catch {
            opts.cache.clear();
          }
        }
      } catch (err) {
        if (stopping) break;
        opts.logger.warn({ err }, 'domain event listener interrupted; resubscribing');
      }
      if (!stopping) {
        opts.cache.clear();
        await new Promise((r) => setTimeout(r, 1_000));
      }
    }
  }

  return {
    async start() {
      stopping = false;
      loop = run();
    },
    async stop() {
      stopping = true;
      try {
        await messages?.close();
      } catch {
        // already closed
      }
      await loop;
    },
  };
}

/**
 * `domain.deleted` (SPEC 4.3: "emails scheduled from the domain fail"): every
 * email of the domain still waiting to be sent becomes FAILED with
 * `email.failed`. One replica handles each event (a shared durable). An email
 * a worker is sending at this moment is left to that worker (its lease on
 * the queue entry keeps this change out), whose next look at the domain
 * fails it. Idempotent: a redelivery finds nothing pending.
 */
export function createDomainDeletedConsumer(opts: {
  nats: NatsHandle;
  emails: EmailsRepository;
  queue: SendQueueRepository;
  cache: IdentityCache;
  logger: Logger;
  metrics?: ServiceMetrics;
  /** The local worker's hand-off: its emails of the domain are withdrawn and failed like unclaimed ones. */
  handoff?: HandoffWithdrawal;
}): DurableConsumer {
  return createDurableConsumer({
    nats: opts.nats,
    durable: 'emails-domain-deleted',
    filterSubjects: ['mailfleet.domain.deleted'],
    logger: opts.logger,
    metrics: opts.metrics,
    handler: async (event) => {
      const data = event.data as { id?: unknown; name?: unknown };
      if (data.id === undefined || data.id === null) throw new PoisonEventError('domain.deleted without data.id');
      const domainId = String(data.id);
      opts.cache.invalidate({ teamId: event.teamId, domainId, domainName: typeof data.name === 'string' ? data.name : undefined });
      const ids = await opts.emails.pendingOfDomain(event.teamId, domainId);
      const name = typeof data.name === 'string' ? data.name : domainId;
      let failed = 0;
      for (const id of ids) {
        // One being sent right now is left to its worker, whose next look at the domain fails it.
        const res = await withQueueLock(opts, id, () => opts.emails.mutate(id, (e) => failMutation(e, `The sending domain ${name} was deleted`)));
        if (!res.busy && res.result?.applied) failed++;
      }
      if (failed > 0) {
        opts.logger.info({ domainId, failed }, 'emails of a deleted domain failed');
      }
    },
  });
}
