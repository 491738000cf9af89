import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { durablesIdle, isolatedNats, stopNats } from '@mailfleet/testkit';
import { createLogger } from '../../src/logger.js';
import { connectNats, type NatsHandle } from '../../src/nats/connection.js';
import { createBatchConsumer, type BatchHandler } from '../../src/nats/batch-consumer.js';
import type { DurableConsumer } from '../../src/nats/consumer.js';
import { createEvent, encodeEvent, ensureEventStream, EVENT_STREAM, PoisonEventError, subjectFor, type EventEnvelope } from '../../src/nats/events.js';

const logger = createLogger({ service: 'kit-batch-test', level: 'silent' });
let nats: NatsHandle;
let natsInstance: string;
const consumers: DurableConsumer[] = [];

beforeAll(async () => {
  const started = await isolatedNats();
  natsInstance = started.instance;
  nats = await connectNats({ url: started.url, name: 'kit-batch-test', logger });
  await ensureEventStream(nats.jsm);
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  await nats?.drain();
  await stopNats({ instance: natsInstance });
});

function uniqueGroup(): string {
  return `b${randomBytes(5).toString('hex')}`;
}

async function publishAll(events: readonly EventEnvelope<unknown>[]): Promise<void> {
  await Promise.all(events.map((e) => nats.js.publish(subjectFor(e.type), encodeEvent(e), { msgID: e.id })));
}

function start(group: string, handler: BatchHandler, batchSize = 64, lingerMs?: number): DurableConsumer {
  const c = createBatchConsumer({
    nats, logger, durable: `kit-batch-${group}`, filterSubjects: [`mailfleet.${group}.>`], handler, batchSize, backoffMs: [100, 200], maxDeliver: 4,
    ...(lingerMs !== undefined ? { lingerMs } : {}),
  });
  consumers.push(c);
  return c;
}

const idle = (group: string, timeoutMs = 20_000): Promise<void> => durablesIdle(nats.jsm, [`kit-batch-${group}`], { timeoutMs, intervalMs: 50 });

describe('batch durable consumer', () => {
  it('hands waiting messages over in batches no larger than asked, each event once, and acks them', async () => {
    const group = uniqueGroup();
    const events = Array.from({ length: 300 }, (_, i) => createEvent(`${group}.happened`, 'team_a', { i }));
    await publishAll(events);
    const sizes: number[] = [];
    const seen = new Map<string, number>();
    const c = start(group, async (batch) => {
      sizes.push(batch.length);
      for (const b of batch) seen.set(b.event.id, (seen.get(b.event.id) ?? 0) + 1);
    });
    await c.start();
    await idle(group);
    expect(seen.size).toBe(300);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(64);
    // Messages that were waiting go together, not one by one.
    expect(sizes.length).toBeLessThan(300 / 4);
  });

  it('at a steady trickle a batch holds what arrives in one linger, also after a busy handler', async () => {
    const group = uniqueGroup();
    const sizes: number[] = [];
    // The handler's writes take a while; what arrives meanwhile waits out the linger of its first event.
    const c = start(group, async (batch) => {
      sizes.push(batch.length);
      await new Promise((r) => setTimeout(r, 20));
    }, 256, 300);
    await c.start();
    const events = Array.from({ length: 120 }, (_, i) => createEvent(`${group}.happened`, 'team_a', { i }));
    const started = performance.now();
    for (const e of events) {
      await nats.js.publish(subjectFor(e.type), encodeEvent(e), { msgID: e.id });
      await new Promise((r) => setTimeout(r, 10));
    }
    const elapsed = performance.now() - started;
    await idle(group);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(120);
    // A batch's first event waits out the linger, so the trickle (about 1.2 s, longer on a busy machine) makes one
    // batch per 300 ms of it, and a few over. Dispatching what arrived during each 20 ms handler at once made
    // batches of two or three events, some fifty batches.
    expect(sizes.length).toBeLessThanOrEqual(Math.ceil(elapsed / 300) + 3);
  });

  it('a poison event thrown by the handler is terminated alone; the rest of its batch is handled', async () => {
    const group = uniqueGroup();
    const events = Array.from({ length: 40 }, (_, i) => createEvent(`${group}.happened`, 'team_a', { i }));
    const bad = events[17]!;
    const done = new Set<string>();
    let calls = 0;
    const c = start(group, async (batch) => {
      calls++;
      if (batch.some((b) => b.event.id === bad.id)) throw new PoisonEventError('cannot read this one');
      for (const b of batch) done.add(b.event.id);
    });
    await publishAll(events);
    await c.start();
    await idle(group);
    expect(done.size).toBe(39);
    expect(done.has(bad.id)).toBe(false);
    expect(calls).toBeGreaterThan(1);
    const info = await nats.jsm.consumers.info(EVENT_STREAM, `kit-batch-${group}`);
    expect(info.num_redelivered).toBe(0);
  });

  it('poison and retry named in the outcome: terminated, redelivered later, the rest acked once', async () => {
    const group = uniqueGroup();
    const events = Array.from({ length: 10 }, (_, i) => createEvent(`${group}.happened`, 'team_a', { i }));
    const deliveries = new Map<string, number[]>();
    const c = start(group, async (batch) => {
      for (const b of batch) deliveries.set(b.event.id, [...(deliveries.get(b.event.id) ?? []), b.deliveryCount]);
      const retry = new Set(batch.filter((b) => b.event.id === events[2]!.id && b.deliveryCount === 1).map((b) => b.event.id));
      return { poison: new Map([[events[5]!.id, 'bad payload']]), retry };
    });
    await publishAll(events);
    await c.start();
    await new Promise((r) => setTimeout(r, 300));
    await idle(group);
    expect(deliveries.get(events[2]!.id)).toEqual([1, 2]);
    expect(deliveries.get(events[5]!.id)).toEqual([1]);
    for (const [i, e] of events.entries()) if (i !== 2) expect(deliveries.get(e.id)).toEqual([1]);
  });

  it('a failing batch is naked and comes again; an undecodable message is terminated without reaching the handler', async () => {
    const group = uniqueGroup();
    const events = Array.from({ length: 5 }, (_, i) => createEvent(`${group}.happened`, 'team_a', { i }));
    await nats.js.publish(`mailfleet.${group}.happened`, new TextEncoder().encode('not json'), { msgID: `raw-${group}` });
    await publishAll(events);
    let failures = 0;
    const handled = new Set<string>();
    const c = start(group, async (batch) => {
      if (failures === 0) {
        failures++;
        throw new Error('database away');
      }
      for (const b of batch) handled.add(b.event.id);
    });
    await c.start();
    await new Promise((r) => setTimeout(r, 300));
    await idle(group);
    expect(failures).toBe(1);
    expect(handled.size).toBe(5);
  });

  it('stop waits for the batch in hand to be settled', async () => {
    const group = uniqueGroup();
    const events = Array.from({ length: 20 }, (_, i) => createEvent(`${group}.happened`, 'team_a', { i }));
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    let entered!: () => void;
    const inHandler = new Promise<void>((r) => { entered = r; });
    let finished = 0;
    const c = createBatchConsumer({
      nats, logger, durable: `kit-batch-${group}`, filterSubjects: [`mailfleet.${group}.>`], batchSize: 64, backoffMs: [100, 200], maxDeliver: 4,
      handler: async (batch) => {
        entered();
        await gate;
        finished += batch.length;
      },
    });
    await publishAll(events);
    await c.start();
    await inHandler;
    let stopped = false;
    const stopping = c.stop().then(() => { stopped = true; });
    await new Promise((r) => setTimeout(r, 100));
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(finished).toBeGreaterThan(0);
    // Whatever was handled was acked before stop returned; the rest waits for the next start.
    const again = start(group, async (batch) => { finished += batch.length; });
    await again.start();
    await idle(group);
    expect(finished).toBe(20);
  });
});
