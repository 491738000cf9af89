import { createEvent, createLogger, outboxEventType, type EventEnvelope, type OutboxEntry } from '@mailfleet/kit';
import { countStorageOps, testMongoUrl, uniqueDbName, type StorageOpsCounter } from '@mailfleet/testkit';
import { MongoClient, type Db } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContact } from '../../src/domain/contact.js';
import { createUnsubscribesHandler } from '../../src/events/unsubscribes.consumer.js';
import { createContactBooksRepository } from '../../src/repositories/contact-books.repository.js';
import { createContactsRepository } from '../../src/repositories/contacts.repository.js';
import { createProcessedEventsRepository } from '../../src/repositories/processed-events.repository.js';

/** The unsubscribes consumer's storage budget: operations per batch of events, not per event (driver command monitoring). */
const dbName = uniqueDbName('contacts_unsub_ops');
const log = createLogger({ service: 'contacts-ops', level: 'silent' });
let client: MongoClient;
let db: Db;
let ops: StorageOpsCounter;

beforeAll(async () => {
  client = await new MongoClient(testMongoUrl(), { monitorCommands: true }).connect();
  db = client.db(dbName);
  ops = countStorageOps(client);
});
afterAll(async () => {
  ops?.detach();
  await db?.dropDatabase();
  await client?.close();
});

describe('delivery events unsubscribe contacts in batches', () => {
  it('60 hard bounces reaching 120 contacts cost one read per collection, a write per 50 contacts and one insert; a replay one read', async () => {
    const books = createContactBooksRepository(db);
    const contacts = createContactsRepository(db);
    const processed = createProcessedEventsRepository(db);
    await Promise.all([books.ensureIndexes(), contacts.ensureIndexes(), processed.ensureIndexes()]);
    const now = new Date();
    const addresses = Array.from({ length: 60 }, (_, i) => `r${i}@example.com`);
    for (const [teamId, bookId] of [['team_a', 'cb_1'], ['team_a', 'cb_2'], ['team_b', 'cb_3']] as const) {
      for (const email of addresses) {
        await contacts.insert(createContact({ id: `ct_${bookId}_${email}`, teamId, contactBookId: bookId, input: { email }, now }));
      }
    }
    const handler = createUnsubscribesHandler({
      processed, retentionMs: 60_000,
      unsubscribeMany: async (requests) => {
        const teams = [...new Set(requests.map((r) => r.teamId))];
        const exclude = new Map(await Promise.all(teams.map(async (t) => [t, await books.deletingIds(t)] as const)));
        return contacts.unsubscribeMany(requests, exclude, new Date());
      },
    });
    const events: EventEnvelope[] = [
      ...addresses.map((email, i) => createEvent('email.bounced', 'team_a', { id: `em_${i}`, to: [`R <${email.toUpperCase()}>`], bounce: { type: 'Permanent', subType: 'General', message: '550' } })),
      createEvent('email.bounced', 'team_a', { id: 'em_soft', to: ['r0@example.com'], bounce: { type: 'Transient', subType: 'MailboxFull', message: '452' } }),
    ];
    const batch = events.map((event) => ({ event, deliveryCount: 1 }));

    ops.start();
    await handler(batch, { log });
    const first = ops.stop();
    expect(first.count({ database: dbName, command: 'find', collection: 'processed_events' })).toBe(1);
    expect(first.count({ database: dbName, command: 'find', collection: 'contact_books' })).toBe(1);
    expect(first.count({ database: dbName, command: 'find', collection: 'contacts' })).toBe(1);
    expect(first.count({ database: dbName, command: 'update', collection: 'contacts' })).toBe(3);
    expect(first.count({ database: dbName, command: 'insert', collection: 'processed_events' })).toBe(1);
    expect(first.count({ database: dbName })).toBe(7);

    const col = db.collection('contacts');
    expect(await col.countDocuments({ teamId: 'team_a', subscribed: false, unsubscribeReason: 'HARD_BOUNCE' })).toBe(120);
    expect(await col.countDocuments({ teamId: 'team_b', subscribed: true })).toBe(60);
    // Each contact's write carries its own contact.updated and contact.unsubscribed (the outbox).
    const one = await col.findOne({ _id: 'ct_cb_2_r7@example.com' as never });
    expect((one?.outbox as OutboxEntry[] | undefined)?.map(outboxEventType)).toEqual(['contact.created', 'contact.updated', 'contact.unsubscribed']);

    ops.start();
    await handler(batch, { log });
    expect(ops.stop().count({ database: dbName })).toBe(1);
  });
});
