import { AckPolicy, DeliverPolicy, type ConsumerConfig, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import {
  decodeEvent, EVENT_STREAM, type DurableConsumer, type EventEnvelope, type Logger, type NatsHandle, type ServiceMetrics,
} from '@mailfleet/kit';

/** One event of a batch, with how often the stream has delivered it. */
export interface BatchItem {
  readonly event: EventEnvelope;
  readonly deliveryCount: number;
}

/**
 * Handles a whole batch: resolves when every event of it is stored (all are acked), throws when none may be
 * (all are redelivered after a delay). A handler is idempotent on the event id, so a redelivered batch is safe.
 */
export type BatchHandler = (batch: readonly BatchItem[], log: Logger) => Promise<void>;

export interface BatchConsumerOptions {
  nats: NatsHandle;
  /** Durable name shared by the replicas. */
  durable: string;
  filterSubjects: readonly string[];
  handler: BatchHandler;
  logger: Logger;
  metrics?: ServiceMetrics | undefined;
  stream?: string;
  /** Most events handed to the handler at once. */
  maxBatch?: number;
  maxDeliver?: number;
  /** Redelivery delays (ms) of a failed batch, by delivery count. */
  backoffMs?: readonly number[];
  ackWaitMs?: number;
}

/**
 * A durable pull consumer that hands its handler batches: whatever arrived while
 * the previous batch was being stored (up to `maxBatch`), so the store sees one
 * write per batch, not per event, and a quiet stream still gets each event at
 * once (a batch of one). One batch is handled at a time per process; a full
 * buffer stops the reading, so the messages pulled but not acked stay bounded.
 * Same contract as the kit's per-event consumer otherwise: explicit acks after
 * the handler, undecodable messages terminated, failures nak'ed with a delay
 * that grows with the delivery count.
 */
export function createBatchConsumer(opts: BatchConsumerOptions): DurableConsumer {
  const stream = opts.stream ?? EVENT_STREAM;
  const maxBatch = Math.max(1, opts.maxBatch ?? 200);
  const backoff = opts.backoffMs ?? [1_000, 5_000, 15_000, 60_000, 300_000];
  const maxDeliver = Math.max(opts.maxDeliver ?? 20, backoff.length + 1);
  const count = (outcome: string, n: number) => opts.metrics?.eventsConsumed.inc({ consumer: opts.durable, outcome }, n);
  let messages: ConsumerMessages | undefined;
  let stopping = false;
  let loop: Promise<void> | undefined;

  const config: Partial<ConsumerConfig> & { durable_name: string } = {
    durable_name: opts.durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    filter_subjects: [...opts.filterSubjects],
    max_deliver: maxDeliver,
    ack_wait: nanos(opts.ackWaitMs ?? 30_000),
    // Room for the batch being stored and the next one filling up.
    max_ack_pending: maxBatch * 4,
  };

  async function declare(): Promise<void> {
    try {
      await opts.nats.jsm.consumers.info(stream, opts.durable);
      await opts.nats.jsm.consumers.update(stream, opts.durable, {
        filter_subjects: config.filter_subjects, max_deliver: config.max_deliver, ack_wait: config.ack_wait, max_ack_pending: config.max_ack_pending,
      });
    } catch (err) {
      if (!/not found/i.test(String((err as Error).message))) throw err;
      await opts.nats.jsm.consumers.add(stream, config);
    }
  }

  async function handle(msgs: readonly JsMsg[]): Promise<void> {
    const batch: { msg: JsMsg; item: BatchItem }[] = [];
    for (const msg of msgs) {
      try {
        batch.push({ msg, item: { event: decodeEvent(msg.data), deliveryCount: msg.info.deliveryCount } });
      } catch (err) {
        opts.logger.error({ subject: msg.subject, err }, 'undecodable event terminated');
        msg.term('undecodable');
        count('term', 1);
      }
    }
    if (batch.length === 0) return;
    try {
      await opts.handler(batch.map((b) => b.item), opts.logger);
      for (const b of batch) b.msg.ack();
      count('ack', batch.length);
    } catch (err) {
      opts.logger.warn({ err, events: batch.length }, 'event batch failed; will retry');
      for (const { msg, item } of batch) msg.nak(backoff[Math.min(item.deliveryCount - 1, backoff.length - 1)] ?? 1_000);
      count('nak', batch.length);
    }
  }

  /** Reads messages into a buffer and stores it batch by batch; the reading waits while a full buffer is stored. */
  async function consumeOnce(): Promise<void> {
    const consumer = await opts.nats.js.consumers.get(stream, opts.durable);
    messages = await consumer.consume({ max_messages: maxBatch * 2 });
    const buffer: JsMsg[] = [];
    let draining: Promise<void> | undefined;
    const drain = (): Promise<void> => {
      draining ??= (async () => {
        try {
          while (buffer.length > 0) await handle(buffer.splice(0, maxBatch));
        } finally {
          draining = undefined;
        }
      })();
      return draining;
    };
    try {
      for await (const msg of messages) {
        buffer.push(msg);
        // Started on the next turn: messages that arrived together join the same batch.
        if (buffer.length >= maxBatch) await drain();
        else setImmediate(() => void drain());
        if (stopping) break;
      }
    } finally {
      await drain();
    }
  }

  async function run(): Promise<void> {
    while (!stopping) {
      try {
        await consumeOnce();
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
      await loop;
    },
  };
}
