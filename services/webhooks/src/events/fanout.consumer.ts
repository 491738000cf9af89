import {
  createBatchConsumer, type BatchHandler, type DurableConsumer, type EventHandler, type Logger, type NatsHandle, type ServiceMetrics,
} from '@mailfleet/kit';
import { FANOUT_SUBJECTS, isPublicEventType } from '../domain/event-types.js';
import { serializePayload } from '../domain/payload.js';
import type { DeliveriesRepository, PendingInput } from '../repositories/deliveries.repository.js';
import type { CachedWebhooksRepository } from '../repositories/subscription-cache.js';
import type { DeliveryHandOff } from '../workers/delivery.worker.js';

/** Durable name shared by every replica: each event is fanned out by one of them. */
export const FANOUT_DURABLE = 'webhooks-fanout';
const FANOUT_MAX_DELIVER = 2_016;

/**
 * A webhook receives events that happened after it was made, give or take
 * this much: clocks of the publishing services may be a little apart.
 */
export const CLOCK_SKEW_ALLOWANCE_MS = 60_000;

export interface FanoutDeps {
  readonly webhooks: Pick<CachedWebhooksRepository, 'subscribed'>;
  readonly deliveries: DeliveriesRepository;
  /** Called when deliveries were made (wakes the delivery worker). */
  readonly onDeliveries?: () => void;
  /**
   * This replica's delivery worker, when it takes new deliveries claimed at fan-out: while it has room, a batch's
   * deliveries are stored claimed for it and handed over, so they are attempted without being claimed from the queue.
   */
  readonly handOff?: DeliveryHandOff;
  /** False: never attempt straight from the fan-out (the hand-off and the queue only). Default true. */
  readonly direct?: boolean;
  /** How long a direct attempt may wait for its post to start (default DIRECT_START_WITHIN_MS). */
  readonly directStartWithinMs?: number;
  readonly now?: () => Date;
}

/**
 * How long a batch's deliveries attempted straight from the fan-out may wait for their post to start (behind a slow
 * endpoint's cap); the rest are stored for the queue. With a post's time-out this stays well inside the stream's
 * ack wait (30 s), so the batch is never delivered again meanwhile.
 */
export const DIRECT_START_WITHIN_MS = 5_000;
/** The fan-out's ack wait: a batch not acknowledged within it is delivered again. */
export const FANOUT_ACK_WAIT_MS = 30_000;

/** Whether a direct attempt (started within DIRECT_START_WITHIN_MS, then a post's time-out) ends inside the ack wait with 5 s to spare. */
export function directAllowed(timeoutMs: number): boolean {
  return DIRECT_START_WITHIN_MS + timeoutMs + 5_000 <= FANOUT_ACK_WAIT_MS;
}

/**
 * Turns a batch of events into PENDING deliveries, one per ACTIVE webhook of
 * the team subscribed to the type that existed when the event happened (a
 * replay of old events never reaches webhooks made since;
 * CLOCK_SKEW_ALLOWANCE_MS of slack for clocks), all stored with one write per
 * collection. Nothing is sent here: the consumer acks as soon as the
 * deliveries are stored, so a slow endpoint never holds up the stream.
 * Idempotent on the event id: deliveries are unique on (webhook, event), so a
 * redelivered batch (crash before the ack) makes no second one. Internal types
 * (key.revoked, contact.unsubscribed...) are acknowledged and dropped.
 */
export function createFanoutBatchHandler(deps: FanoutDeps): BatchHandler {
  const now = deps.now ?? (() => new Date());
  return async (batch, { log }) => {
    /** Events delivered before (a crash or time-out before the ack): their deliveries may exist already. */
    const again = new Set<string>();
    const perEvent = await Promise.all(batch.map(async ({ event, deliveryCount }): Promise<PendingInput[]> => {
      if (deliveryCount > 1) again.add(event.id);
      if (!isPublicEventType(event.type)) return [];
      const happened = Date.parse(event.createdAt);
      const eventTime = Number.isNaN(happened) ? now() : new Date(happened);
      const hooks = await deps.webhooks.subscribed(event.teamId, event.type, new Date(eventTime.getTime() + CLOCK_SKEW_ALLOWANCE_MS));
      if (hooks.length === 0) return [];
      const payload = serializePayload(event);
      const at = now();
      return hooks.map((hook) => ({ teamId: event.teamId, webhookId: hook.id, eventId: event.id, type: event.type, payload, now: at }));
    }));
    const inputs = perEvent.flat();
    if (inputs.length === 0) return;
    let created = 0;
    const handOff = deps.handOff;
    // First deliveries of events are stored as queue entries only (handed over, or free when the worker has no
    // room). Redelivered events go through createPendingMany, which writes entry and record at once: the unique
    // index on the records also finds a delivery whose id is not its pair's (one made before ids were derived).
    const first = inputs.filter((i) => !again.has(i.eventId));
    const rest = first.length === inputs.length ? [] : inputs.filter((i) => again.has(i.eventId));
    if (handOff && first.length > 0 && deps.direct !== false && await handOff.directOk()) {
      // Attempted now, the batch unacknowledged until each result is its record (or the delivery, not started in
      // time, is stored after all): no queue entry is written or deleted.
      const claims = await deps.deliveries.directClaims(first);
      await handOff.attemptDirect(claims, Date.now() + (deps.directStartWithinMs ?? DIRECT_START_WITHIN_MS));
      created += claims.length;
    } else if (handOff && handOff.room() > 0 && first.length > 0) {
      const claims = await deps.deliveries.createClaimedMany(first, now(), handOff.leaseMs);
      handOff.adopt(claims);
      created += claims.length;
    } else if (first.length > 0) {
      // Free for any replica's claims, as queue entries only: their records are written with their first result.
      created += await deps.deliveries.createQueuedMany(first);
      deps.onDeliveries?.();
    }
    if (rest.length > 0) {
      const made = await deps.deliveries.createPendingMany(rest);
      if (made > 0) deps.onDeliveries?.();
      created += made;
    }
    log.debug({ events: batch.length, deliveries: inputs.length, created }, 'events fanned out to webhooks');
  };
}

/** The batch handler for one event (the fan-out's rules, one event at a time). */
export function createFanoutHandler(deps: FanoutDeps): EventHandler {
  const handle = createFanoutBatchHandler(deps);
  return async (event, { deliveryCount, log }) => {
    await handle([{ event, deliveryCount }], { log });
  };
}

/** Batches of up to this many events are fanned out with one write per collection. */
export const FANOUT_BATCH = 200;

export function createFanoutConsumer(opts: FanoutDeps & { nats: NatsHandle; logger: Logger; metrics?: ServiceMetrics }): DurableConsumer {
  return createBatchConsumer({
    nats: opts.nats,
    durable: FANOUT_DURABLE,
    filterSubjects: FANOUT_SUBJECTS,
    handler: createFanoutBatchHandler(opts),
    batchSize: FANOUT_BATCH,
    // Two batches at once: one writes the queue while the other writes the deliveries; a (webhook, event) pair in
    // both (a redelivery) still makes one delivery, by the unique index.
    maxInFlight: 2,
    // Never lost: an event that cannot be fanned out (MongoDB down) is retried, at most every 5 minutes,
    // for about as long as the stream keeps it (7 days), not given up after the kit's default 20 tries.
    maxDeliver: FANOUT_MAX_DELIVER,
    ackWaitMs: FANOUT_ACK_WAIT_MS,
    logger: opts.logger,
    metrics: opts.metrics,
  });
}
