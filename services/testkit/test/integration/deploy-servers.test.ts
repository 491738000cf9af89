import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canConnect, startFerretDb, startNats, type FerretDbServer, type NatsServer } from '@mailfleet/deploy';

describe('deploy: startFerretDb and startNats', () => {
  let dataDir: string;
  let ferret: FerretDbServer;
  let nats: NatsServer;

  beforeAll(async () => {
    dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-deploy-test-'));
    [ferret, nats] = await Promise.all([startFerretDb({ port: 0, dataDir }), startNats({ port: 0, dataDir })]);
  });
  afterAll(async () => {
    await Promise.all([ferret?.stop(), nats?.stop()]);
    await fsp.rm(dataDir, { recursive: true, force: true });
  });

  it('FerretDB takes inserts and finds them, and keeps them across a restart', async () => {
    expect(ferret.url).toMatch(/^mongodb:\/\/127\.0\.0\.1:\d+\/$/);
    let client = new MongoClient(ferret.url);
    await client.db('deploytest').collection('items').insertMany([{ sku: 'a', qty: 1 }, { sku: 'b', qty: 2 }]);
    await client.db('deploytest').collection('items').updateOne({ sku: 'a' }, { $inc: { qty: 5 } });
    await client.close();

    await ferret.restart();
    client = new MongoClient(ferret.url);
    try {
      const docs = await client.db('deploytest').collection('items').find({}, { projection: { _id: 0 } }).sort({ sku: 1 }).toArray();
      expect(docs).toEqual([{ sku: 'a', qty: 6 }, { sku: 'b', qty: 2 }]);
    } finally {
      await client.close();
    }
    expect(await fsp.readdir(path.join(dataDir, 'ferretdb'))).toContain('deploytest.sqlite');
  });

  it('NATS has JetStream on and keeps messages across restart() on the same port', async () => {
    expect(nats.url).toBe(`nats://127.0.0.1:${nats.port}`);
    let nc = await connect({ servers: nats.url });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'DEPLOYTEST', subjects: ['deploytest.>'] });
    await jetstream(nc).publish('deploytest.one', 'hello', { msgID: 'm1' });
    // Same id again: deduplicated by the server.
    const dup = await jetstream(nc).publish('deploytest.one', 'hello', { msgID: 'm1' });
    expect(dup.duplicate).toBe(true);
    await nc.close();

    await nats.restart();
    nc = await connect({ servers: nats.url });
    try {
      const info = await (await jetstreamManager(nc)).streams.info('DEPLOYTEST');
      expect(info.state.messages).toBe(1);
    } finally {
      await nc.close();
    }
  });

  it('kill() leaves the port closed and start() brings it back', async () => {
    await nats.kill();
    expect(nats.process.running).toBe(false);
    expect(await canConnect(nats.port)).toBe(false);
    await nats.start();
    expect(await canConnect(nats.port)).toBe(true);
  });

  it('binds loopback only', async () => {
    const nonLoopback = Object.values(os.networkInterfaces())
      .flat()
      .find((i) => i && i.family === 'IPv4' && !i.internal);
    if (!nonLoopback) return; // a machine with loopback only has nothing to check against
    expect(await canConnect(nats.port, nonLoopback.address)).toBe(false);
    expect(await canConnect(ferret.port, nonLoopback.address)).toBe(false);
  });
});
