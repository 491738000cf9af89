import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isolatedNats, stopNats } from '@mailfleet/testkit';
import { DiscardPolicy } from '@nats-io/jetstream';
import { createLogger } from '../../src/logger.js';
import { connectNats, type NatsHandle } from '../../src/nats/connection.js';

// Publishes whose acks share one reply subscription, against a real JetStream server.
const logger = createLogger({ service: 'kit-publish-test', level: 'silent' });
let nats: NatsHandle;
let natsInstance: string;

beforeAll(async () => {
  const started = await isolatedNats();
  natsInstance = started.instance;
  nats = await connectNats({ url: started.url, name: 'kit-publish-test', logger });
});
afterAll(async () => {
  await nats?.drain();
  await stopNats({ instance: natsInstance });
});

async function stream(opts: { maxMsgs?: number } = {}): Promise<{ name: string; subject: string }> {
  const name = `P${randomBytes(5).toString('hex')}`;
  const subject = `publish-test.${name}`;
  await nats.jsm.streams.add({ name, subjects: [`${subject}.>`], ...(opts.maxMsgs ? { max_msgs: opts.maxMsgs, discard: DiscardPolicy.New } : {}) });
  return { name, subject };
}

const bytes = (s: string) => new TextEncoder().encode(s);

describe('publishEvent', () => {
  it('resolves each publish with its own ack, many at once, and the stream holds each message once', async () => {
    const { name, subject } = await stream();
    const acks = await Promise.all(Array.from({ length: 200 }, (_, i) =>
      nats.publishEvent(`${subject}.${i % 3}`, bytes(`m${i}`), { msgID: `id-${i}`, timeoutMs: 5_000 })));
    expect(acks.every((a) => a.stream === name && !a.duplicate)).toBe(true);
    expect(new Set(acks.map((a) => a.seq)).size).toBe(200);
    // Each publish got the ack of its own message: its sequence holds its payload.
    for (const i of [0, 57, 199]) {
      const stored = await nats.jsm.streams.getMessage(name, { seq: acks[i]!.seq });
      expect(new TextDecoder().decode(stored!.data)).toBe(`m${i}`);
    }
    expect((await nats.jsm.streams.info(name)).state.messages).toBe(200);
  });

  it('a message id published again is acknowledged as a duplicate and stored once', async () => {
    const { name, subject } = await stream();
    const first = await nats.publishEvent(`${subject}.a`, bytes('one'), { msgID: 'same', timeoutMs: 5_000 });
    const again = await nats.publishEvent(`${subject}.a`, bytes('one'), { msgID: 'same', timeoutMs: 5_000 });
    expect(first.duplicate).toBe(false);
    expect(again).toEqual({ stream: name, seq: first.seq, duplicate: true });
    expect((await nats.jsm.streams.info(name)).state.messages).toBe(1);
  });

  it('rejects a publish no stream takes', async () => {
    await expect(nats.publishEvent(`nowhere.${randomBytes(4).toString('hex')}`, bytes('x'), { msgID: 'n1', timeoutMs: 5_000 }))
      .rejects.toThrow(/no JetStream stream takes/);
  });

  it('rejects a publish the stream refuses, and the next one goes through on the same subscription', async () => {
    const { subject } = await stream({ maxMsgs: 1 });
    await nats.publishEvent(`${subject}.a`, bytes('1'), { msgID: 'f1', timeoutMs: 5_000 });
    await expect(nats.publishEvent(`${subject}.a`, bytes('2'), { msgID: 'f2', timeoutMs: 5_000 })).rejects.toThrow(/JetStream refused a publish/);
    const other = await stream();
    expect((await nats.publishEvent(`${other.subject}.a`, bytes('3'), { msgID: 'f3', timeoutMs: 5_000 })).duplicate).toBe(false);
  });

  it('rejects a publish nobody acknowledges once its time is up', async () => {
    // A plain subscriber takes the subject (so the server does not answer "no responders") and never replies.
    const subject = `silent.${randomBytes(4).toString('hex')}`;
    const sub = nats.nc.subscribe(subject);
    try {
      await expect(nats.publishEvent(subject, bytes('x'), { msgID: 't1', timeoutMs: 300 })).rejects.toThrow(/no JetStream ack .* within 300 ms/);
    } finally {
      sub.unsubscribe();
    }
  });
});
