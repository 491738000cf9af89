import type { Logger } from '@mailfleet/kit';
import type { EndpointClient } from '../clients/endpoint.client.js';
import { decideOutcome, type AttemptResult, type RetryPolicy } from '../domain/retry-policy.js';
import { deliveryHeaders } from '../domain/signature.js';
import { parseWebhookUrl, type WebhookTarget } from '../domain/urls.js';
import type { ClaimedDelivery, DeliveriesRepository, DeliveryRecord, DeliveryResult } from '../repositories/deliveries.repository.js';
import type { WebhookRecord, WebhooksRepository } from '../repositories/webhooks.repository.js';

export const CANCELLED_WEBHOOK_DELETED = 'cancelled: webhook deleted';
/** How stale a webhook's `lastSuccessAt` may get while every attempt to it succeeds (rounds skip the write meanwhile). */
export const SUCCESS_WRITE_GRANULARITY_MS = 1_000;

export interface Deliverer {
  /**
   * Makes one attempt of a claimed delivery and records it: the delivery's
   * new state, then the webhook's counters (and its turn to FAILED). Answers
   * the record after the attempt, or undefined when no attempt was made (the
   * webhook is not ACTIVE: a scheduled delivery is held until activation) or
   * the claim was lost meanwhile (another replica records its own attempt).
   */
  attempt(claim: ClaimedDelivery, opts?: { timeoutMs?: number }): Promise<DeliveryRecord | undefined>;
  /**
   * `attempt` for a round of claims of ONE webhook: the webhook is read once, the posts go out at once, and
   * their results are written together (one bulk write per collection, one or two writes of the webhook's
   * counters). Answers the records after the attempts, in order (undefined as in `attempt`). `onSent` is called
   * once no post of the round is in flight any more (before the results are written; also when none was made).
   * `gate` runs each post (the worker's cap on posts in flight to the webhook across its rounds).
   */
  attemptMany(claims: readonly ClaimedDelivery[], opts?: AttemptManyOptions): Promise<(DeliveryRecord | undefined)[]>;
}

export interface AttemptManyOptions {
  readonly onSent?: () => void;
  /** Runs each post; it may refuse one with NotAttemptedError (that delivery is then neither posted nor recorded). */
  readonly gate?: <T>(post: () => Promise<T>) => Promise<T>;
}

/** A gate's refusal to start a post (its time ran out): the delivery is answered undefined, nothing written for it. */
export class NotAttemptedError extends Error {
  constructor() {
    super('not attempted');
    this.name = 'NotAttemptedError';
  }
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

  const cancelled = (d: DeliveryRecord): DeliveryResult => ({
    status: 'FAILED', attempt: d.attempt, nextAttemptAt: null, lastError: CANCELLED_WEBHOOK_DELETED,
    responseStatus: d.responseStatus, responseTimeMs: d.responseTimeMs, responseText: d.responseText,
  });

  /** The webhook's target; `log` gives the logger to warn with when its stored URL no longer parses. */
  function targetOf(webhook: WebhookRecord, log: () => Logger): WebhookTarget | undefined {
    try {
      return parseWebhookUrl(webhook.url);
    } catch (err) {
      log().warn({ err }, 'stored webhook URL no longer parses');
      return undefined;
    }
  }

  /** One post of a claimed delivery to an ACTIVE webhook, and what it means for the record. */
  async function send(claim: ClaimedDelivery, webhook: WebhookRecord, target: WebhookTarget | undefined, opts: { timeoutMs?: number }) {
    const d = claim.record;
    const result: AttemptResult = target
      ? await deps.endpoint.post(target, d.payload, deliveryHeaders(webhook.secret, d.payload, { id: d.eventId, type: d.type }), opts)
      : { ok: false, error: 'invalid webhook URL', durationMs: 0 };
    const at = now();
    const outcome = decideOutcome({ attemptsBefore: d.attempt, scheduled: claim.scheduled, result, policy: deps.policy, now: at, random: random() });
    const written: DeliveryResult = {
      status: outcome.status,
      attempt: outcome.attempt,
      nextAttemptAt: outcome.nextAttemptAt,
      lastError: result.ok ? null : (result.error ?? 'failed'),
      responseStatus: result.status ?? null,
      responseTimeMs: result.durationMs,
      responseText: result.responseText ?? null,
    };
    return { claim, result, at, outcome, written };
  }

  /**
   * A webhook read at the round's start that needs no success written: no failure counted or seen since its last
   * success, which is under SUCCESS_WRITE_GRANULARITY_MS old. A busy endpoint's rounds then write its health about
   * once a second instead of once per round; `lastSuccessAt` lags by at most that. A failure is always written.
   */
  const healthy = (w: WebhookRecord, at: Date): boolean => w.consecutiveFailures === 0 && w.lastSuccessAt !== null
    && (w.lastFailureAt === null || w.lastFailureAt.getTime() < w.lastSuccessAt.getTime())
    && at.getTime() - w.lastSuccessAt.getTime() < SUCCESS_WRITE_GRANULARITY_MS;

  const logOf = (d: DeliveryRecord) => deps.logger.child({ deliveryId: d.id, webhookId: d.webhookId, eventId: d.eventId, eventType: d.type });

  async function attemptRound(
    claims: readonly ClaimedDelivery[], onSent: () => void, gate: AttemptManyOptions['gate'],
  ): Promise<(DeliveryRecord | undefined)[]> {
    const first = claims[0];
    if (!first) return [];
    const webhook = await deps.webhooks.get(first.record.teamId, first.record.webhookId);
    if (!webhook) return deps.deliveries.finishMany(claims.map((claim) => ({ claim, result: cancelled(claim.record) })), now());
    // Held until activation (or released): rare, one by one through the single path.
    if (webhook.status !== 'ACTIVE') {
      const out: (DeliveryRecord | undefined)[] = [];
      for (const claim of claims) out.push(await deliverer.attempt(claim));
      return out;
    }
    const target = targetOf(webhook, () => logOf(first.record));
    const posts = await Promise.all(claims.map((claim) => (gate ? gate(() => send(claim, webhook, target, {})) : send(claim, webhook, target, {}))
      .catch((err: unknown) => {
        if (err instanceof NotAttemptedError) return undefined;
        throw err;
      })));
    // The endpoint is done with this round: the worker may send it the next while these results are written.
    onSent();
    const sent = posts.filter((p): p is NonNullable<typeof p> => p !== undefined);
    const records = await deps.deliveries.finishMany(sent.map((s) => ({ claim: s.claim, result: s.written })), now());
    // The webhook's health follows the attempts in the order they ended: the last success resets the count of
    // failed events, and only events that failed after it count; a failure before it still moves lastFailureAt.
    const kept = sent.filter((_, i) => records[i] !== undefined).sort((a, b) => a.at.getTime() - b.at.getTime());
    for (const s of sent.filter((_, i) => records[i] === undefined)) {
      logOf(s.claim.record).warn('delivery claim lost during the attempt (lease expired); its new owner records the outcome');
    }
    let lastSuccess = -1;
    kept.forEach((s, i) => { if (s.result.ok) lastSuccess = i; });
    const { teamId, id } = webhook;
    if (lastSuccess >= 0 && !healthy(webhook, kept[lastSuccess]!.at)) await deps.webhooks.recordSuccess(teamId, id, kept[lastSuccess]!.at);
    const failedBefore = kept.slice(0, Math.max(lastSuccess, 0)).filter((s) => !s.result.ok);
    const lastFailedBefore = failedBefore[failedBefore.length - 1];
    const after = kept.slice(lastSuccess + 1).filter((s) => !s.result.ok);
    if (lastFailedBefore && after.length === 0) await deps.webhooks.recordFailure(teamId, id, lastFailedBefore.at, false, deps.policy.failureThreshold);
    for (const s of after) {
      const r = await deps.webhooks.recordFailure(teamId, id, s.at, s.outcome.eventFailed, deps.policy.failureThreshold);
      if (r.turnedFailed) {
        logOf(s.claim.record).warn({ consecutiveFailures: r.consecutiveFailures }, 'webhook turned FAILED after consecutive failed events; it receives nothing until activated');
      }
    }
    // A child logger per delivery only for a line that is written: a busy endpoint's successes are debug lines.
    const successLines = deps.logger.isLevelEnabled('debug');
    for (const s of kept) {
      if (s.result.ok && !successLines) continue;
      const log = logOf(s.claim.record);
      if (s.result.ok) log.debug({ attempt: s.outcome.attempt, status: s.result.status, ms: s.result.durationMs }, 'webhook delivered');
      else log.info({ attempt: s.outcome.attempt, error: s.result.error, status: s.result.status, next: s.outcome.nextAttemptAt }, 'webhook attempt failed');
    }
    // In the claims' order; undefined for a post the gate did not start.
    let k = 0;
    return posts.map((p) => (p ? records[k++] : undefined));
  }

  const deliverer: Deliverer = {
    async attemptMany(claims, opts = {}) {
      let sentCalled = false;
      const sentNow = () => {
        if (sentCalled) return;
        sentCalled = true;
        opts.onSent?.();
      };
      try {
        return await attemptRound(claims, sentNow, opts.gate);
      } finally {
        sentNow();
      }
    },

    async attempt(claim, opts = {}) {
      const d = claim.record;
      const log = deps.logger.child({ deliveryId: d.id, webhookId: d.webhookId, eventId: d.eventId, eventType: d.type });
      const webhook = await deps.webhooks.get(d.teamId, d.webhookId);
      if (!webhook) {
        // Deleted after the event was fanned out (or a crash left it pending): nothing to deliver to.
        return deps.deliveries.finish(claim, cancelled(d), now());
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

      const { result, at, outcome, written } = await send(claim, webhook, targetOf(webhook, () => log), opts);
      const record = await deps.deliveries.finish(claim, written, at);
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
  return deliverer;
}
