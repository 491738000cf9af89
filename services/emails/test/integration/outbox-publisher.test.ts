import { randomBytes } from 'node:crypto';
import {
  connectMongo, connectNats, createDurableConsumer, createEvent, createLogger, ensureEventStream, outboxEntries, type DurableConsumer,
  type MongoHandle, type NatsHandle,
} from '@mailfleet/kit';
import { isolatedNats, stopNats, testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import type { Collection, Document } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOutboxPublisher } from '../../src/events/outbox-publisher.js';
import { createEmailsRepository, type EmailsRepositoryHooks, type NewEmail } from '../../src/repositories/emails.repository.js';

// The emails outbox's fast path on FerretDB and NATS: what a write hands over is published as handed
// (no read), what is only named is read by id, and published entries leave the email.
const logger = createLogger({ service: 'emails-publisher-test', level: 'silent' });
const dbName = uniqueDbName('emails_publisher');
let natsInstance: string;
let mongo: MongoHandle;
let nats: NatsHandle;
let emails: Collection<Document>;
let consumer: DurableConsumer;
const received: string[] = [];
const group = `pub${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  const n = await isolatedNats();
  natsInstance = n.instance;
  mongo = await connectMongo({ url: testMongoUrl(), dbName, appName: 'emails-publisher-test' });
  nats = await connectNats({ url: n.url, name: 'emails-publisher-test', logger });
  await ensureEventStream(nats.jsm);
  emails = mongo.db.collection('emails');
  consumer = createDurableConsumer({
    nats, logger, durable: `${group}-reader`, filterSubjects: [`mailfleet.${group}.>`],
    handler: async (event) => {
      received.push(event.id);
    },
  });
  await consumer.start();
});

afterAll(async () => {
  await consumer?.stop();
  await nats?.drain();
  await mongo?.db.dropDatabase();
  await mongo?.close();
  await stopNats({ instance: natsInstance }).catch(() => undefined);
});

const entriesOf = (n: number) => outboxEntries(Array.from({ length: n }, (_, i) => createEvent(`${group}.happened`, 'team_p', { i })));

describe('the emails outbox publisher', () => {
  it('publishes a handed-over outbox without reading it, a named email by reading it, then removes what it published', async () => {
    const publisher = createOutboxPublisher({ collection: emails, nats, logger, delayMs: 20, removeAfterMs: 200 });
    publisher.start();
    try {
      // Written with two events; the write hands its outbox over.
      const written = entriesOf(2);
      await emails.insertOne({ _id: 'em_written' as never, outbox: written });
      // Only named: read back by id.
      const named = entriesOf(1);
      await emails.insertOne({ _id: 'em_named' as never, outbox: named });
      // Handed over but not in the database: nothing reads it, so it is published all the same.
      const handedOnly = entriesOf(1);

      publisher.hintWritten('em_written', written);
      publisher.hint(['em_named']);
      publisher.hintWritten('em_absent', handedOnly);
      const all = [...written, ...named, ...handedOnly].map((e) => e.id);
      await expect.poll(() => [...received].sort(), { timeout: 10_000 }).toEqual([...all].sort());
      expect(all.every((id) => publisher.isPublished(id))).toBe(true);

      // Published entries leave the emails (no later write of theirs came to take them along).
      await expect.poll(async () => (await emails.find({ 'outbox.0': { $exists: true } }).toArray()).length, { timeout: 10_000 }).toBe(0);
    } finally {
      await publisher.stop();
    }
  });

  it('an insert hands over the outbox of each email it wrote; an email that existed already is only named', async () => {
    const written: string[] = [];
    const named: string[] = [];
    const repo = createEmailsRepository(mongo.db, {
      onWritten: (id, outbox) => {
        expect(outbox.length).toBeGreaterThan(0);
        written.push(id);
      },
      onEvents: (ids) => named.push(...ids),
    });
    await repo.ensureIndexes();
    const email = (id: string): NewEmail => ({
      id, teamId: 'team_p', domainId: 'dom_p', from: 'a@p.example', fromAddress: 'a@p.example', to: ['b@q.example'], toAddresses: ['b@q.example'],
      cc: [], bcc: [], replyTo: [], subject: 'hello', text: 'hi', headers: [], attachments: [], messageId: `<${id}@p.example>`, references: [],
      pending: ['b@q.example'], suppressed: [], events: [{ status: 'QUEUED' }], createdAt: new Date(),
    });
    await repo.insertMany([email('em_ins1'), email('em_ins2')]);
    expect(written).toEqual(['em_ins1', 'em_ins2']);
    // A retried accept: the first two exist (their stored outbox is read and published), the third is new.
    await repo.insertMany([email('em_ins1'), email('em_ins2'), email('em_ins3')]);
    expect(written).toEqual(['em_ins1', 'em_ins2', 'em_ins3']);
    expect(named).toEqual(['em_ins1', 'em_ins2']);
  });

  it('after a write took the published entries along, what it left is removed in its turn', async () => {
    // Wired as the service wires them: a write drops what the publisher published and tells it so.
    const hooks: EmailsRepositoryHooks = {};
    const repo = createEmailsRepository(mongo.db, hooks);
    const publisher = createOutboxPublisher({ collection: emails, nats, logger, delayMs: 20, removeAfterMs: 200 });
    hooks.onWritten = (id, outbox) => publisher.hintWritten(id, outbox);
    hooks.onEvents = (ids) => publisher.hint(ids);
    hooks.isPublished = (eventId) => publisher.isPublished(eventId);
    hooks.onDropped = (id, entryIds) => publisher.dropped(id, entryIds);
    publisher.start();
    const outboxOf = async (id: string) => ((await emails.findOne({ _id: id as never }))?.['outbox'] ?? []) as { id: string; subject: string }[];
    try {
      await repo.insertMany([{
        id: 'em_drop', teamId: 'team_p', domainId: 'dom_p', from: 'a@p.example', fromAddress: 'a@p.example', to: ['b@q.example'],
        toAddresses: ['b@q.example'], cc: [], bcc: [], replyTo: [], subject: 'hello', text: 'hi', headers: [], attachments: [],
        messageId: '<em_drop@p.example>', references: [], pending: ['b@q.example'], suppressed: [], events: [{ status: 'QUEUED' }], createdAt: new Date(),
      }]);
      const [queued] = await outboxOf('em_drop');
      expect(queued?.subject).toBe('mailfleet.email.queued');
      await expect.poll(() => publisher.isPublished(queued!.id), { timeout: 10_000 }).toBe(true);

      // The next change takes the published `email.queued` along and adds `email.sent`.
      const sent = await repo.mutate('em_drop', () => ({ events: [{ status: 'SENT' }] }));
      expect(sent?.applied).toBe(true);
      const left = await outboxOf('em_drop');
      expect(left.map((e) => e.subject)).toEqual(['mailfleet.email.sent']);
      await expect.poll(() => publisher.isPublished(left[0]!.id), { timeout: 10_000 }).toBe(true);

      // No later write comes for it: the publisher's own removal takes `email.sent` out.
      await expect.poll(async () => (await outboxOf('em_drop')).length, { timeout: 10_000 }).toBe(0);
    } finally {
      await publisher.stop();
    }
  });
});
