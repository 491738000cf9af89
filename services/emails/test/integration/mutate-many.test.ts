import { connectMongo, outboxEventType, type MongoHandle } from '@mailfleet/kit';
import { testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRecentEmails } from '../../src/repositories/recent-emails.js';
import { createEmailsRepository, type EmailRecord, type EmailsRepository, type Mutation, type NewEmail } from '../../src/repositories/emails.repository.js';

// The bulk compare-and-set on FerretDB: every statement of the bulk is still conditioned on its email's
// version; the ones that lost to another writer are told apart by what they wrote and computed again.
let mongo: MongoHandle;
let repo: EmailsRepository;

beforeAll(async () => {
  mongo = await connectMongo({ url: testMongoUrl(), dbName: uniqueDbName('emails_mutate_many'), appName: 'emails-mutate-many-test' });
  repo = createEmailsRepository(mongo.db);
  await repo.ensureIndexes();
});
afterAll(async () => {
  await mongo?.close();
});

let seq = 0;
function email(): NewEmail {
  const id = `em_mm${seq++}_${Date.now().toString(36)}`;
  return {
    id, teamId: 'team_mm', domainId: 'dom_mm', from: 'a@mm.example', fromAddress: 'a@mm.example', to: ['b@q.example'], toAddresses: ['b@q.example'],
    cc: [], bcc: [], replyTo: [], subject: 'hello', text: 'hi', headers: [], attachments: [], messageId: `<${id}@mm.example>`, references: [],
    pending: ['b@q.example'], suppressed: [], events: [{ status: 'QUEUED' }], createdAt: new Date(),
  };
}

/** Marks the email sent, unless it is sent already (the outcome's own guard). */
const send = (x: EmailRecord): Mutation | null => (x.recipients.pending.length === 0 ? null : {
  set: { sendState: 'DONE', 'recipients.pending': [], 'recipients.accepted': [...x.recipients.accepted, ...x.recipients.pending] },
  events: [{ status: 'SENT' }],
});
const deliveredReport = (key: string) => (x: EmailRecord): Mutation | null => (x.reportKeys.includes(key) ? null : {
  events: [{ status: 'DELIVERED', extras: { to: ['b@q.example'] } }], addReportKey: key,
});

describe('mutateMany', () => {
  it('writes every change in one bulk, each conditioned on its version', async () => {
    const docs = [email(), email(), email()];
    await repo.insertMany(docs);
    const initial = await repo.getManyById(docs.map((d) => d.id));
    expect(initial).toHaveLength(3);
    const res = await repo.mutateMany(initial.map((e) => ({ initial: e, fn: send })));
    expect(res.map((r) => r?.applied)).toEqual([true, true, true]);
    const after = await repo.getManyById(docs.map((d) => d.id));
    for (const e of after) {
      expect(e.version).toBe(2);
      expect(e.events.map((ev) => ev.status)).toEqual(['QUEUED', 'SENT']);
      expect(e.outbox.map(outboxEventType)).toEqual(['email.queued', 'email.sent']);
    }
  });

  it('the record it returns is the one stored, and the record it started from is left as it was', async () => {
    const doc = email();
    await repo.insertMany([doc]);
    const [initial] = await repo.getManyById([doc.id]);
    const before = structuredClone(initial!);
    const [res] = await repo.mutateMany([{ initial: initial!, fn: send }]);
    expect(initial).toEqual(before);
    const [stored] = await repo.getManyById([doc.id]);
    expect(res!.record).toEqual(stored);
    expect(res!.record.recipients.accepted).toEqual(['b@q.example']);
    expect(initial!.recipients.accepted).toEqual([]);
  });

  it('a statement that lost to another writer is computed again from the state it lost to, and applied once', async () => {
    const docs = [email(), email()];
    await repo.insertMany(docs);
    const stale = await repo.getManyById(docs.map((d) => d.id));
    // Another writer (a delivery report) changes the first email after the worker read it.
    const first = stale.find((e) => e.id === docs[0]!.id)!;
    expect((await repo.mutate(first.id, deliveredReport('r1')))?.applied).toBe(true);

    const res = await repo.mutateMany(stale.map((e) => ({ initial: e, fn: send })));
    expect(res.map((r) => r?.applied)).toEqual(stale.map(() => true));
    const after = new Map((await repo.getManyById(docs.map((d) => d.id))).map((e) => [e.id, e]));
    // The report's change is kept and the send is recorded on top of it, once.
    expect(after.get(first.id)!.events.map((ev) => ev.status)).toEqual(['QUEUED', 'DELIVERED', 'SENT']);
    expect(after.get(first.id)!.version).toBe(3);
    expect(after.get(docs[1]!.id)!.events.map((ev) => ev.status)).toEqual(['QUEUED', 'SENT']);
  });

  it('two changes of one email in one bulk: both land, one after the other', async () => {
    const doc = email();
    await repo.insertMany([doc]);
    const [e] = await repo.getManyById([doc.id]);
    const res = await repo.mutateMany([{ initial: e!, fn: deliveredReport('a') }, { initial: e!, fn: deliveredReport('b') }]);
    expect(res.map((r) => r?.applied)).toEqual([true, true]);
    const [after] = await repo.getManyById([doc.id]);
    expect([...after!.reportKeys].sort()).toEqual(['a', 'b']);
    expect(after!.events.filter((ev) => ev.status === 'DELIVERED')).toHaveLength(2);
  });

  it('a change already written (its reply lost, then retried) is recognised and not written twice', async () => {
    const doc = email();
    await repo.insertMany([doc]);
    const [e] = await repo.getManyById([doc.id]);
    // The first write landed; the retry starts again from the state before it.
    expect((await repo.mutateMany([{ initial: e!, fn: deliveredReport('k') }]))[0]?.applied).toBe(true);
    const retry = await repo.mutateMany([{ initial: e!, fn: deliveredReport('k') }]);
    expect(retry[0]?.applied).toBe(false);
    const [after] = await repo.getManyById([doc.id]);
    expect(after!.reportKeys).toEqual(['k']);
    expect(after!.version).toBe(2);
  });

  it('an email that is gone is undefined', async () => {
    const doc = email();
    await repo.insertMany([doc]);
    const [e] = await repo.getManyById([doc.id]);
    await mongo.db.collection('emails').deleteOne({ _id: doc.id } as never);
    expect(await repo.mutateMany([{ initial: e!, fn: send }])).toEqual([undefined]);
  });
});

describe('stored events', () => {
  it('are written as one JSON string each, and events stored as objects before are still read', async () => {
    const e = email();
    await repo.insertMany([e]);
    const [first] = await repo.getManyById([e.id]);
    await repo.mutateMany([{ initial: first!, fn: send }]);
    const raw = await mongo.db.collection('emails').findOne({ _id: e.id as never });
    expect((raw!.events as unknown[]).every((x) => typeof x === 'string')).toBe(true);
    const read = await repo.get('team_mm', e.id);
    expect(read!.events.map((x) => x.status)).toEqual(['QUEUED', 'SENT']);
    expect(read!.events[1]!.createdAt).toBeInstanceOf(Date);

    // The form before: an object per event.
    const legacyAt = new Date('2026-01-02T03:04:05.678Z');
    await mongo.db.collection('emails').updateOne({ _id: e.id as never }, { $set: { events: [{ id: 'evt_old', status: 'QUEUED', data: { note: 'x' }, createdAt: legacyAt }] } });
    const legacy = await repo.get('team_mm', e.id);
    expect(legacy!.events).toEqual([{ id: 'evt_old', status: 'QUEUED', data: { note: 'x' }, createdAt: legacyAt }]);
    // A change on top keeps the old event and adds the new one in the compact form.
    await repo.mutate(e.id, () => ({ events: [{ status: 'DELIVERED', extras: { to: ['b@q.example'] } }], addReportKey: 'k-legacy' }), { now: () => new Date() });
    const mixed = await repo.get('team_mm', e.id);
    expect(mixed!.events.map((x) => x.status)).toEqual(['QUEUED', 'DELIVERED']);
    expect(mixed!.events[1]!.data).toEqual({ to: ['b@q.example'] });
  });
});

describe('insertMany beside the caller\'s own write', () => {
  it('writes the contents while the caller\'s write is under way, and the emails only after it', async () => {
    const doc = email();
    let release!: () => void;
    const after = new Promise<void>((resolve) => { release = resolve; });
    const done = repo.insertMany([doc], { after });
    const contents = mongo.db.collection('email_contents');
    for (let i = 0; i < 200 && !(await contents.findOne({ _id: doc.id } as never)); i++) await new Promise((r) => setTimeout(r, 10));
    expect(await contents.findOne({ _id: doc.id } as never)).not.toBeNull();
    expect(await repo.getById(doc.id)).toBeUndefined();
    release();
    await done;
    expect((await repo.getById(doc.id))?.latestStatus).toBe('QUEUED');
  });

  it('writes no email when the caller\'s write fails', async () => {
    const doc = email();
    await expect(repo.insertMany([doc], { after: Promise.reject(new Error('queue down')) })).rejects.toThrow('queue down');
    expect(await repo.getById(doc.id)).toBeUndefined();
  });
});

describe('what the repository keeps of its writes', () => {
  it('keeps an email\'s record while it waits to be sent or for its report, and lets it go once delivered', async () => {
    const recent = createRecentEmails();
    const kept = createEmailsRepository(mongo.db, {}, recent);
    const doc = email();
    await kept.insertMany([doc]);
    expect(recent.get(doc.id)?.latestStatus).toBe('QUEUED');
    const [initial] = await kept.getManyById([doc.id]);
    await kept.mutateMany([{ initial: initial!, fn: send }]);
    expect(recent.get(doc.id)?.latestStatus).toBe('SENT');
    expect((await kept.mutate(doc.id, deliveredReport('kept-r1')))?.applied).toBe(true);
    expect(recent.get(doc.id)).toBeUndefined();
    // The next write reads the email: a second report of the same key changes nothing.
    expect((await kept.mutate(doc.id, deliveredReport('kept-r1')))?.applied).toBe(false);
    const [stored] = await kept.getManyById([doc.id]);
    expect(stored!.events.map((ev) => ev.status)).toEqual(['QUEUED', 'SENT', 'DELIVERED']);
  });
});
