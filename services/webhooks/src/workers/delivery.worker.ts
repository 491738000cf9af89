import type { Logger } from '@mailfleet/kit';
import type { ClaimedDelivery, DeliveriesRepository } from '../repositories/deliveries.repository.js';
import type { Deliverer } from './deliverer.js';

export interface DeliveryWorker {
  start(): void;
  /** New deliveries exist: look now instead of at the next poll. */
  kick(): void;
  /** Stops claiming and waits for the attempts in flight to be recorded. */
  stop(): Promise<void>;
}

export interface DeliveryWorkerOptions {
  deliveries: DeliveriesRepository;
  deliverer: Deliverer;
  /** Attempts in flight at once in this replica. */
  concurrency: number;
  /** Attempts in flight at once to one webhook: a slow endpoint never takes every slot. */
  perWebhookConcurrency: number;
  leaseMs: number;
  pollIntervalMs: number;
  logger: Logger;
  now?: () => Date;
}

/**
 * The delivery loop of one replica. Due deliveries are claimed one at a time
 * with an atomic conditional update that sets a lease, so replicas never
 * attempt the same delivery at once and a crashed replica's claims lapse
 * (the delivery is attempted again: delivered at least once, never lost).
 * Claims skip webhooks that already have `perWebhookConcurrency` attempts in
 * flight here, so one slow endpoint holds a few slots and the rest keep
 * flowing. Between claims it sleeps until woken (a kick, a finished attempt)
 * or until the next delivery falls due, at most the poll interval.
 */
export function createDeliveryWorker(opts: DeliveryWorkerOptions): DeliveryWorker {
  const now = opts.now ?? (() => new Date());
  const inflight = new Set<Promise<void>>();
  const perWebhook = new Map<string, number>();
  let stopping = true;
  let loop: Promise<void> | undefined;
  let wake: () => void = () => undefined;
  // Set by a kick or a finished attempt; a sleep that starts after it returns at once, so no wake-up is lost.
  let woken = false;

  function signal(): void {
    woken = true;
    wake();
  }

  const busyWebhooks = (): string[] => [...perWebhook].filter(([, n]) => n >= opts.perWebhookConcurrency).map(([id]) => id);

  function sleep(ms: number): Promise<void> {
    if (woken) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, Math.max(0, ms));
      function done() {
        clearTimeout(timer);
        wake = () => undefined;
        resolve();
      }
      wake = done;
    });
  }

  function launch(claim: ClaimedDelivery): void {
    const webhookId = claim.record.webhookId;
    perWebhook.set(webhookId, (perWebhook.get(webhookId) ?? 0) + 1);
    const p = (async () => {
      try {
        await opts.deliverer.attempt(claim);
      } catch (err) {
        opts.logger.warn({ err, deliveryId: claim.record.id }, 'delivery attempt could not be recorded; the claim lapses and it is attempted again');
        await opts.deliveries.release(claim).catch(() => undefined);
      }
    })().finally(() => {
      inflight.delete(p);
      const left = (perWebhook.get(webhookId) ?? 1) - 1;
      if (left > 0) perWebhook.set(webhookId, left);
      else perWebhook.delete(webhookId);
      signal();
    });
    inflight.add(p);
  }

  async function nextDelay(): Promise<number> {
    const due = await opts.deliveries.nextDueAt(now(), busyWebhooks());
    if (!due) return opts.pollIntervalMs;
    return Math.min(opts.pollIntervalMs, Math.max(10, due.getTime() - now().getTime()));
  }

  async function run(): Promise<void> {
    while (!stopping) {
      woken = false;
      if (inflight.size >= opts.concurrency) {
        await sleep(opts.pollIntervalMs);
        continue;
      }
      try {
        const claim = await opts.deliveries.claimDue(now(), opts.leaseMs, busyWebhooks());
        if (claim) {
          launch(claim);
          continue;
        }
        await sleep(await nextDelay());
      } catch (err) {
        opts.logger.warn({ err }, 'claiming deliveries failed; will retry');
        await sleep(opts.pollIntervalMs);
      }
    }
  }

  return {
    start() {
      if (!stopping) return;
      stopping = false;
      loop = run();
    },
    kick() {
      signal();
    },
    async stop() {
      stopping = true;
      signal();
      await loop;
      await Promise.allSettled([...inflight]);
    },
  };
}
