import {
  createDurableConsumer, type DurableConsumer, type EventHandler, type Logger, type NatsHandle, type ServiceMetrics,
} from '@mailfleet/kit';
import { FANOUT_SUBJECTS, isPublicEventType } from '../domain/event-types.js';
import { serializePayload } from '../domain/payload.js';
import type { DeliveriesRepository } from '../repositories/deliveries.repository.js';
import type { CachedWebhooksRepository } from '../repositories/subscription-cache.js';

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
  readonly now?: () => Date;
}

/**
 * Turns one event into PENDING deliveries, one per ACTIVE webhook of the
 * team subscribed to its type that existed when the event happened (a replay
 * of old events never reaches webhooks made since; CLOCK_SKEW_ALLOWANCE_MS of
 * slack for clocks). Nothing is sent here: the
 * consumer acks as soon as the deliveries are stored, so a slow endpoint never
 * holds up the stream. Idempotent on the event id: deliveries are unique on
 * (webhook, event), so a redelivered event (crash before the ack) makes no
 * second one. Internal types (key.revoked, contact.unsubscribed...) are
 * acknowledged and dropped.
 */
export function createFanoutHandler(deps: FanoutDeps): EventHandler {
  const now = deps.now ?? (() => new Date());
  return async (event, { log }) => {
    if (!isPublicEventType(event.type)) {
      log.debug('internal event type: not delivered to webhooks');
      return;
    }
    const happened = Date.parse(event.createdAt);
    const eventTime = Number.isNaN(happened) ? now() : new Date(happened);
    const hooks = await deps.webhooks.subscribed(event.teamId, event.type, new Date(eventTime.getTime() + CLOCK_SKEW_ALLOWANCE_MS));
    if (hooks.length === 0) return;
    const payload = serializePayload(event);
    let created = 0;
    for (const hook of hooks) {
      const made = await deps.deliveries.createPending({
        teamId: event.teamId, webhookId: hook.id, eventId: event.id, type: event.type, payload, now: now(),
      });
      if (made) created++;
    }
    if (created > 0) deps.onDeliveries?.();
    log.debug({ webhooks: hooks.length, created }, 'event fanned out to webhooks');
  };
}

export function createFanoutConsumer(opts: FanoutDeps & { nats: NatsHandle; logger: Logger; metrics?: ServiceMetrics }): DurableConsumer {
  return createDurableConsumer({
    nats: opts.nats,
    durable: FANOUT_DURABLE,
    filterSubjects: FANOUT_SUBJECTS,
    handler: createFanoutHandler(opts),
    // Never lost: an event that cannot be fanned out (MongoDB down) is retried, at most every 5 minutes,
    // for about as long as the stream keeps it (7 days), not given up after the kit's default 20 tries.
    maxDeliver: FANOUT_MAX_DELIVER,
    logger: opts.logger,
    metrics: opts.metrics,
  });
}
