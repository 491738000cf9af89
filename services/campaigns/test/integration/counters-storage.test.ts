import { testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type CommandStartedEvent, type Db } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCampaignsRepository, createOnceRepository, type CountOnceInput } from '../../src/repositories/campaigns.repository.js';

/** The campaign counters' storage budget: writes per batch of events, not per event (driver command monitoring). */
const dbName = uniqueDbName('campaigns_counters_ops');
let client: MongoClient;
let db: Db;
const writes: string[] = [];

beforeAll(async () => {
  client = await new MongoClient(testMongoUrl(), { monitorCommands: true }).connect();
  client.on('commandStarted', (e: CommandStartedEvent) => {
    if (e.databaseName === dbName && ['insert', 'update', 'delete', 'findAndModify'].includes(e.commandName)) {
      writes.push(`${e.commandName} ${String(e.command[e.commandName])}`);
    }
  });
  db = client.db(dbName);
});
afterAll(async () => {
  await db?.dropDatabase();
  await client?.close();
});

describe('campaign counters in batches', () => {
  it('300 deliveries of one campaign cost one write per step (finished by one settlement), counted once each, and a replay adds nothing', async () => {
    await db.collection('campaigns').insertOne({ _id: 'cmp_1' as never, delivered: 0, sent: 0 });
    const repo = createCampaignsRepository(db);
    const now = new Date();
    const inputs: CountOnceInput[] = Array.from({ length: 300 }, (_, i) => ({
      id: 'cmp_1', key: `count:cmp_1:delivered:em_${i}`, eventId: `evt_${i}`, counters: ['delivered'], now, retentionMs: 60_000,
    }));
    writes.length = 0;
    expect(await repo.countBatch(inputs)).toMatchObject({ counted: 300, alreadyCounted: 0 });
    expect(writes).toEqual(['insert once_keys', 'update campaigns', 'insert once_keys', 'update campaigns']);
    expect(await repo.countBatch(inputs.slice(0, 50))).toMatchObject({ counted: 0, alreadyCounted: 50 });
    const doc = await db.collection('campaigns').findOne({ _id: 'cmp_1' as never });
    expect(doc).toMatchObject({ delivered: 300, sent: 0, pending: [] });
  });

  it('the sweep takes a settlement only once the keys it finishes have expired', async () => {
    await db.collection('campaigns').insertOne({ _id: 'cmp_sweep' as never, delivered: 0, sent: 0 });
    const repo = createCampaignsRepository(db);
    const once = createOnceRepository(db);
    const now = new Date();
    const retentionMs = 60_000;
    const inputs: CountOnceInput[] = Array.from({ length: 5 }, (_, i) => ({
      id: 'cmp_sweep', key: `count:cmp_sweep:sent:em_${i}`, eventId: `evt_s${i}`, counters: ['sent'], now, retentionMs,
    }));
    await repo.countBatch(inputs);
    const ofCampaign = { $or: [{ _id: { $in: inputs.map((i) => i.key) } }, { target: 'cmp_sweep' }] } as never;
    expect(await db.collection('once_keys').countDocuments(ofCampaign)).toBe(6);
    // Before the keys expire nothing goes, and a replay still counts nothing.
    await once.sweep(new Date(now.getTime() + retentionMs / 2), retentionMs);
    expect(await db.collection('once_keys').countDocuments(ofCampaign)).toBe(6);
    expect(await repo.countBatch(inputs)).toMatchObject({ counted: 0, alreadyCounted: 5 });
    // Once they have, the keys and their settlement go together.
    await once.sweep(new Date(now.getTime() + 2 * retentionMs + 1_000), retentionMs);
    expect(await db.collection('once_keys').countDocuments(ofCampaign)).toBe(0);
    expect(await db.collection('campaigns').findOne({ _id: 'cmp_sweep' as never })).toMatchObject({ sent: 5, pending: [] });
  });

  it('a campaign that is gone counts nothing', async () => {
    const repo = createCampaignsRepository(db);
    const res = await repo.countBatch([{ id: 'cmp_gone', key: 'count:cmp_gone:sent:em_1', eventId: 'evt_g', counters: ['sent'], now: new Date(), retentionMs: 60_000 }]);
    expect(res.busy.size).toBe(0);
    expect(await db.collection('campaigns').countDocuments({ _id: 'cmp_gone' as never })).toBe(0);
  });
});
