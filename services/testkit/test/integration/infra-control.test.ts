import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { MongoClient } from 'mongodb';
import { describe, expect, inject, it } from 'vitest';
import { canConnect } from '@mailfleet/deploy';
import {
  controlRequest,
  isolatedNats,
  killNats,
  startNats,
  stopNats,
  testMongoUrl,
  testNatsUrl,
  uniqueDbName,
} from '@mailfleet/testkit';

/** Resolves at the client's next successful reconnect. */
async function nextReconnect(nc: NatsConnection): Promise<void> {
  for await (const status of nc.status()) {
    if (status.type === 'reconnect') return;
  }
}

describe('run-wide infrastructure (global setup)', () => {
  it('provides a FerretDB URL that takes writes', async () => {
    const client = new MongoClient(testMongoUrl());
    try {
      const db = client.db(uniqueDbName('infra'));
      await db.collection('things').insertOne({ _id: 'a' as never, n: 1 });
      expect(await db.collection('things').findOne({ _id: 'a' as never })).toEqual({ _id: 'a', n: 1 });
    } finally {
      await client.close();
    }
  });

  it('uniqueDbName is stable within a file and fits FerretDB', () => {
    const name = uniqueDbName('Some Prefix!');
    expect(uniqueDbName('Some Prefix!')).toBe(name);
    expect(uniqueDbName('other')).not.toBe(name);
    expect(name).toMatch(/^[a-z0-9_]{1,63}$/);
    expect(name).toContain('infra_control');
  });

  it('provides a shared NATS with JetStream and a loopback control endpoint', async () => {
    expect(inject('infraControlUrl')).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await controlRequest<{ url: string }>('/nats/url')).toEqual({ url: testNatsUrl() });
    // Another file may be running a drill on the shared server right now: wait for it.
    const nc = await connect({ servers: testNatsUrl(), waitOnFirstConnect: true, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
    try {
      await expect.poll(async () => (await (await jetstreamManager(nc)).getAccountInfo().catch(() => undefined))?.limits, { timeout: 20_000 }).toBeDefined();
    } finally {
      await nc.close();
    }
  });

  // An instance of its own: stopping the shared server would hit every file running now.
  it('stops and starts NATS through the control endpoint; the URL and JetStream data stay', async () => {
    const { instance, url } = await isolatedNats();
    expect(url).not.toBe(testNatsUrl());
    const port = Number(new URL(url).port);

    const nc = await connect({ servers: url });
    const stream = `TESTKIT_${Date.now()}`;
    await (await jetstreamManager(nc)).streams.add({ name: stream, subjects: [`testkit.${stream}.>`] });
    await nc.close();

    await stopNats({ instance });
    expect(await canConnect(port)).toBe(false);
    expect(await startNats({ instance })).toBe(url);
    expect(await canConnect(port)).toBe(true);

    const again = await connect({ servers: url });
    try {
      const info = await (await jetstreamManager(again)).streams.info(stream);
      expect(info.config.name).toBe(stream);
    } finally {
      await again.close();
    }
  });

  it('a client with reconnect on rides through a NATS kill and start', async () => {
    const { instance, url } = await isolatedNats();
    const nc = await connect({ servers: url, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
    try {
      const reconnected = nextReconnect(nc);
      await killNats({ instance });
      expect(await canConnect(Number(new URL(url).port))).toBe(false);
      await startNats({ instance });
      await reconnected;
      const sub = nc.subscribe('testkit.ping', { max: 1 });
      const got = (async () => {
        for await (const m of sub) return m.string();
        return undefined;
      })();
      await nc.flush();
      nc.publish('testkit.ping', 'pong');
      expect(await got).toBe('pong');
    } finally {
      await nc.close();
    }
  });

  it('reports an unknown instance clearly', async () => {
    await expect(stopNats({ instance: 'never-started' })).rejects.toThrow(/no NATS instance named never-started/);
  });
});
