import type { Logger } from '@mailfleet/kit';
import type { ClaimedDelivery, DeliveriesRepository } from '../repositories/deliveries.repository.js';
import { NotAttemptedError, type Deliverer } from './deliverer.js';

/**
 * How the fan-out hands new deliveries straight to the worker: it stores them claimed already (see
 * `DeliveriesRepository.createClaimedMany`) while the worker has room for them, and the worker attempts them
 * without claiming them from the queue.
 */
export interface DeliveryHandOff {
  readonly leaseMs: number;
  /** How many more deliveries the worker takes now (0: store them free, for any replica's claims). */
  room(): number;
  /** Deliveries claimed for this worker when they were stored. */
  adopt(claims: readonly ClaimedDelivery[]): void;
  /**
   * Whether new deliveries may be attempted straight from the fan-out (`attemptDirect`): the worker is running and
   * holds nothing older, neither handed over nor due in the queue as far as it sees, so they jump no queue.
   */
  directOk(): Promise<boolean>;
  /**
   * Attempts direct claims (`DeliveriesRepository.directClaims`) now, in rounds per webhook through the worker's caps,
   * and writes each result as the delivery's record. Those whose post has not started by `startBy` (epoch ms), or
   * that could not be attempted, are stored as free queue entries instead. Resolves once every one is written one way
   * or the other; the caller acknowledges their events then.
   */
  attemptDirect(claims: readonly ClaimedDelivery[], startBy: number): Promise<void>;
}

export interface DeliveryWorker {
  start(): void;
  /** New deliveries exist: look now instead of at the next poll. */
  kick(): void;
  /** Present when the worker takes deliveries claimed at fan-out (`handOffMaxAgeMs` > 0). */
  readonly handOff?: DeliveryHandOff;
  /** Stops claiming and waits for the attempts in flight to be recorded. */
  stop(): Promise<void>;
}

export interface DeliveryWorkerOptions {
  deliveries: DeliveriesRepository;
  deliverer: Deliverer;
  /** Deliveries held at once by this replica: claimed, being posted, or their results being written. */
  concurrency: number;
  /** Posts in flight at once to one webhook: a slow endpoint never takes every slot. */
  perWebhookConcurrency: number;
  /**
   * Deliveries of one webhook being posted at once, in one round or several (default `perWebhookConcurrency`):
   * a round is claimed and recorded with a few writes whatever its size, and its posts go out at most
   * `perWebhookConcurrency` at a time. Its posts then take up to roundSize / perWebhookConcurrency attempt
   * time-outs, which must stay well inside the lease.
   */
  roundSize?: number;
  leaseMs: number;
  pollIntervalMs: number;
  /**
   * Longest a delivery claimed at fan-out may wait for its round (0 or absent: the fan-out claims nothing). Its
   * lease ran from the fan-out, so this plus a round's posts must stay inside the lease; one that waited longer is
   * released to the queue instead.
   */
  handOffMaxAgeMs?: number;
  /**
   * Fewest deliveries claimed at fan-out that may wait at once (default `concurrency`). The worker takes more while
   * its recent pace would start them inside `handOffMaxAgeMs` (three quarters of it, at the deliveries per second it
   * started over the last few seconds; at most HAND_OFF_CEILING): a worker that falls behind a burst by more than
   * this floor keeps the cheap path as long as it still starts what it holds in time. Beyond that the fan-out stores
   * the rest free, claimed from the queue when there is room (one released after waiting too long costs two writes
   * more than either way).
   */
  handOffLimit?: number;
  logger: Logger;
  now?: () => Date;
}

/** Most deliveries claimed at fan-out held at once, whatever the pace (their records and payloads are in memory). */
export const HAND_OFF_CEILING = 10_000;
/** The window over which the worker's pace (deliveries started per second) is measured for its hand-off room. */
export const PACE_WINDOW_MS = 5_000;

/**
 * Deliveries started per second over the last `windowMs`, counted in one-second buckets (a burst's thousands of
 * starts cost a few numbers, not a timestamp each).
 */
export function createPaceMeter(windowMs = PACE_WINDOW_MS): { add(n: number, at: number): void; perSecond(at: number): number } {
  const buckets = new Map<number, number>();
  const seconds = Math.max(1, Math.round(windowMs / 1_000));
  const prune = (at: number) => {
    const oldest = Math.floor(at / 1_000) - seconds;
    for (const k of buckets.keys()) if (k <= oldest) buckets.delete(k);
  };
  return {
    add(n, at) {
      const k = Math.floor(at / 1_000);
      buckets.set(k, (buckets.get(k) ?? 0) + n);
      prune(at);
    },
    perSecond(at) {
      prune(at);
      let sum = 0;
      for (const n of buckets.values()) sum += n;
      return sum / seconds;
    },
  };
}

/**
 * The delivery loop of one replica. Due deliveries are claimed in rounds: each
 * round takes the free slots of one webhook (up to `perWebhookConcurrency`
 * attempts in flight to it, `concurrency` in all) with conditional updates
 * that set a lease, so replicas never attempt the same delivery at once and a
 * crashed replica's claims lapse (the delivery is attempted again: delivered
 * at least once, never lost). A round's posts go out together and its results
 * are written together, so the writes follow the rounds, not the deliveries.
 * A webhook's slots are free again as soon as its round's posts ended, so its
 * next round goes out while the last one's results are being written.
 * Claims skip webhooks at their cap, so one slow endpoint holds a few slots and
 * the rest keep flowing. Between claims it sleeps until woken (a kick, a
 * finished round) or until the next delivery falls due, at most the poll interval.
 */
export function createDeliveryWorker(opts: DeliveryWorkerOptions): DeliveryWorker {
  const now = opts.now ?? (() => new Date());
  /** One promise per round in flight. */
  const inflight = new Set<Promise<void>>();
  /** Attempts in flight (the rounds' sizes summed). */
  let attempts = 0;
  const perWebhook = new Map<string, number>();
  const roundSize = Math.max(opts.roundSize ?? opts.perWebhookConcurrency, 1);
  /** Per webhook, posts in flight and the posts waiting for one of its slots. */
  const gates = new Map<string, { active: number; waiting: (() => void)[] }>();
  let stopping = true;
  let loop: Promise<void> | undefined;
  let wake: () => void = () => undefined;
  // Set by a kick or a finished attempt; a sleep that starts after it returns at once, so no wake-up is lost.
  let woken = false;
  /** Deliveries claimed at fan-out for this worker, oldest first, with when they were claimed. */
  let adopted: { claim: ClaimedDelivery; at: number }[] = [];
  const handOffMaxAgeMs = opts.handOffMaxAgeMs ?? 0;
  const handOffLimit = opts.handOffLimit ?? opts.concurrency;
  const pace = createPaceMeter();

  /**
   * How many handed deliveries may wait now: the floor, or what the recent pace starts in three quarters of the
   * allowed wait (a quarter kept for the pace to drop; one that still waits too long is released to the queue).
   */
  function handOffRoomLimit(): number {
    const byPace = Math.floor((pace.perSecond(now().getTime()) * handOffMaxAgeMs * 0.75) / 1_000);
    return Math.min(Math.max(handOffLimit, byPace), Math.max(handOffLimit, HAND_OFF_CEILING));
  }

  function signal(): void {
    woken = true;
    wake();
  }

  const busyWebhooks = (): string[] => [...perWebhook].filter(([, n]) => n >= roundSize).map(([id]) => id);

  /** Runs a post once the webhook has a free slot: at most `perWebhookConcurrency` in flight to it. */
  function gateOf(webhookId: string): <T>(post: () => Promise<T>) => Promise<T> {
    return async (post) => {
      let g = gates.get(webhookId);
      if (!g) {
        g = { active: 0, waiting: [] };
        gates.set(webhookId, g);
      }
      const gate = g;
      if (gate.active >= opts.perWebhookConcurrency) await new Promise<void>((resolve) => gate.waiting.push(resolve));
      else gate.active++;
      try {
        return await post();
      } finally {
        const next = gate.waiting.shift();
        // The slot passes straight to the next waiting post; the last one out drops the entry.
        if (next) next();
        else if (--gate.active === 0) gates.delete(webhookId);
      }
    };
  }

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

  /**
   * Takes a round's slots: the webhook's (given back by the answer, once its posts ended) and the replica's (given
   * back by the caller, once the results are written).
   */
  function takeSlots(webhookId: string, n: number): () => void {
    perWebhook.set(webhookId, (perWebhook.get(webhookId) ?? 0) + n);
    attempts += n;
    pace.add(n, now().getTime());
    let posting = true;
    return () => {
      if (!posting) return;
      posting = false;
      const left = (perWebhook.get(webhookId) ?? n) - n;
      if (left > 0) perWebhook.set(webhookId, left);
      else perWebhook.delete(webhookId);
      signal();
    };
  }

  function launch(claims: readonly ClaimedDelivery[]): void {
    const webhookId = claims[0]!.record.webhookId;
    // The endpoint's slots are free once its posts ended: the next round goes out while these results are written
    // (their records stay leased until then, so nothing is attempted twice). The replica's slots follow the writes.
    const posted = takeSlots(webhookId, claims.length);
    const p = (async () => {
      try {
        await opts.deliverer.attemptMany(claims, { onSent: posted, gate: gateOf(webhookId) });
      } catch (err) {
        opts.logger.warn({ err, deliveryIds: claims.map((c) => c.record.id) }, 'delivery attempts could not be recorded; the claims lapse and they are attempted again');
        await Promise.all(claims.map((c) => opts.deliveries.release(c).catch(() => undefined)));
      }
    })().finally(() => {
      inflight.delete(p);
      attempts -= claims.length;
      posted();
      signal();
    });
    inflight.add(p);
  }

  /**
   * The next round from the deliveries claimed at fan-out: those of the oldest one's webhook, up to its free slots.
   * Ones that waited too long for their lease are released to the queue (claimed again there, by anyone).
   */
  async function adoptedRound(free: number): Promise<ClaimedDelivery[]> {
    const t = now().getTime();
    const stale = adopted.filter((a) => t - a.at > handOffMaxAgeMs);
    if (stale.length > 0) {
      adopted = adopted.filter((a) => t - a.at <= handOffMaxAgeMs);
      await opts.deliveries.releaseMany(stale.map((a) => a.claim));
    }
    const busy = new Set(busyWebhooks());
    const first = adopted.find((a) => !busy.has(a.claim.record.webhookId));
    if (!first) return [];
    const webhookId = first.claim.record.webhookId;
    const n = Math.min(free, roundSize - (perWebhook.get(webhookId) ?? 0));
    const round: ClaimedDelivery[] = [];
    adopted = adopted.filter((a) => {
      if (round.length >= n || a.claim.record.webhookId !== webhookId) return true;
      round.push(a.claim);
      return false;
    });
    return round;
  }

  async function nextDelay(): Promise<number> {
    const due = await opts.deliveries.nextDueAt(now(), busyWebhooks());
    if (!due) return opts.pollIntervalMs;
    return Math.min(opts.pollIntervalMs, Math.max(10, due.getTime() - now().getTime()));
  }

  /** Whether the queue, as far as this replica sees it, holds a delivery due since before `t`. */
  async function queuedBefore(t: number): Promise<boolean> {
    const due = await opts.deliveries.nextDueAt(now(), busyWebhooks());
    return due !== undefined && due.getTime() < t;
  }

  /** Launches the next round of deliveries claimed at fan-out; false when there is none to launch. */
  async function launchAdopted(free: number): Promise<boolean> {
    const handed = adopted.length > 0 ? await adoptedRound(free) : [];
    if (handed.length === 0) return false;
    launch(handed);
    return true;
  }

  async function run(): Promise<void> {
    while (!stopping) {
      woken = false;
      if (attempts >= opts.concurrency) {
        await sleep(opts.pollIntervalMs);
        continue;
      }
      try {
        const free = opts.concurrency - attempts;
        // Oldest first across both sources: deliveries stored free while the hand-off was full wait in the queue,
        // and the fan-out goes on handing over younger ones whenever there is room again, so serving the hand-off
        // first would leave the queued ones waiting until the stream paused.
        const queueFirst = adopted.length > 0 && await queuedBefore(adopted[0]!.at);
        if (!queueFirst && await launchAdopted(free)) continue;
        const claims = await opts.deliveries.claimDueMany(now(), opts.leaseMs, busyWebhooks(),
          (webhookId) => Math.min(free, roundSize - (perWebhook.get(webhookId) ?? 0)));
        if (claims.length > 0) {
          launch(claims);
          continue;
        }
        if (queueFirst && await launchAdopted(free)) continue;
        await sleep(await nextDelay());
      } catch (err) {
        opts.logger.warn({ err }, 'claiming deliveries failed; will retry');
        await sleep(opts.pollIntervalMs);
      }
    }
  }

  /** One webhook's direct claims: a round through its gate, refused once `startBy` has passed; the rest stored. */
  async function directRound(claims: readonly ClaimedDelivery[], startBy: number): Promise<void> {
    const webhookId = claims[0]!.record.webhookId;
    const posted = takeSlots(webhookId, claims.length);
    const gate = gateOf(webhookId);
    const timed = <T>(post: () => Promise<T>): Promise<T> => gate(() => (stopping || Date.now() > startBy ? Promise.reject(new NotAttemptedError()) : post()));
    try {
      const records = await opts.deliverer.attemptMany(claims, { onSent: posted, gate: timed });
      // Not attempted, or not recorded (a pair with a record already makes no entry either): stored for the queue.
      const left = claims.filter((_, i) => records[i] === undefined);
      if (left.length > 0) await opts.deliveries.releaseMany(left);
    } finally {
      attempts -= claims.length;
      posted();
      signal();
    }
  }

  const handOff: DeliveryHandOff | undefined = handOffMaxAgeMs > 0
    ? {
      leaseMs: opts.leaseMs,
      async directOk() {
        if (stopping || adopted.length > 0 || attempts >= opts.concurrency) return false;
        return !(await queuedBefore(now().getTime() + 1));
      },
      async attemptDirect(claims, startBy) {
        const byWebhook = new Map<string, ClaimedDelivery[]>();
        for (const c of claims) {
          const list = byWebhook.get(c.record.webhookId) ?? [];
          list.push(c);
          byWebhook.set(c.record.webhookId, list);
        }
        const rounds: Promise<void>[] = [];
        for (const list of byWebhook.values()) {
          for (let i = 0; i < list.length; i += roundSize) rounds.push(directRound(list.slice(i, i + roundSize), startBy));
        }
        const settled = await Promise.allSettled(rounds);
        const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed) throw failed.reason;
      },
      room: () => (stopping ? 0 : Math.max(0, handOffRoomLimit() - adopted.length)),
      adopt(claims) {
        if (stopping) {
          // Stopped (or stopping) since the fan-out asked for room: nobody here will attempt them.
          opts.deliveries.releaseMany(claims).catch((err: unknown) => opts.logger.warn({ err }, 'releasing deliveries claimed at fan-out failed; they are claimable when their lease ends'));
          return;
        }
        // Their lease ran from before their records were written: their creation time is the safe side of it.
        for (const claim of claims) adopted.push({ claim, at: claim.record.createdAt.getTime() });
        signal();
      },
    }
    : undefined;

  return {
    ...(handOff ? { handOff } : {}),
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
      // Claimed at fan-out and never attempted: free for any replica now, not when their lease ends.
      const left = adopted.map((a) => a.claim);
      adopted = [];
      await opts.deliveries.releaseMany(left).catch((err: unknown) => opts.logger.warn({ err }, 'releasing deliveries claimed at fan-out failed; they are claimable when their lease ends'));
    },
  };
}
