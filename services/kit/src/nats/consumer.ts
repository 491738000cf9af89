import { AckPolicy, DeliverPolicy, type ConsumerConfig, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { newRequestId, runWithRequestContext, type Logger } from '../logger.js';
import type { ServiceMetrics } from '../metrics.js';
import { decodeEvent, EVENT_STREAM, PoisonEventError, type EventEnvelope } from './events.js';
import type { NatsHandle } from './connection.js';

export type EventHandler = (event: EventEnvelope, meta: { deliveryCount: number; log: Logger }) => Promise<void>;

export interface DurableConsumerOptions {
  nats: NatsHandle;
  /** Durable name: one per consuming role (for example `analytics-rollups`); replicas share it. */
  durable: string;
  /** Subjects this consumer reads, e.g. ['mailfleet.email.>']. */
  filterSubjects: readonly string[];
  handler: EventHandler;
  logger: Logger;
  metrics?: ServiceMetrics;
  stream?: string;
  /** Messages handled at once by this process. */
  concurrency?: number;
  /** Deliveries before the server gives up on a message. */
  maxDeliver?: number;
  /** Redelivery delays (ms) for transient failures, by attempt. */
  backoffMs?: readonly number[];
  ackWaitMs?: number;
}

export interface DurableConsumer {
  start(): Promise<void>;
  /** Stops pulling and waits for every in-flight handler to ack or nak. */
  stop(): Promise<void>;
}

/**
 * Creates the durable, or brings an existing one's filter and limits up to date
 * (replicas and restarts of a newer version share it).
 */
export async function declareDurable(opts: {
  nats: NatsHandle; stream: string; durable: string; filterSubjects: readonly string[]; maxDeliver: number; ackWaitMs: number; maxAckPending: number;
}): Promise<void> {
  const config: Partial<ConsumerConfig> & { durable_name: string } = {
    durable_name: opts.durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    filter_subjects: [...opts.filterSubjects],
    max_deliver: opts.maxDeliver,
    ack_wait: nanos(opts.ackWaitMs),
    max_ack_pending: opts.maxAckPending,
  };
  try {
    await opts.nats.jsm.consumers.info(opts.stream, opts.durable);
    await opts.nats.jsm.consumers.update(opts.stream, opts.durable, {
      filter_subjects: config.filter_subjects, max_deliver: config.max_deliver, ack_wait: config.ack_wait, max_ack_pending: config.max_ack_pending,
    });
  } catch (err) {
    if (!/not found/i.test(String((err as Error).message))) throw err;
    await opts.nats.jsm.consumers.add(opts.stream, config);
  }
}

/** Redelivery delay of a failed message, by its delivery count. */
export function retryDelayMs(backoff: readonly number[], deliveryCount: number): number {
  return backoff[Math.min(Math.max(deliveryCount, 1) - 1, backoff.length - 1)] ?? 1_000;
}

export const DEFAULT_BACKOFF_MS: readonly number[] = [1_000, 5_000, 15_000, 60_000, 300_000];

/**
 * A durable pull consumer with explicit ack and bounded concurrency. A handler
 * that throws gets its message nak'ed with a delay that grows with the
 * delivery count; a message that can never succeed (PoisonEventError, bad
 * JSON) is terminated instead of redelivered forever.
 */
export function createDurableConsumer(opts: DurableConsumerOptions): DurableConsumer {
  const stream = opts.stream ?? EVENT_STREAM;
  const concurrency = Math.max(1, opts.concurrency ?? 8);
  const backoff = opts.backoffMs ?? DEFAULT_BACKOFF_MS;
  const maxDeliver = Math.max(opts.maxDeliver ?? 20, backoff.length + 1);
  const inflight = new Set<Promise<void>>();
  let messages: ConsumerMessages | undefined;
  let stopping = false;
  let loop: Promise<void> | undefined;

  const declare = (): Promise<void> => declareDurable({
    nats: opts.nats, stream, durable: opts.durable, filterSubjects: opts.filterSubjects, maxDeliver,
    ackWaitMs: opts.ackWaitMs ?? 30_000, maxAckPending: Math.max(concurrency * 4, 64),
  });

  async function handle(msg: JsMsg): Promise<void> {
    const deliveryCount = msg.info.deliveryCount;
    let event: EventEnvelope;
    try {
      event = decodeEvent(msg.data);
    } catch (err) {
      opts.logger.error({ subject: msg.subject, err }, 'undecodable event terminated');
      msg.term('undecodable');
      opts.metrics?.eventsConsumed.inc({ consumer: opts.durable, outcome: 'term' });
      return;
    }
    const log = opts.logger.child({ eventId: event.id, eventType: event.type, requestId: event.id });
    try {
      await runWithRequestContext({ requestId: newRequestId(), log }, () => opts.handler(event, { deliveryCount, log }));
      msg.ack();
      opts.metrics?.eventsConsumed.inc({ consumer: opts.durable, outcome: 'ack' });
    } catch (err) {
      if (err instanceof PoisonEventError) {
        log.error({ err }, 'poison event terminated');
        msg.term(err.message);
        opts.metrics?.eventsConsumed.inc({ consumer: opts.durable, outcome: 'term' });
        return;
      }
      const delay = retryDelayMs(backoff, deliveryCount);
      log.warn({ err, deliveryCount, retryInMs: delay }, 'event handler failed; will retry');
      msg.nak(delay);
      opts.metrics?.eventsConsumed.inc({ consumer: opts.durable, outcome: 'nak' });
    }
  }

  async function run(): Promise<void> {
    while (!stopping) {
      try {
        const consumer = await opts.nats.js.consumers.get(stream, opts.durable);
        messages = await consumer.consume({ max_messages: concurrency });
        for await (const msg of messages) {
          // Bounded concurrency: the next message is taken only once a slot is free.
          while (inflight.size >= concurrency) await Promise.race(inflight);
          const p = handle(msg).finally(() => inflight.delete(p));
          inflight.add(p);
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
      try {
        await messages?.close();
      } catch {
        // already closed
      }
      await Promise.allSettled([...inflight]);
      await loop;
    },
  };
}
