import type { Logger } from '@mailfleet/kit';
import type { EndpointClient } from '../clients/endpoint.client.js';
import { decideOutcome, type RetryPolicy } from '../domain/retry-policy.js';
import { deliveryHeaders } from '../domain/signature.js';
import { parseWebhookUrl } from '../domain/urls.js';
import type { ClaimedDelivery, DeliveriesRepository, DeliveryRecord } from '../repositories/deliveries.repository.js';
import type { WebhooksRepository } from '../repositories/webhooks.repository.js';

export const CANCELLED_WEBHOOK_DELETED = 'cancelled: webhook deleted';

export interface Deliverer {
  /**
   * Makes one attempt of a claimed delivery and records it: the delivery's
   * new state, then the webhook's counters (and its turn to FAILED). Answers
   * the record after the attempt, or undefined when no attempt was made (the
   * webhook is not ACTIVE: a scheduled delivery is held until activation) or
   * the claim was lost meanwhile (another replica records its own attempt).
   */
  attempt(claim: ClaimedDelivery, opts?: { timeoutMs?: number }): Promise<DeliveryRecord | undefined>;
}

export function createDeliverer(deps: {
  webhooks: WebhooksRepository;
  deliveries: DeliveriesRepository;
  endpoint: EndpointClient;
  policy: RetryPolicy;
  logger: Logger;
  now?: () => Date;
  random?: () => number;
}): Deliverer {
  const now = deps.now ?? (() => new Date());
  const random = deps.random ?? Math.random;

  return {
    async attempt(claim, opts = {}) {
      const d = claim.record;
      const log = deps.logger.child({ deliveryId: d.id, webhookId: d.webhookId, eventId: d.eventId, eventType: d.type });
      const webhook = await deps.webhooks.get(d.teamId, d.webhookId);
      if (!webhook) {
        // Deleted after the event was fanned out (or a crash left it pending): nothing to deliver to.
        return deps.deliveries.finish(claim, {
          status: 'FAILED', attempt: d.attempt, nextAttemptAt: null, lastError: CANCELLED_WEBHOOK_DELETED,
          responseStatus: d.responseStatus, responseTimeMs: d.responseTimeMs, responseText: d.responseText,
        }, now());
      }
      if (webhook.status !== 'ACTIVE') {
        if (!claim.scheduled) {
          await deps.deliveries.release(claim);
          return undefined;
        }
        await deps.deliveries.park(claim);
        // An activation between the read above and the park would have found nothing to release: look again.
        const again = await deps.webhooks.get(d.teamId, d.webhookId);
        if (again?.status === 'ACTIVE') await deps.deliveries.unpark(d.webhookId);
        log.debug({ status: webhook.status }, 'delivery held until the webhook is activated');
        return undefined;
      }

      let target;
      try {
        target = parseWebhookUrl(webhook.url);
      } catch (err) {
        target = undefined;
        log.warn({ err }, 'stored webhook URL no longer parses');
      }
      const result = target
        ? await deps.endpoint.post(target, d.payload, deliveryHeaders(webhook.secret, d.payload, { id: d.eventId, type: d.type }), opts)
        : { ok: false, error: 'invalid webhook URL', durationMs: 0 };
      const at = now();
      const outcome = decideOutcome({ attemptsBefore: d.attempt, scheduled: claim.scheduled, result, policy: deps.policy, now: at, random: random() });
      const record = await deps.deliveries.finish(claim, {
        status: outcome.status,
        attempt: outcome.attempt,
        nextAttemptAt: outcome.nextAttemptAt,
        lastError: result.ok ? null : (result.error ?? 'failed'),
        responseStatus: result.status ?? null,
        responseTimeMs: result.durationMs,
        responseText: result.responseText ?? null,
      }, at);
      if (!record) {
        log.warn('delivery claim lost during the attempt (lease expired); its new owner records the outcome');
        return undefined;
      }
      if (result.ok) {
        await deps.webhooks.recordSuccess(d.teamId, d.webhookId, at);
        log.debug({ attempt: outcome.attempt, status: result.status, ms: result.durationMs }, 'webhook delivered');
      } else {
        const r = await deps.webhooks.recordFailure(d.teamId, d.webhookId, at, outcome.eventFailed, deps.policy.failureThreshold);
        log.info({ attempt: outcome.attempt, error: result.error, status: result.status, next: outcome.nextAttemptAt }, 'webhook attempt failed');
        if (r.turnedFailed) {
          log.warn({ consecutiveFailures: r.consecutiveFailures }, 'webhook turned FAILED after consecutive failed events; it receives nothing until activated');
        }
      }
      return record;
    },
  };
}
