import { createEvent } from '@mailfleet/kit';
import { testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type Db } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readEmailEvent } from '../../src/domain/events.js';
import { createFeedRepository } from '../../src/repositories/feed.repository.js';

/**
 * The feed's documents on the real store: a page is chosen by a read of every document on FerretDB, so they hold
 * only what a page is chosen by and the payload; the email id and summary are read back from the payload.
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

    const stored = await db.collection('event_feed').findOne({ _id: event.id as never });
    expect(Object.keys(stored!).sort()).toEqual(['_id', 'createdAt', 'dataJson', 'domainId', 'status', 'teamId']);

    const items = await feed.list('team_feed', {}, 1, 10);
    const byId = new Map(items.map((i) => [i.id, i]));
    expect(byId.get(event.id)).toMatchObject({
      emailId: 'em_feed1', status: 'DELIVERED', teamId: 'team_feed', data: event.data,
      email: { id: 'em_feed1', to: ['a@example.com', 'b@example.com'], subject: 'Hi', from: 'Me <me@example.com>' },
    });
    // A bare string recipient is still shown, as when the event was read.
    expect(byId.get(bare.id)).toMatchObject({ emailId: 'em_feed2', email: { id: 'em_feed2', to: ['c@example.com'], subject: 'Bare', from: '' } });
  });

  it('documents written with the summary beside the payload (earlier versions) read as before', async () => {
    const feed = createFeedRepository(db);
    await db.collection('event_feed').insertOne({
      _id: 'evt_old' as never, teamId: 'team_old', emailId: 'em_old', domainId: '', status: 'OPENED', dataJson: '{"id":"em_old"}',
      createdAt: new Date(), email: { id: 'em_old', to: ['x@example.com'], subject: 'Old', from: 'o@example.com' },
    });
    expect(await feed.list('team_old', {}, 1, 10)).toEqual([expect.objectContaining({
      id: 'evt_old', emailId: 'em_old', email: { id: 'em_old', to: ['x@example.com'], subject: 'Old', from: 'o@example.com' },
    })]);
  });
});
