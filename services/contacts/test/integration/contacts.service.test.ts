import { status, type ServiceError } from '@grpc/grpc-js';
import { DeliverPolicy, jetstream, type ConsumerMessages } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  createEvent, createGrpcClient, createLogger, decodeBookCursor, decodeEvent, encodeBookCursor, encodeEvent, EVENT_STREAM, newId, startService, subjectFor,
  type EventEnvelope, type RunningService, type UpstreamClient,
} from '@mailfleet/kit';
import { contactsV1 } from '@mailfleet/proto';
import { testMongoUrl, testNatsUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type Db } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadContactsConfig } from '../../src/config.js';
import { createContactsServer } from '../../src/server.js';

// Event assertions wait for the outbox relay, which can be minutes behind on a loaded two-core machine.
vi.setConfig({ testTimeout: 150_000 });

const logger = createLogger({ service: 'contacts-test', level: 'silent' });
const dbName = uniqueDbName('contacts');
let svc: RunningService;
let contacts: UpstreamClient<contactsV1.ContactsServiceClient>;
let nc: NatsConnection;
let mongo: MongoClient;
let db: Db;
let feed: ConsumerMessages;
const seen: EventEnvelope[] = [];

beforeAll(async () => {
  const config = loadContactsConfig({
    GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: testMongoUrl(), MONGO_DB: dbName, NATS_URL: testNatsUrl(),
    LOG_LEVEL: 'silent', BOOK_PURGE_INTERVAL_MS: '300', BOOK_PURGE_GRACE_MS: '0', BOOK_PURGE_BATCH_SIZE: '40',
  });
  svc = await startService({ name: 'contacts', config, env: {}, logger, build: (infra) => createContactsServer({ config, infra }) });
  contacts = createGrpcClient({ name: 'contacts', address: `127.0.0.1:${svc.grpc.port}`, ctor: contactsV1.ContactsServiceClient, logger, deadlineMs: 30_000 });
  nc = await connect({ servers: testNatsUrl() });
  const consumer = await jetstream(nc).consumers.get(EVENT_STREAM, { filter_subjects: ['mailfleet.contact.>'], deliver_policy: DeliverPolicy.New });
  feed = await consumer.consume();
  void (async () => {
    for await (const m of feed) seen.push(decodeEvent(m.data));
  })();
  mongo = new MongoClient(testMongoUrl());
  db = mongo.db(dbName);
});

afterAll(async () => {
  await feed?.close();
  await nc?.close();
  contacts?.close();
  await svc?.infra.mongo.db.dropDatabase();
  await svc?.shutdown('test over');
  await mongo?.close();
});

const code = (p: Promise<unknown>) => p.then(() => 'OK', (e: ServiceError) => status[e.code]);

/** Events wait for the outbox relay, which may be behind a bulk of earlier writes on a busy machine. */
async function waitFor<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function eventsOf(teamId: string, type?: string): EventEnvelope[] {
  return seen.filter((e) => e.teamId === teamId && (!type || e.type === type));
}

async function newBook(teamId = newId('team'), name = 'Newsletter') {
  const { contactBook } = await contacts.call.createContactBook({ teamId, name, properties: {} });
  return { teamId, bookId: contactBook!.id, book: contactBook! };
}

async function addContact(teamId: string, contactBookId: string, email: string, extra: Partial<contactsV1.ContactInput> = {}) {
  return (await contacts.call.createContact({ teamId, contactBookId, contact: { email, ...extra } })).contact!;
}

describe('contact books', () => {
  it('create, list with counts, get with totals, patch, delete; foreign books are NOT_FOUND', async () => {
    const teamId = newId('team');
    const { contactBook: a } = await contacts.call.createContactBook({ teamId, name: ' Customers ', emoji: '🎉', properties: { region: 'eu' } });
    expect(a).toMatchObject({ name: 'Customers', emoji: '🎉', teamId, properties: { region: 'eu' } });
    expect(a!.createdAt!.getTime()).toBe(a!.updatedAt!.getTime());
    const { contactBook: b } = await contacts.call.createContactBook({ teamId, name: 'Leads', properties: {} });
    expect(b!.emoji).toBe('📙');
    expect(await code(contacts.call.createContactBook({ teamId, name: '   ', properties: {} }))).toBe('INVALID_ARGUMENT');

    await addContact(teamId, a!.id, 'one@example.com');
    await addContact(teamId, a!.id, 'two@example.com', { subscribed: false });
    const listed = await contacts.call.listContactBooks({ teamId });
    expect(listed.contactBooks.map((i) => [i.contactBook!.name, i.contactsCount])).toEqual([['Leads', 0], ['Customers', 2]]);

    const got = await contacts.call.getContactBook({ teamId, contactBookId: a!.id });
    expect(got.details).toEqual({ totalContacts: 2, unsubscribedContacts: 1 });

    const patched = await contacts.call.updateContactBook({ teamId, contactBookId: a!.id, name: 'Clients' });
    expect(patched.contactBook).toMatchObject({ name: 'Clients', emoji: '🎉', properties: { region: 'eu' } });
    expect(patched.contactBook!.updatedAt!.getTime()).toBeGreaterThanOrEqual(a!.updatedAt!.getTime());
    const cleared = await contacts.call.updateContactBook({ teamId, contactBookId: a!.id, properties: { values: {} } });
    expect(cleared.contactBook!.properties).toEqual({});

    const other = newId('team');
    expect(await code(contacts.call.getContactBook({ teamId: other, contactBookId: a!.id }))).toBe('NOT_FOUND');
    expect(await code(contacts.call.updateContactBook({ teamId: other, contactBookId: a!.id, name: 'x' }))).toBe('NOT_FOUND');
    expect(await code(contacts.call.deleteContactBook({ teamId: other, contactBookId: a!.id }))).toBe('NOT_FOUND');
    expect(await code(contacts.call.listContacts({ teamId: other, contactBookId: a!.id, page: 0, limit: 0, emails: [], ids: [] }))).toBe('NOT_FOUND');

    await contacts.call.deleteContactBook({ teamId, contactBookId: a!.id });
    expect(await code(contacts.call.getContactBook({ teamId, contactBookId: a!.id }))).toBe('NOT_FOUND');
    expect(await code(contacts.call.deleteContactBook({ teamId, contactBookId: a!.id }))).toBe('NOT_FOUND');
    expect(await code(contacts.call.createContact({ teamId, contactBookId: a!.id, contact: { email: 'three@example.com' } }))).toBe('NOT_FOUND');
    expect((await contacts.call.listContactBooks({ teamId })).contactBooks.map((i) => i.contactBook!.id)).toEqual([b!.id]);
  });

  it('deleting a book purges its contacts, each with contact.deleted, then the book itself', async () => {
    const { teamId, bookId } = await newBook();
    const res = await contacts.call.bulkUpsertContacts({ teamId, contactBookId: bookId, contacts: Array.from({ length: 130 }, (_, i) => ({ email: `p${i}@example.com` })) });
    expect(res.createdCount).toBe(130);
    await contacts.call.deleteContactBook({ teamId, contactBookId: bookId });
    await waitFor('the contacts and the book to be purged', async () => {
      const left = await db.collection('contacts').countDocuments({ contactBookId: bookId });
      const book = await db.collection('contact_books').countDocuments({ _id: bookId as never });
      return left === 0 && book === 0 ? true : undefined;
    });
    const deleted = await waitFor('130 contact.deleted events', () => {
      const d = eventsOf(teamId, 'contact.deleted');
      return d.length >= 130 ? d : undefined;
    });
    expect(new Set(deleted.map((e) => (e.data as { email: string }).email)).size).toBe(130);
    expect(deleted[0]!.data).toMatchObject({ contactBookId: bookId, subscribed: true });
  });

  it('the sweeper finishes a deletion that was interrupted', async () => {
    const { teamId, bookId } = await newBook();
    await contacts.call.bulkUpsertContacts({ teamId, contactBookId: bookId, contacts: [{ email: 'x1@example.com' }, { email: 'x2@example.com' }] });
    // What a crash right after the first phase leaves behind: the book marked, nothing purged.
    await db.collection('contact_books').updateOne({ _id: bookId as never }, { $set: { deletingAt: new Date() } });
    expect(await code(contacts.call.getContactBook({ teamId, contactBookId: bookId }))).toBe('NOT_FOUND');
    await waitFor('the sweeper to purge the book', async () => (await db.collection('contact_books').countDocuments({ _id: bookId as never })) === 0 || undefined);
    expect(await db.collection('contacts').countDocuments({ contactBookId: bookId, _deletedAt: { $exists: false } })).toBe(0);
  });
});

describe('contacts', () => {
  it('create normalises the email, refuses a duplicate, gets, patches only given fields', async () => {
    const { teamId, bookId } = await newBook();
    const c = await addContact(teamId, bookId, ' Ann@Example.COM ', { firstName: 'Ann', properties: { values: { plan: 'pro' } } });
    expect(c).toMatchObject({ email: 'ann@example.com', firstName: 'Ann', lastName: undefined, subscribed: true, properties: { plan: 'pro' }, contactBookId: bookId });
    expect(await code(contacts.call.createContact({ teamId, contactBookId: bookId, contact: { email: 'ANN@example.com' } }))).toBe('ALREADY_EXISTS');
    expect(await code(contacts.call.createContact({ teamId, contactBookId: bookId, contact: { email: 'not an email' } }))).toBe('INVALID_ARGUMENT');

    const patched = (await contacts.call.updateContact({ teamId, contactBookId: bookId, contactId: c.id, lastName: 'Lee' })).contact!;
    expect(patched).toMatchObject({ email: 'ann@example.com', firstName: 'Ann', lastName: 'Lee', properties: { plan: 'pro' }, subscribed: true });
    expect((await contacts.call.getContact({ teamId, contactBookId: bookId, contactId: c.id })).contact).toEqual(patched);
    expect(await code(contacts.call.getContact({ teamId: newId('team'), contactBookId: bookId, contactId: c.id }))).toBe('NOT_FOUND');
    expect(await code(contacts.call.updateContact({ teamId, contactBookId: bookId, contactId: 'ct_missing' }))).toBe('NOT_FOUND');
  });

  it('upsert creates then updates the same contact by email', async () => {
    const { teamId, bookId } = await newBook();
    const first = await contacts.call.upsertContact({ teamId, contactBookId: bookId, contact: { email: 'up@example.com', firstName: 'Up' } });
    expect(first.created).toBe(true);
    const second = await contacts.call.upsertContact({ teamId, contactBookId: bookId, contact: { email: 'UP@example.com', lastName: 'Date', subscribed: false } });
    expect(second.created).toBe(false);
    expect(second.contact).toMatchObject({ id: first.contact!.id, firstName: 'Up', lastName: 'Date', subscribed: false });
  });

  it('20 concurrent creates of one address: exactly one succeeds', async () => {
    const { teamId, bookId } = await newBook();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => code(contacts.call.createContact({ teamId, contactBookId: bookId, contact: { email: i % 2 ? 'race@example.com' : 'RACE@example.com' } }))));
    expect(results.filter((r) => r === 'OK')).toHaveLength(1);
    expect(results.filter((r) => r === 'ALREADY_EXISTS')).toHaveLength(19);
    expect((await contacts.call.listContacts({ teamId, contactBookId: bookId, page: 1, limit: 10, emails: [], ids: [] })).contacts).toHaveLength(1);
  });

  it('lists with paging and the emails and ids filters combined', async () => {
    const { teamId, bookId } = await newBook();
    const made = (await contacts.call.bulkUpsertContacts({ teamId, contactBookId: bookId, contacts: Array.from({ length: 7 }, (_, i) => ({ email: `l${i}@example.com` })) })).contactIds;
    const list = (q: Partial<contactsV1.ListContactsRequest>) =>
      contacts.call.listContacts({ teamId, contactBookId: bookId, page: 0, limit: 0, emails: [], ids: [], ...q }).then((r) => r.contacts.map((c) => c.id));
    const all = await list({});
    expect(all).toHaveLength(7);
    expect(new Set(all)).toEqual(new Set(made));
    expect([...(await list({ page: 1, limit: 3 })), ...(await list({ page: 2, limit: 3 })), ...(await list({ page: 3, limit: 3 }))]).toEqual(all);
    expect(await list({ emails: ['L1@example.com', 'l2@example.com', 'nobody@example.com'] })).toEqual(all.filter((_, i) => made.indexOf(all[i]!) === 1 || made.indexOf(all[i]!) === 2));
    expect(await list({ ids: [made[3]!, made[4]!] })).toHaveLength(2);
    expect(await list({ ids: [made[3]!, made[4]!], emails: ['l4@example.com'] })).toEqual([made[4]]);
    expect(await list({ emails: ['l1@example.com', 'l2@example.com'], limit: 1, page: 2 })).toHaveLength(1);
    expect(await code(list({ limit: 10_001 }))).toBe('INVALID_ARGUMENT');
    expect(await code(list({ page: -1 }))).toBe('INVALID_ARGUMENT');
  });

  it('a deleted address can be added again at once', async () => {
    const { teamId, bookId } = await newBook();
    const c = await addContact(teamId, bookId, 'again@example.com');
    await contacts.call.deleteContact({ teamId, contactBookId: bookId, contactId: c.id });
    expect(await code(contacts.call.getContact({ teamId, contactBookId: bookId, contactId: c.id }))).toBe('NOT_FOUND');
    expect(await code(contacts.call.deleteContact({ teamId, contactBookId: bookId, contactId: c.id }))).toBe('NOT_FOUND');
    const again = await addContact(teamId, bookId, 'again@example.com');
    expect(again.id).not.toBe(c.id);
  });
});

describe('events', () => {
  it('contact.created, contact.updated and contact.deleted carry the Contact object', async () => {
    const { teamId, bookId } = await newBook();
    const c = await addContact(teamId, bookId, 'ev@example.com', { firstName: 'Eve' });
    await contacts.call.updateContact({ teamId, contactBookId: bookId, contactId: c.id, properties: { values: { tier: 'gold' } } });
    await contacts.call.deleteContact({ teamId, contactBookId: bookId, contactId: c.id });
    const events = await waitFor('three contact events', () => {
      const e = eventsOf(teamId);
      return e.length >= 3 ? e : undefined;
    });
    expect(events.map((e) => e.type)).toEqual(['contact.created', 'contact.updated', 'contact.deleted']);
    const base = { id: c.id, email: 'ev@example.com', firstName: 'Eve', lastName: null, subscribed: true, contactBookId: bookId, createdAt: c.createdAt!.toISOString() };
    expect(events[0]!.data).toEqual({ ...base, properties: {}, updatedAt: c.createdAt!.toISOString() });
    expect(events[1]!.data).toMatchObject({ ...base, properties: { tier: 'gold' } });
    expect(events[2]!.data).toEqual(events[1]!.data);
    expect(Date.parse((events[1]!.data as { updatedAt: string }).updatedAt)).toBeGreaterThanOrEqual(c.createdAt!.getTime());
  });

  it('a patch to subscribed false publishes contact.unsubscribed (MANUAL) beside contact.updated', async () => {
    const { teamId, bookId } = await newBook();
    const c = await addContact(teamId, bookId, 'Opt@Example.com');
    await contacts.call.updateContact({ teamId, contactBookId: bookId, contactId: c.id, subscribed: false });
    const u = await waitFor('contact.unsubscribed', () => eventsOf(teamId, 'contact.unsubscribed')[0]);
    expect(u.data).toEqual({ contactId: c.id, contactBookId: bookId, email: 'opt@example.com', reason: 'MANUAL', source: null });
    expect(eventsOf(teamId, 'contact.updated')[0]?.data).toMatchObject({ id: c.id, subscribed: false });
  });
});

describe('bulk', () => {
  it('upserts 1000 contacts in one call, then updates with per-item errors', async () => {
    const { teamId, bookId } = await newBook();
    const items = Array.from({ length: 1000 }, (_, i) => ({ email: `bulk${i}@example.com`, firstName: `N${i}`, properties: { values: { n: String(i) } } }));
    const first = await contacts.call.bulkUpsertContacts({ teamId, contactBookId: bookId, contacts: items });
    expect(first).toMatchObject({ createdCount: 1000, updatedCount: 0, errors: [] });
    expect(new Set(first.contactIds).size).toBe(1000);
    expect((await contacts.call.getContactBook({ teamId, contactBookId: bookId })).details?.totalContacts).toBe(1000);

    const second = await contacts.call.bulkUpsertContacts({
      teamId, contactBookId: bookId,
      contacts: [{ email: 'BULK0@example.com', lastName: 'Zero' }, { email: 'broken' }, { email: 'new@example.com' }, { email: 'bulk0@example.com' }, { email: 'bulk5@example.com' }],
    });
    expect(second.createdCount).toBe(1);
    expect(second.updatedCount).toBe(2);
    expect(second.contactIds[0]).toBe(first.contactIds[0]);
    expect(second.contactIds[1]).toBe('');
    expect(second.errors.map((e) => [e.index, e.code])).toEqual([[1, 'INVALID_EMAIL'], [3, 'DUPLICATE_IN_BATCH']]);
    const zero = (await contacts.call.getContact({ teamId, contactBookId: bookId, contactId: first.contactIds[0]! })).contact;
    expect(zero).toMatchObject({ firstName: 'N0', lastName: 'Zero', properties: { n: '0' } });

    expect(await code(contacts.call.bulkUpsertContacts({ teamId, contactBookId: bookId, contacts: Array.from({ length: 1001 }, (_, i) => ({ email: `x${i}@example.com` })) }))).toBe('INVALID_ARGUMENT');
  });

  it('deletes up to 1000 by id, ignoring unknown and foreign ids', async () => {
    const { teamId, bookId } = await newBook();
    const other = await newBook(teamId, 'Other');
    const ids = (await contacts.call.bulkUpsertContacts({ teamId, contactBookId: bookId, contacts: Array.from({ length: 5 }, (_, i) => ({ email: `d${i}@example.com` })) })).contactIds;
    const foreign = await addContact(teamId, other.bookId, 'keep@example.com');
    const res = await contacts.call.bulkDeleteContacts({ teamId, contactBookId: bookId, contactIds: [ids[0]!, ids[1]!, ids[2]!, 'ct_unknown', foreign.id], emails: [] });
    expect(res.deletedCount).toBe(3);
    expect((await contacts.call.listContacts({ teamId, contactBookId: bookId, page: 1, limit: 10, emails: [], ids: [] })).contacts.map((c) => c.id).sort()).toEqual([ids[3], ids[4]].sort());
    expect((await contacts.call.getContact({ teamId, contactBookId: other.bookId, contactId: foreign.id })).contact?.id).toBe(foreign.id);
    expect(await code(contacts.call.bulkDeleteContacts({ teamId, contactBookId: bookId, contactIds: Array.from({ length: 1001 }, (_, i) => `ct_${i}`), emails: [] }))).toBe('INVALID_ARGUMENT');
  });
});

describe('unsubscribes', () => {
  it('UnsubscribeContact marks the contact once, with the campaign as source', async () => {
    const { teamId, bookId } = await newBook();
    const c = await addContact(teamId, bookId, 'link@example.com', { firstName: 'Lin' });
    const res = await contacts.call.unsubscribeContact({ teamId, contactId: c.id, reason: 'campaign link', campaignId: 'cmp_1', reasonCode: 0 });
    expect(res.contact).toMatchObject({ id: c.id, subscribed: false });
    const again = await contacts.call.unsubscribeContact({ teamId, contactId: c.id, reason: '', reasonCode: contactsV1.UnsubscribeReason.UNSUBSCRIBE_REASON_COMPLAINT });
    expect(again.contact).toEqual(res.contact);
    expect(await code(contacts.call.unsubscribeContact({ teamId: newId('team'), contactId: c.id, reason: '', reasonCode: 0 }))).toBe('NOT_FOUND');

    const u = await waitFor('contact.unsubscribed', () => eventsOf(teamId, 'contact.unsubscribed')[0]);
    expect(u.data).toEqual({ contactId: c.id, contactBookId: bookId, email: 'link@example.com', reason: 'UNSUBSCRIBE', source: 'cmp_1' });
    await new Promise((r) => setTimeout(r, 500));
    expect(eventsOf(teamId, 'contact.unsubscribed')).toHaveLength(1);

    const list = await contacts.call.listUnsubscribes({ teamId, page: 0, limit: 0 });
    expect(list.count).toBe(1);
    expect(list.unsubscribes[0]).toMatchObject({
      contactId: c.id, email: 'link@example.com', firstName: 'Lin', lastName: '', reason: 'campaign link', contactBookId: bookId,
      reasonCode: contactsV1.UnsubscribeReason.UNSUBSCRIBE_REASON_UNSUBSCRIBE, source: 'cmp_1',
    });

    // Re-subscribing is the team's choice, through an update.
    const back = await contacts.call.updateContact({ teamId, contactBookId: bookId, contactId: c.id, subscribed: true });
    expect(back.contact?.subscribed).toBe(true);
    expect((await contacts.call.listUnsubscribes({ teamId, page: 0, limit: 0 })).count).toBe(0);
  });

  it('UnsubscribeByEmail reaches every book of the team and no other team', async () => {
    const { teamId, bookId } = await newBook();
    const second = await newBook(teamId, 'Second');
    const foreign = await newBook();
    await addContact(teamId, bookId, 'all@example.com');
    await addContact(teamId, second.bookId, 'ALL@example.com');
    const theirs = await addContact(foreign.teamId, foreign.bookId, 'all@example.com');
    const res = await contacts.call.unsubscribeByEmail({ teamId, email: 'All@Example.com', reason: '', reasonCode: contactsV1.UnsubscribeReason.UNSUBSCRIBE_REASON_MANUAL, source: 'support ticket' });
    expect(res.unsubscribedCount).toBe(2);
    expect((await contacts.call.unsubscribeByEmail({ teamId, email: 'all@example.com', reason: 'again', reasonCode: 0 })).unsubscribedCount).toBe(0);
    expect((await contacts.call.getContact({ teamId: foreign.teamId, contactBookId: foreign.bookId, contactId: theirs.id })).contact?.subscribed).toBe(true);
    const totals = await contacts.call.getContactBook({ teamId, contactBookId: second.bookId });
    expect(totals.details?.unsubscribedContacts).toBe(1);
    const events = await waitFor('two contact.unsubscribed', () => {
      const e = eventsOf(teamId, 'contact.unsubscribed');
      return e.length >= 2 ? e : undefined;
    });
    expect(events.map((e) => e.data)).toEqual(expect.arrayContaining([expect.objectContaining({ contactBookId: second.bookId, reason: 'MANUAL', source: 'support ticket' })]));
    expect(await code(contacts.call.unsubscribeByEmail({ teamId, email: 'nope', reason: '', reasonCode: 0 }))).toBe('INVALID_ARGUMENT');
  });

  it('hard bounces and complaints from JetStream unsubscribe the recipients, once per event', async () => {
    const { teamId, bookId } = await newBook();
    const second = await newBook(teamId, 'Second');
    const foreign = await newBook();
    const hard = await addContact(teamId, bookId, 'hard@example.com');
    const hard2 = await addContact(teamId, second.bookId, 'hard@example.com');
    const soft = await addContact(teamId, bookId, 'soft@example.com');
    const spam = await addContact(teamId, bookId, 'spam@example.com');
    const theirs = await addContact(foreign.teamId, foreign.bookId, 'hard@example.com');
    const js = jetstream(nc);
    const publish = (e: EventEnvelope<unknown>) => js.publish(subjectFor(e.type), encodeEvent(e), { msgID: e.id });
    const base = { status: 'BOUNCED', from: 'news@brand.example', subject: 'Hi', occurredAt: new Date().toISOString() };
    const bounce = createEvent('email.bounced', teamId, { ...base, id: 'em_hard', to: ['Hard <hard@example.com>'], bounce: { type: 'Permanent', subType: 'NoEmail', message: '550' } });
    await publish(bounce);
    await publish(createEvent('email.bounced', teamId, { ...base, id: 'em_soft', to: ['soft@example.com'], bounce: { type: 'Transient', subType: 'MailboxFull', message: '452' } }));
    await publish(createEvent('email.complained', teamId, { ...base, status: 'COMPLAINED', id: 'em_spam', to: ['spam@example.com'] }));

    const get = (bid: string, id: string, t = teamId) => contacts.call.getContact({ teamId: t, contactBookId: bid, contactId: id }).then((r) => r.contact!);
    await waitFor('the hard bounce and the complaint to apply', async () => (!(await get(bookId, hard.id)).subscribed && !(await get(second.bookId, hard2.id)).subscribed && !(await get(bookId, spam.id)).subscribed) || undefined);
    expect((await get(bookId, soft.id)).subscribed).toBe(true);
    expect((await get(foreign.bookId, theirs.id, foreign.teamId)).subscribed).toBe(true);
    const reasons = await waitFor('three contact.unsubscribed', () => {
      const e = eventsOf(teamId, 'contact.unsubscribed');
      return e.length >= 3 ? e.map((x) => x.data) : undefined;
    });
    expect(reasons).toEqual(expect.arrayContaining([
      { contactId: hard.id, contactBookId: bookId, email: 'hard@example.com', reason: 'HARD_BOUNCE', source: 'em_hard' },
      { contactId: hard2.id, contactBookId: second.bookId, email: 'hard@example.com', reason: 'HARD_BOUNCE', source: 'em_hard' },
      { contactId: spam.id, contactBookId: bookId, email: 'spam@example.com', reason: 'COMPLAINT', source: 'em_spam' },
    ]));

    // The team re-subscribes the contact; a redelivery of the same event (same id, past the server's dedup) changes nothing.
    await contacts.call.updateContact({ teamId, contactBookId: bookId, contactId: hard.id, subscribed: true });
    await js.publish(subjectFor(bounce.type), encodeEvent(bounce), { msgID: `${bounce.id}-redelivery` });
    const marker = createEvent('email.complained', teamId, { ...base, id: 'em_marker', to: ['spam@example.com'] });
    await publish(marker);
    await waitFor('the marker event to be handled', async () => (await db.collection('processed_events').countDocuments({ _id: `contacts-unsubscribes:${marker.id}` as never })) === 1 || undefined);
    await new Promise((r) => setTimeout(r, 300));
    expect((await get(bookId, hard.id)).subscribed).toBe(true);
  });
});

describe('campaign paging', () => {
  it('pages through subscribed contacts in a stable order and reaches contacts added meanwhile', async () => {
    const { teamId, bookId } = await newBook();
    await contacts.call.bulkUpsertContacts({ teamId, contactBookId: bookId, contacts: Array.from({ length: 9 }, (_, i) => ({ email: `c${i}@example.com`, subscribed: i !== 4 })) });
    const page = (cursor?: string) => contacts.call.listBookContacts({ teamId, contactBookId: bookId, cursor, limit: 3 });
    const p1 = await page();
    expect(p1.contacts).toHaveLength(3);
    const p2 = await page(p1.nextCursor);
    await new Promise((r) => setTimeout(r, 5));
    const late = await addContact(teamId, bookId, 'late@example.com');
    const p3 = await page(p2.nextCursor);
    const all = [...p1.contacts, ...p2.contacts, ...p3.contacts];
    expect(new Set(all.map((c) => c.id)).size).toBe(9);
    expect(all.at(-1)?.id).toBe(late.id);
    expect(p3.nextCursor).toBeUndefined();
    expect(all.every((c) => c.subscribed && c.email !== 'c4@example.com')).toBe(true);
    // The order is stable: asking again from the same cursor gives the same page.
    expect((await page(p1.nextCursor)).contacts.map((c) => c.id)).toEqual(p2.contacts.map((c) => c.id));
    expect(await code(page('forged'))).toBe('INVALID_ARGUMENT');
    expect(await code(contacts.call.listBookContacts({ teamId, contactBookId: bookId, limit: 5001 }))).toBe('INVALID_ARGUMENT');
  });

  it('pages in id order, and a cursor in creation order (held by a campaign started before) still goes on in creation order', async () => {
    const { teamId, bookId } = await newBook();
    const made = [];
    for (const name of ['a', 'b', 'c', 'd']) made.push(await addContact(teamId, bookId, `${name}@example.com`));
    const ids = made.map((c) => c.id);
    expect([...ids].sort()).toEqual(ids);
    // Creation times the other way round (as contacts of an installation whose ids were random could have):
    // d is the oldest, a the newest.
    const base = Date.UTC(2026, 0, 1);
    for (const [i, c] of made.entries()) await db.collection('contacts').updateOne({ _id: c.id as never }, { $set: { createdAt: new Date(base + (4 - i) * 60_000) } });
    const page = (cursor?: string) => contacts.call.listBookContacts({ teamId, contactBookId: bookId, cursor, limit: 2 });
    const first = await page();
    expect(first.contacts.map((c) => c.id)).toEqual(ids.slice(0, 2));
    expect(decodeBookCursor(first.nextCursor!)).toEqual({ id: ids[1] });
    const second = await page(first.nextCursor);
    expect(second.contacts.map((c) => c.id)).toEqual(ids.slice(2));
    expect(second.nextCursor).toBeUndefined();
    // After d in creation order come c, b, then a; the next cursor keeps that order.
    const legacy = await page(encodeBookCursor({ createdAt: new Date(base + 60_000), id: ids[3]! }));
    expect(legacy.contacts.map((c) => c.id)).toEqual([ids[2], ids[1]]);
    expect(decodeBookCursor(legacy.nextCursor!)).toEqual({ createdAt: new Date(base + 3 * 60_000), id: ids[1] });
    expect((await page(legacy.nextCursor)).contacts.map((c) => c.id)).toEqual([ids[0]]);
  });
});
