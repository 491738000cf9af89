import { createEvent } from '@mailfleet/kit';
import { testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type Db } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readEmailEvent } from '../../src/domain/events.js';
import { createFeedRepository, feedKey } from '../../src/repositories/feed.repository.js';

/**
 * The feed's documents on the real store: keyed by team, time and event id so that a page is a range of keys,
 * holding only what a page is chosen by and the payload; the email id and summary are read back from the payload.
 */
const dbName = uniqueDbName('analytics_feed_docs');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await new MongoClient(testMongoUrl()).connect();
  db = client.db(dbName);
  await createFeedRepository(db).ensureIndexes();
});
afterAll(async () => {
  await db?.dropDatabase();
  await client?.close();
});

describe('feed documents', () => {
  it('store only the page keys and the payload, and list with the email summary read from the payload', async () => {
    const feed = createFeedRepository(db);
    const event = createEvent('email.delivered', 'team_feed', {
      id: 'em_feed1', to: ['a@example.com', 'b@example.com'], from: 'Me <me@example.com>', subject: 'Hi', domainId: 'dom_1',
      metadata: { 'odd.key': '$x' }, occurredAt: new Date().toISOString(),
    });
    const bare = createEvent('email.sent', 'team_feed', { id: 'em_feed2', to: 'c@example.com', subject: 'Bare' });
    await feed.addMany([readEmailEvent(event)!, readEmailEvent(bare)!]);

    const key = feedKey('team_feed', new Date(event.createdAt), event.id);
    expect(key).toBe(`team_feed|${String(Date.parse(event.createdAt)).padStart(13, '0')}|${event.id}`);
    const stored = await db.collection('event_feed').findOne({ _id: key as never });
    expect(Object.keys(stored!).sort()).toEqual(['_id', 'createdAt', 'dataJson', 'domainId', 'status', 'teamId']);
    // A redelivered event is the same key: inserted once.
    await feed.addMany([readEmailEvent(event)!]);
    expect(await db.collection('event_feed').countDocuments({ teamId: 'team_feed' })).toBe(2);

    const items = await feed.list('team_feed', {}, 1, 10);
    const byId = new Map(items.map((i) => [i.id, i]));
    expect(byId.get(event.id)).toMatchObject({
      emailId: 'em_feed1', status: 'DELIVERED', teamId: 'team_feed', data: event.data,
      email: { id: 'em_feed1', to: ['a@example.com', 'b@example.com'], subject: 'Hi', from: 'Me <me@example.com>' },
    });
    // A bare string recipient is still shown, as when the event was read.
    expect(byId.get(bare.id)).toMatchObject({ emailId: 'em_feed2', email: { id: 'em_feed2', to: ['c@example.com'], subject: 'Bare', from: '' } });
  });

  it('documents of the earlier layout (keyed by event id, summary beside the payload) are moved to feed keys once, at start', async () => {
    const oldDb = client.db(`${dbName}_old`);
    try {
      const docs = oldDb.collection('event_feed');
      const t0 = Date.now() - 60_000;
      const old = (i: number) => ({
        _id: `evt_old${i}` as never, teamId: 'team_old', emailId: `em_old${i}`, domainId: '', status: 'OPENED', dataJson: `{"id":"em_old${i}"}`,
        createdAt: new Date(t0 + i * 1000), email: { id: `em_old${i}`, to: ['x@example.com'], subject: `Old ${i}`, from: 'o@example.com' },
      });
      await docs.insertMany([old(1), old(2), old(3)]);
      // A start that died after copying evt_old2 but before deleting the original.
      await docs.insertOne({ ...old(2), _id: feedKey('team_old', new Date(t0 + 2000), 'evt_old2') as never });

      const feed = createFeedRepository(oldDb);
      await feed.ensureIndexes();
      expect((await docs.find().toArray()).map((d) => d._id).sort()).toEqual([1, 2, 3].map((i) => feedKey('team_old', new Date(t0 + i * 1000), `evt_old${i}`)));
      const listed = await feed.list('team_old', {}, 1, 10);
      expect(listed.map((i) => i.id)).toEqual(['evt_old3', 'evt_old2', 'evt_old1']);
      expect(listed[0]).toMatchObject({ emailId: 'em_old3', email: { id: 'em_old3', to: ['x@example.com'], subject: 'Old 3', from: 'o@example.com' } });
      expect((await feed.list('team_old', { after: new Date(t0 + 1000) }, 1, 10)).map((i) => i.id)).toEqual(['evt_old3', 'evt_old2']);

      // Done once: a document of the old form written later (it cannot be, but if it were) is left alone.
      await docs.insertOne(old(4));
      await createFeedRepository(oldDb).ensureIndexes();
      expect(await docs.countDocuments({ _id: 'evt_old4' as never })).toBe(1);
    } finally {
      await oldDb.dropDatabase();
    }
  });
});
