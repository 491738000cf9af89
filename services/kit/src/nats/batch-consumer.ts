import type { ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import { newRequestId, runWithRequestContext, type Logger } from '../logger.js';
import type { ServiceMetrics } from '../metrics.js';
import { declareDurable, DEFAULT_BACKOFF_MS, retryDelayMs, type DurableConsumer } from './consumer.js';
import { decodeEvent, EVENT_STREAM, PoisonEventError, type EventEnvelope } from './events.js';
import type { NatsHandle } from './connection.js';

/** One distinct event of a batch. */
export interface BatchEvent {
  readonly event: EventEnvelope;
  /** The highest delivery count among the batch's copies of this event. */
  readonly deliveryCount: number;
}

/**
 * What became of a batch, per event. Events not named were handled and are acked.
 * A handler that cannot tell which event is at fault may throw instead (see below).
 */
export interface BatchOutcome {
  /** Event id -> why it can never succeed: terminated, the rest of the batch acked. */
  readonly poison?: ReadonlyMap<string, string>;
  /** Event ids to deliver again later (nak with backoff), the rest acked. */
  readonly retry?: ReadonlySet<string>;
}

/**
 * Handles a whole batch of distinct events (by id), at-least-once: a batch may
 * come again in part or whole after a crash or a failure, so the handler is
 * idempotent on the event id. Throwing PoisonEventError splits the batch in
 * halves until the poison event is alone (then it is terminated), so it should
 * be thrown before anything is written; any other error naks the whole batch.
 */
export type BatchHandler = (events: readonly BatchEvent[], meta: { log: Logger }) => Promise<BatchOutcome | void>;

export interface BatchConsumerOptions {
  nats: NatsHandle;
  /** Durable name: one per consuming role; replicas share it. */
  durable: string;
  filterSubjects: readonly string[];
  handler: BatchHandler;
  logger: Logger;
  metrics?: ServiceMetrics;
  stream?: string;
  /** Most messages handed to the handler at once (default 256). */
  batchSize?: number;
  /** Batches handled at once by this process (default 1: batches of one key then never race each other here). */
  maxInFlight?: number;
  /**
   * How long the first message of a batch waits for others, counted from its
   * arrival (default 5 ms): a batch goes when it is full or when its first
   * message has waited this long, also when a slot frees up after a busy
   * handler (what arrived meanwhile goes at once only when it has waited the
   * linger already). So at a steady trickle a batch holds what arrives in one
   * linger, not what arrived during the last handler's few writes.
   */
  lingerMs?: number;
  maxDeliver?: number;
  backoffMs?: readonly number[];
  ackWaitMs?: number;
}

interface Entry {
  readonly event: EventEnvelope;
  readonly msgs: JsMsg[];
}

const deliveryCountOf = (e: Entry): number => Math.max(...e.msgs.map((m) => m.info.deliveryCount));

/**
 * A durable pull consumer that hands messages to its handler in batches, so a
 * consumer can write one aggregate per batch and key instead of one write per
 * event. Same declaration, backoff, poison and stop semantics as
 * createDurableConsumer: explicit ack after the handler returns, nak with a
 * growing delay on failure, term for what can never succeed (an undecodable
 * message is terminated alone and never reaches the handler). Copies of one
 * event id in a batch (a republish past the dedup window) reach the handler
 * once and are settled together.
 */
export function createBatchConsumer(opts: BatchConsumerOptions): DurableConsumer {
  const stream = opts.stream ?? EVENT_STREAM;
  const batchSize = Math.max(1, opts.batchSize ?? 256);
  const maxInFlight = Math.max(1, opts.maxInFlight ?? 1);
  const lingerMs = Math.max(0, opts.lingerMs ?? 5);
  const backoff = opts.backoffMs ?? DEFAULT_BACKOFF_MS;
  const maxDeliver = Math.max(opts.maxDeliver ?? 20, backoff.length + 1);
  const ackWaitMs = opts.ackWaitMs ?? 30_000;
  const inflight = new Set<Promise<void>>();
  let buffer: JsMsg[] = [];
  /** When each buffered message arrived (performance.now()), in buffer order. */
  let arrivals: number[] = [];
  let timer: NodeJS.Timeout | undefined;
  let messages: ConsumerMessages | undefined;
  let stopping = false;
  let loop: Promise<void> | undefined;

  const declare = (): Promise<void> => declareDurable({
    nats: opts.nats, stream, durable: opts.durable, filterSubjects: opts.filterSubjects, maxDeliver, ackWaitMs,
    // Room for the batches in hand plus the next ones buffered.
    maxAckPending: Math.max(batchSize * (maxInFlight + 1), 64),
  });

  const count = (outcome: 'ack' | 'nak' | 'term', n = 1): void => {
    opts.metrics?.eventsConsumed.inc({ consumer: opts.durable, outcome }, n);
  };

  function nakAll(entries: readonly Entry[], log: Logger, err: unknown): void {
    for (const e of entries) {
      const deliveryCount = deliveryCountOf(e);
      const delay = retryDelayMs(backoff, deliveryCount);
      for (const m of e.msgs) m.nak(delay);
      count('nak', e.msgs.length);
      if (entries.length <= 8) log.warn({ err, eventId: e.event.id, deliveryCount, retryInMs: delay }, 'event handler failed; will retry');
    }
    if (entries.length > 8) log.warn({ err, events: entries.length }, 'batch handler failed; will retry');
  }

  async function settle(entries: readonly Entry[]): Promise<void> {
    if (entries.length === 0) return;
    const log = opts.logger.child({ durable: opts.durable, batch: entries.length });
    let outcome: BatchOutcome | void;
    try {
      const events = entries.map((e) => ({ event: e.event, deliveryCount: deliveryCountOf(e) }));
      outcome = await runWithRequestContext({ requestId: newRequestId(), log }, () => opts.handler(events, { log }));
    } catch (err) {
      if (err instanceof PoisonEventError) {
        const only = entries.length === 1 ? entries[0] : undefined;
        if (only) {
          log.error({ err, eventId: only.event.id, eventType: only.event.type }, 'poison event terminated');
          for (const m of only.msgs) m.term(err.message);
          count('term', only.msgs.length);
          return;
        }
        // Find the poison event without holding back the others: halve until it is alone.
        const mid = Math.ceil(entries.length / 2);
        await settle(entries.slice(0, mid));
        await settle(entries.slice(mid));
        return;
      }
      nakAll(entries, log, err);
      return;
    }
    for (const e of entries) {
      const reason = outcome?.poison?.get(e.event.id);
      if (reason !== undefined) {
        log.error({ eventId: e.event.id, eventType: e.event.type, reason }, 'poison event terminated');
        for (const m of e.msgs) m.term(reason);
        count('term', e.msgs.length);
      } else if (outcome?.retry?.has(e.event.id)) {
        const delay = retryDelayMs(backoff, deliveryCountOf(e));
        for (const m of e.msgs) m.nak(delay);
        count('nak', e.msgs.length);
      } else {
        for (const m of e.msgs) m.ack();
        count('ack', e.msgs.length);
      }
    }
  }

  async function handleBatch(msgs: readonly JsMsg[]): Promise<void> {
    const byId = new Map<string, Entry>();
    for (const msg of msgs) {
      let event: EventEnvelope;
      try {
        event = decodeEvent(msg.data);
      } catch (err) {
        opts.logger.error({ subject: msg.subject, err }, 'undecodable event terminated');
        msg.term('undecodable');
        count('term');
        continue;
      }
      const seen = byId.get(event.id);
      if (seen) seen.msgs.push(msg);
      else byId.set(event.id, { event, msgs: [msg] });
    }
    await settle([...byId.values()]);
  }

  function dispatch(): void {
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (stopping || buffer.length === 0 || inflight.size >= maxInFlight) return;
    const msgs = buffer.slice(0, batchSize);
    buffer = buffer.slice(msgs.length);
    arrivals = arrivals.slice(msgs.length);
    const p = handleBatch(msgs)
      .catch((err: unknown) => opts.logger.error({ err, durable: opts.durable }, 'batch settling failed'))
      .finally(() => {
        inflight.delete(p);
        // What arrived while this batch was handled goes when full, or once its first message has waited the linger.
        schedule(false);
      });
    inflight.add(p);
  }

  /**
   * Dispatches a full batch now; otherwise arms the timer for the first buffered message's linger. A message that
   * just arrived into an empty buffer (`fresh`) arms the whole linger without reading the clock; after a handler
   * finished, what is left of the oldest message's linger (nothing, when it has waited that long already).
   */
  function schedule(fresh: boolean): void {
    if (buffer.length >= batchSize) {
      dispatch();
      return;
    }
    if (timer || buffer.length === 0 || inflight.size >= maxInFlight) return;
    const wait = fresh ? lingerMs : lingerMs - (performance.now() - arrivals[0]!);
    if (wait <= 0) dispatch();
    else timer = setTimeout(dispatch, wait);
  }

  async function run(): Promise<void> {
    while (!stopping) {
      try {
        const consumer = await opts.nats.js.consumers.get(stream, opts.durable);
        messages = await consumer.consume({ max_messages: batchSize });
        for await (const msg of messages) {
          buffer.push(msg);
          arrivals.push(performance.now());
          // Bounded: with every slot busy and a full batch waiting, stop taking messages.
          while (buffer.length >= batchSize && inflight.size >= maxInFlight && !stopping) await Promise.race(inflight);
          schedule(buffer.length === 1);
          if (stopping) break;
        }
      } catch (err) {
        if (stopping) break;
        opts.logger.warn({ err, durable: opts.durable }, 'consumer interrupted; resubscribing');
      }
      if (!stopping) {
        await new Promise((r) => setTimeout(r, 1_000));
        await declare().catch((err: unknown) => opts.logger.warn({ err }, 'consumer re-declare failed'));
      }
    }
  }

  return {
    async start() {
      await declare();
      loop = run();
    },
    async stop() {
      stopping = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      try {
        await messages?.close();
      } catch {
        // already closed
      }
      await Promise.allSettled([...inflight]);
      // Taken but never handed over: give them back at once for another replica (or the next start).
      for (const m of buffer) m.nak();
      buffer = [];
      arrivals = [];
      await loop;
    },
  };
}
