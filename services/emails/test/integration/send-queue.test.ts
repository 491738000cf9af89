import { connectMongo, type MongoHandle } from '@mailfleet/kit';
import { testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import type { CommandStartedEvent } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEmailsRepository, type EmailsRepository, type NewEmail } from '../../src/repositories/emails.repository.js';
import { createSendQueueRepository, type SendQueueRepository } from '../../src/repositories/send-queue.repository.js';

// The send worker sends from what its own accept wrote, without reading the email, only when the queue entry
// proves that nothing changed the email since: these are the cases that must make it read the truth instead.
let mongo: MongoHandle;
let queue: SendQueueRepository;
let emails: EmailsRepository;
const commands: CommandStartedEvent[] = [];

beforeAll(async () => {
  const url = new URL(testMongoUrl());
  url.searchParams.set('monitorCommands', 'true');
  mongo = await connectMongo({ url: url.toString(), dbName: uniqueDbName('emails_send_queue'), appName: 'emails-send-queue-test' });
  mongo.client.on('commandStarted', (e: CommandStartedEvent) => commands.push(e));
  queue = createSendQueueRepository(mongo.db);
  emails = createEmailsRepository(mongo.db);
  await Promise.all([queue.ensureIndexes(), emails.ensureIndexes()]);
});
afterAll(async () => {
  await mongo?.close();
});

let seq = 0;
const newId = () => `em_sq${seq++}_${Date.now().toString(36)}`;
const past = () => new Date(Date.now() - 1_000);

async function claimOne(id: string, owner = 'w1', leaseMs = 60_000) {
  const got = await queue.claimMany(owner, new Date(), leaseMs, 500);
  return got.find((e) => e.emailId === id);
}

describe('send queue: untouched entries', () => {
  it('the first claim of a fresh entry is untouched', async () => {
    const id = newId();
    await queue.enqueue([{ emailId: id, due: past() }], past());
    const entry = await claimOne(id);
    expect(entry).toMatchObject({ attempt: 1, untouched: true });
    await queue.remove(id);
  });

  it('a claim given back (uncounted), a change lock, or an earlier attempt make the entry touched', async () => {
    const given = newId();
    const locked = newId();
    const retried = newId();
    // Given back without counting the attempt: back at 0 attempts, but a worker may have changed the email.
    await queue.enqueue([{ emailId: given, due: past() }], past());
    expect(await claimOne(given)).toMatchObject({ untouched: true });
    await queue.reschedule(given, past(), { uncount: true });
    expect(await claimOne(given)).toMatchObject({ attempt: 1, untouched: false });
    // A cancel or reschedule took it (the change's lock), then let it go.
    await queue.enqueue([{ emailId: locked, due: past() }], past());
    expect(await queue.lockForChange(locked, new Date(), 1)).toBe('locked');
    await new Promise((r) => setTimeout(r, 20));
    expect(await claimOne(locked)).toMatchObject({ attempt: 1, untouched: false });
    // A worker claimed it and died: the next claim is a second attempt.
    await queue.enqueue([{ emailId: retried, due: past() }], past());
    expect(await claimOne(retried, 'w1', 1)).toMatchObject({ untouched: true });
    await new Promise((r) => setTimeout(r, 20));
    expect(await claimOne(retried, 'w2')).toMatchObject({ attempt: 2, untouched: false, previousOwner: 'w1' });
    await queue.removeMany([given, locked, retried]);
  });

  it('a claim, a lease extension and a removal of many entries are one statement each, by _id $in (read through the primary key on the embedded FerretDB too)', async () => {
    const ids = Array.from({ length: 30 }, newId);
    await queue.enqueue(ids.map((emailId) => ({ emailId, due: past() })), past());
    commands.length = 0;
    const claimed = (await queue.claimMany('w3', new Date(), 60_000, 500)).filter((e) => ids.includes(e.emailId));
    expect(claimed).toHaveLength(30);
    await queue.extendLeases(claimed[0]!.claimId, ids, new Date(Date.now() + 120_000));
    await queue.removeMany(ids);
    const writes = commands.filter((c) => ['update', 'delete'].includes(c.commandName));
    expect(writes.map((c) => c.commandName)).toEqual(['update', 'update', 'delete']);
    for (const c of writes) {
      const statements = (c.command['updates'] ?? c.command['deletes']) as { q: { _id?: { $in?: string[] } } }[];
      expect(statements, c.commandName).toHaveLength(1);
      expect(statements[0]!.q._id?.$in, c.commandName).toEqual(expect.arrayContaining(ids));
    }
    expect(await mongo.db.collection('send_queue').countDocuments({ _id: { $in: ids } } as never)).toBe(0);
  });
});

describe('emails: what this process wrote, without reading it back', () => {
  function newEmail(id: string): NewEmail {
    return {
      id, teamId: 'team_sq', domainId: 'dom_sq', from: 'a@sq.example', fromAddress: 'a@sq.example', to: ['b@q.example'], toAddresses: ['b@q.example'],
      cc: [], bcc: [], replyTo: [], subject: 'hello', html: '<p>hi</p>', text: 'hi', headers: [['X-Tag', 'v']], attachments: [], messageId: `<${id}@sq.example>`,
      references: [], pending: ['b@q.example'], suppressed: [], events: [{ status: 'QUEUED' }], createdAt: new Date(),
    };
  }

  it('an accepted email and its content come from memory once; later writes are followed; reads only for the others', async () => {
    const id = newId();
    await emails.insertMany([newEmail(id)]);
    commands.length = 0;
    const first = await emails.takeAccepted([id, 'em_unknown']);
    expect(first.get(id)?.record).toMatchObject({ id, version: 1, sendState: 'PENDING' });
    expect(first.get(id)?.content).toEqual({ html: '<p>hi</p>', text: 'hi', headers: [['X-Tag', 'v']] });
    expect(first.has('em_unknown')).toBe(false);
    // The content is handed out once (a retry reads it).
    expect((await emails.takeAccepted([id])).get(id)?.content).toBeUndefined();
    const [res] = await emails.mutateMany([{ initial: first.get(id)!.record, fn: () => ({ set: { sendState: 'DONE', 'recipients.pending': [] }, events: [{ status: 'SENT' }] }) }]);
    expect(res?.applied).toBe(true);
    // A delivery report's read starts from that write, without a read.
    const [known] = await emails.getManyById([id], { recent: true });
    expect(known).toMatchObject({ version: 2, sendState: 'DONE' });
    expect(commands.filter((c) => c.commandName === 'find')).toHaveLength(0);
    // Without `recent`, the truth is read.
    expect((await emails.getManyById([id]))[0]).toMatchObject({ version: 2, sendState: 'DONE' });
    expect(commands.filter((c) => c.commandName === 'find').length).toBeGreaterThan(0);
  });

  it('a stale remembered record only loses its compare-and-set and is computed again from a read', async () => {
    const id = newId();
    await emails.insertMany([newEmail(id)]);
    // Another process (a second repository) changes the email meanwhile.
    const other = createEmailsRepository(mongo.db);
    await other.mutate(id, () => ({ set: { sendState: 'DONE', 'recipients.pending': [] }, events: [{ status: 'CANCELLED' }] }));
    const [stale] = await emails.getManyById([id], { recent: true });
    expect(stale?.version).toBe(1);
    const [res] = await emails.mutateMany([{ initial: stale!, fn: (x) => (x.sendState === 'DONE' ? null : { set: { sendState: 'DONE' }, events: [{ status: 'SENT' }] }) }]);
    expect(res).toMatchObject({ applied: false, record: { version: 2, sendState: 'DONE', latestStatus: 'CANCELLED' } });
  });
});
