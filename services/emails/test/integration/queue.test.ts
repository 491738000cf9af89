import { status, type ServiceError } from '@grpc/grpc-js';
import { createSinkReader } from '@mailfleet/deploy';
import { type emailsV1 } from '@mailfleet/proto';
import { testMongoUrl } from '@mailfleet/testkit';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startHarness, statusName, type EmailsReplica, type Harness } from './harness.js';
import { decodeStoredEvent } from '../../src/repositories/emails.repository.js';

let h: Harness;
let second: EmailsReplica;
let sender: { teamId: string; domainId: string; domain: string };
let mongo: MongoClient;

beforeAll(async () => {
  h = await startHarness();
  second = await h.startReplica();
  sender = await h.newSender();
  mongo = new MongoClient(testMongoUrl());
});
afterAll(async () => {
  await mongo?.close();
  await h?.close();
});

const code = (p: Promise<unknown>) => p.then(() => 'OK', (e: ServiceError) => status[e.code]);
const details = (p: Promise<unknown>) => p.then(() => '', (e: ServiceError) => e.details);
let n = 0;
const uniq = (local: string) => `${local}+${Date.now().toString(36)}${n++}@inbox.example.org`;

function email(over: Partial<emailsV1.OutgoingEmail> = {}): emailsV1.OutgoingEmail {
  return { to: [uniq('q')], from: `shop@${sender.domain}`, subject: 'Queue', text: 'x', replyTo: [], cc: [], bcc: [], headers: {}, attachments: [], ...over };
}

async function sinkCount(address: string): Promise<number> {
  return (await h.mail()).filter((m) => m.envelope.rcptTo.includes(address)).length;
}

describe('idempotency', () => {
  it('20 parallel identical requests on two replicas: one email, the same id for every 200, 409 for the rest', async () => {
    const to = uniq('idem');
    const req = { teamId: sender.teamId, email: email({ to: [to] }), idempotencyKey: `key-${to}` };
    const clients = [h.emails, second.client];
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => clients[i % 2]!.call.sendEmail(req)));
    const ok = results.filter((r): r is PromiseFulfilledResult<emailsV1.SendEmailResponse> => r.status === 'fulfilled').map((r) => r.value);
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => status[(r.reason as ServiceError).code]);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    expect(new Set(ok.map((r) => r.emailId)).size).toBe(1);
    expect(ok.filter((r) => !r.replayed)).toHaveLength(1);
    expect(refused.every((c) => c === 'ABORTED')).toBe(true);
    const emailId = ok[0]!.emailId;

    // Afterwards every repeat is a replay of that id, on either replica.
    expect(await second.client.call.sendEmail(req)).toEqual({ emailId, replayed: true });
    expect(await h.emails.call.sendEmail(req)).toEqual({ emailId, replayed: true });
    await h.waitForStatus(sender.teamId, emailId, ['SENT', 'DELIVERED']);
    await new Promise((r) => setTimeout(r, 300));
    expect(await sinkCount(to)).toBe(1);
    const count = await mongo.db(h.emailsDb).collection('emails').countDocuments({ teamId: sender.teamId, toAddresses: to });
    expect(count).toBe(1);

    // Another body with the key: NOT_UNIQUE.
    const other = h.emails.call.sendEmail({ ...req, email: email({ to: [to], subject: 'Different' }) });
    expect(await code(other)).toBe('ALREADY_EXISTS');
    expect(await details(h.emails.call.sendEmail({ ...req, email: email({ to: [to], subject: 'Different' }) }))).toContain('different request body');
  });

  it('keys are per team, per kind of request, and freed when the request failed', async () => {
    const key = `shared-${Date.now()}`;
    const bad = await code(h.emails.call.sendEmail({ teamId: sender.teamId, email: email({ from: 'x@nowhere.example' }), idempotencyKey: key }));
    expect(bad).toBe('INVALID_ARGUMENT');
    const first = await h.emails.call.sendEmail({ teamId: sender.teamId, email: email(), idempotencyKey: key });
    expect(first.replayed).toBe(false);
    const other = await h.newSender();
    const theirs = await h.emails.call.sendEmail({ teamId: other.teamId, email: email({ from: `a@${other.domain}` }), idempotencyKey: key });
    expect(theirs.emailId).not.toBe(first.emailId);
    const batchKey = `batch-${Date.now()}`;
    const batch = { teamId: sender.teamId, emails: [email(), email()], idempotencyKey: batchKey };
    const b1 = await h.emails.call.sendBatch(batch);
    expect(await h.emails.call.sendBatch(batch)).toEqual({ emailIds: b1.emailIds, replayed: true });
    expect(await code(h.emails.call.sendBatch({ ...batch, emails: [email()] }))).toBe('ALREADY_EXISTS');
    expect(await code(h.emails.call.sendEmail({ teamId: sender.teamId, email: email(), idempotencyKey: 'k'.repeat(257) }))).toBe('INVALID_ARGUMENT');
  });

  it('expired entries free the key; a claim left PROCESSING by a crashed request is taken over with its ids', async () => {
    const key = `stale-${Date.now()}`;
    const req = { teamId: sender.teamId, email: email(), idempotencyKey: key };
    const first = await h.emails.call.sendEmail(req);
    const col = mongo.db(h.emailsDb).collection('idempotency_keys');
    await col.updateOne({ teamId: sender.teamId, 'emailIds.0': first.emailId }, { $set: { expiresAt: new Date(Date.now() - 1000) } });
    const fresh = await h.emails.call.sendEmail(req);
    expect(fresh.replayed).toBe(false);
    expect(fresh.emailId).not.toBe(first.emailId);

    // A request that died after deciding its ids: the takeover inserts exactly those.
    const crashedKey = `crashed-${Date.now()}`;
    const probe = await h.emails.call.sendEmail({ ...req, idempotencyKey: crashedKey });
    await col.updateOne({ 'emailIds.0': probe.emailId }, { $set: { state: 'PROCESSING', claimedAt: new Date(Date.now() - 3_600_000), owner: 'dead' } });
    const taken = await h.emails.call.sendEmail({ ...req, idempotencyKey: crashedKey });
    expect(taken).toEqual({ emailId: probe.emailId, replayed: false });
    expect(await mongo.db(h.emailsDb).collection('emails').countDocuments({ _id: probe.emailId } as never)).toBe(1);
  });
});

describe('the send queue', () => {
  it('two replicas send 120 emails, each exactly once', { timeout: 180_000 }, async () => {
    const tos = Array.from({ length: 120 }, () => uniq('bulk'));
    const ids: string[] = [];
    for (let i = 0; i < tos.length; i += 40) {
      const batch = await (i % 80 === 0 ? h.emails : second.client).call.sendBatch({ teamId: sender.teamId, emails: tos.slice(i, i + 40).map((to) => email({ to: [to] })) });
      ids.push(...batch.emailIds);
    }
    // Cheap polling (the sink's envelopes only, read incrementally); the full check follows.
    const reader = createSinkReader(h.sink.dir, { withRaw: false });
    const got = new Set<string>();
    const received = async () => {
      for (const m of await reader.read()) for (const r of m.rcptTo) got.add(r);
      return got;
    };
    await eventually(async () => {
      const got = await received();
      return tos.every((t) => got.has(t));
    }, 120_000, 'all 120 in the sink');
    await new Promise((r) => setTimeout(r, 500));
    const mail = await h.mail();
    for (const to of tos) expect(mail.filter((m) => m.envelope.rcptTo.includes(to)), to).toHaveLength(1);
    // The records follow the relay's answers within moments; then each shows one SENT.
    const statuses = (d: unknown) => (d as { events: Parameters<typeof decodeStoredEvent>[0][] }).events.map((e) => decodeStoredEvent(e).status);
    const sentCount = (d: unknown) => statuses(d).filter((s) => s === 'SENT').length;
    const docs = await eventually(async () => {
      const all = await mongo.db(h.emailsDb).collection('emails').find({ _id: { $in: ids } } as never).toArray();
      return all.length === ids.length && all.every((d) => sentCount(d) >= 1) && all;
    }, 60_000, 'every email recorded as sent');
    // Recorded as sent once each, whatever the attempts (a slow relay may time an attempt out and retry it).
    const sentTwice = docs.filter((d) => sentCount(d) !== 1);
    expect(sentTwice.map((d) => [d._id, statuses(d).join(',')])).toEqual([]);
    // And nothing is left in the queue for them.
    await eventually(async () => (await mongo.db(h.emailsDb).collection('send_queue').countDocuments({ _id: { $in: ids } } as never)) === 0, 30_000, 'queue entries removed');
  });

  it('an email claimed by a worker that died is sent once its lease expires', async () => {
    const to = uniq('lease');
    // Schedule it far ahead so no worker takes it, then make it look claimed by a dead worker.
    const { emailId } = await h.emails.call.sendEmail({ teamId: sender.teamId, email: email({ to: [to], scheduledAt: new Date(Date.now() + 3_600_000) }) });
    await mongo.db(h.emailsDb).collection('emails').updateOne({ _id: emailId } as never, { $set: { nextAttemptAt: new Date() }, $inc: { version: 1 } });
    await mongo.db(h.emailsDb).collection('send_queue').updateOne({ _id: emailId } as never, {
      $set: { due: new Date(), leaseOwner: 'dead-worker', leaseUntil: new Date(Date.now() + 5_000) }, $inc: { attempts: 1 },
    });
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await sinkCount(to)).toBe(0);
    await h.waitForStatus(sender.teamId, emailId, ['SENT', 'DELIVERED'], 25_000);
    expect(await sinkCount(to)).toBe(1);
  });

  it('a delivery report for an email whose sender died proves delivery: no second send', async () => {
    const to = uniq('proof');
    const { emailId } = await h.emails.call.sendEmail({ teamId: sender.teamId, email: email({ to: [to], scheduledAt: new Date(Date.now() + 3_600_000) }) });
    const col = mongo.db(h.emailsDb).collection('emails');
    // As if a worker handed it to the relay and died before writing SENT: the message is at the relay, the email still PENDING and leased.
    await col.updateOne({ _id: emailId } as never, { $set: { nextAttemptAt: new Date() }, $inc: { version: 1 } });
    await mongo.db(h.emailsDb).collection('send_queue').updateOne({ _id: emailId } as never, {
      $set: { due: new Date(), leaseOwner: 'dead-worker', leaseUntil: new Date(Date.now() + 8_000) }, $inc: { attempts: 1 },
    });
    const { default: nodemailer } = await import('nodemailer');
    const doc = await col.findOne({ _id: emailId } as never);
    const t = nodemailer.createTransport({ host: '127.0.0.1', port: h.sink.port, secure: false });
    const verp = (await import('../../src/domain/verp.js')).verpAddress({
      secret: (await import('../../src/domain/tracking.js')).deriveKey('integration-tracking-key-0123456789abcdef0123456789', 'verp'), emailId, bounceDomain: 'bounces.mailfleet.test',
    });
    await t.sendMail({ envelope: { from: verp, to: [to] }, raw: `Message-ID: ${String((doc as unknown as { messageId: string }).messageId)}\r\nSubject: x\r\n\r\nbody\r\n` });
    t.close();
    const r = await h.waitForStatus(sender.teamId, emailId, 'DELIVERED', 10_000);
    expect(r.events.map((e) => statusName(e.status))).toEqual(['QUEUED', 'SENT', 'DELIVERED']);
    await new Promise((res) => setTimeout(res, 8_500));
    expect(await sinkCount(to)).toBe(1);
  });

  it('retries while the relay is down (email.delivery_delayed) and fails the email when attempts run out', async () => {
    await h.stopSink();
    try {
      const { emailId } = await h.emails.call.sendEmail({ teamId: sender.teamId, email: email() });
      const r = await h.waitForStatus(sender.teamId, emailId, 'FAILED', 15_000);
      expect(r.events.map((e) => statusName(e.status))).toEqual(['QUEUED', 'DELIVERY_DELAYED', 'DELIVERY_DELAYED', 'FAILED']);
      expect(r.events[1]?.data).toMatchObject({ attempt: 1, nextAttemptAt: expect.any(String), reason: expect.stringMatching(/ECONNREFUSED|connect/i) });
      expect(r.events[3]?.data).toMatchObject({ reason: expect.stringContaining('Gave up after 3 attempts') });
      await eventually(() => h.events.some((e) => e.type === 'email.failed' && (e.data as { id: string }).id === emailId));
      await eventually(() => h.events.filter((e) => e.type === 'email.delivery_delayed' && (e.data as { id: string }).id === emailId).length === 2);
    } finally {
      await h.startSink();
    }
  });
});

describe('hand-off to the local worker', () => {
  /** Its accepts hand due emails to its own worker, which never runs: as if the process died right after accepting. */
  let held: EmailsReplica;
  const LEASE_MS = 6_000;
  beforeAll(async () => {
    held = await h.startReplica({ SEND_LEASE_MS: String(LEASE_MS), SMTP_TIMEOUT_MS: '1000' }, { startSendWorker: false });
  });
  afterAll(async () => {
    await held?.stop();
  });
  const entryOf = async (id: string) => mongo.db(h.emailsDb).collection('send_queue').findOne({ _id: id } as never) as Promise<Record<string, unknown> | null>;

  it('an email handed over at its accept is leased to that worker from its insert; when the process dies, another worker sends it once the lease ends', async () => {
    const to = uniq('handoff');
    const accepted = Date.now();
    const { emailId } = await held.client.call.sendEmail({ teamId: sender.teamId, email: email({ to: [to] }) });
    // Inserted already claimed by the accepting process's worker (its first attempt counted), not free.
    const entry = await entryOf(emailId);
    expect(entry).toMatchObject({ attempts: 1, claimId: expect.any(String), leaseOwner: expect.any(String) });
    expect(entry!['leaseOwner']).not.toBe('change');
    expect((entry!['leaseUntil'] as Date).getTime()).toBeGreaterThan(accepted);
    // The other workers (polling every 50 ms) leave it while the lease holds.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await sinkCount(to)).toBe(0);
    const r = await h.waitForStatus(sender.teamId, emailId, ['SENT', 'DELIVERED'], LEASE_MS + 15_000);
    expect(Date.now() - accepted).toBeGreaterThanOrEqual(LEASE_MS - 500);
    expect(r.events.map((e) => statusName(e.status)).slice(0, 2)).toEqual(['QUEUED', 'SENT']);
    await eventually(async () => (await entryOf(emailId)) === null, 10_000, 'queue entry removed');
    expect(await sinkCount(to)).toBe(1);
  });

  it('a change of a handed-over email not started yet wins on the accepting process, and is busy elsewhere', async () => {
    const to = uniq('handoff-cancel');
    const { emailId } = await held.client.call.sendEmail({ teamId: sender.teamId, email: email({ to: [to] }) });
    // Another process sees an email held by a worker, as one being sent.
    expect(await code(h.emails.call.cancelEmail({ teamId: sender.teamId, emailId }))).toBe('ABORTED');
    // The accepting process withdraws it from its hand-off: the cancel wins and the entry goes.
    expect(await held.client.call.cancelEmail({ teamId: sender.teamId, emailId })).toEqual({ emailId });
    const r = await h.waitForStatus(sender.teamId, emailId, 'CANCELLED');
    expect(r.events.map((e) => statusName(e.status))).toEqual(['QUEUED', 'CANCELLED']);
    expect(await entryOf(emailId)).toBeNull();

    // A reschedule likewise: the email then waits for its new time, free for any worker.
    const to2 = uniq('handoff-later');
    const b = (await held.client.call.sendEmail({ teamId: sender.teamId, email: email({ to: [to2] }) })).emailId;
    const at = new Date(Date.now() + LEASE_MS + 8_000);
    expect(await held.client.call.updateSchedule({ teamId: sender.teamId, emailId: b, scheduledAt: at })).toEqual({ emailId: b });
    const moved = await entryOf(b);
    expect(moved).toMatchObject({ due: at, touched: true });
    expect(moved!['leaseOwner']).toBeUndefined();
    // Past both hand-off leases, well before the new time.
    await new Promise((res) => setTimeout(res, LEASE_MS + 1_000));
    expect(await sinkCount(to)).toBe(0);
    expect(await sinkCount(to2)).toBe(0);
    await h.waitForStatus(sender.teamId, b, ['SENT', 'DELIVERED'], 25_000);
    expect(await sinkCount(to2)).toBe(1);
  });
});

describe('scheduling', () => {
  it('sends a scheduled email when due, not before', async () => {
    const to = uniq('sched');
    const at = new Date(Date.now() + 5_000);
    const { emailId } = await h.emails.call.sendEmail({ teamId: sender.teamId, email: email({ to: [to], scheduledAt: at }) });
    const got = (await h.emails.call.getEmail({ teamId: sender.teamId, emailId })).email!;
    expect(got.scheduledAt).toEqual(at);
    expect(statusName(got.latestStatus)).toBe('QUEUED');
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await sinkCount(to)).toBe(0);
    await h.waitForStatus(sender.teamId, emailId, ['SENT', 'DELIVERED'], 25_000);
    const mail = (await h.mail()).find((m) => m.envelope.rcptTo.includes(to))!;
    expect(new Date(mail.receivedAt).getTime()).toBeGreaterThanOrEqual(at.getTime());
  });

  it('reschedules, sends now with null, cancels; refuses once sent', async () => {
    const later = new Date(Date.now() + 3_600_000);
    const a = (await h.emails.call.sendEmail({ teamId: sender.teamId, email: email({ scheduledAt: later }) })).emailId;
    const evenLater = new Date(Date.now() + 7_200_000);
    expect(await h.emails.call.updateSchedule({ teamId: sender.teamId, emailId: a, scheduledAt: evenLater })).toEqual({ emailId: a });
    expect((await h.emails.call.getEmail({ teamId: sender.teamId, emailId: a })).email!.scheduledAt).toEqual(evenLater);
    await h.emails.call.updateSchedule({ teamId: sender.teamId, emailId: a });
    const sent = await h.waitForStatus(sender.teamId, a, ['SENT', 'DELIVERED'], 10_000);
    expect(sent.email!.scheduledAt).toBeUndefined();
    expect(await code(h.emails.call.cancelEmail({ teamId: sender.teamId, emailId: a }))).toBe('FAILED_PRECONDITION');
    expect(await details(h.emails.call.updateSchedule({ teamId: sender.teamId, emailId: a, scheduledAt: later }))).toContain('already been sent');

    const to = uniq('cancel');
    const b = (await h.emails.call.sendEmail({ teamId: sender.teamId, email: email({ to: [to], scheduledAt: new Date(Date.now() + 5_000) }) })).emailId;
    expect(await h.emails.call.cancelEmail({ teamId: sender.teamId, emailId: b })).toEqual({ emailId: b });
    const cancelled = await h.waitForStatus(sender.teamId, b, 'CANCELLED');
    expect(cancelled.events.map((e) => statusName(e.status))).toEqual(['QUEUED', 'CANCELLED']);
    expect(await h.emails.call.cancelEmail({ teamId: sender.teamId, emailId: b })).toEqual({ emailId: b });
    expect(await code(h.emails.call.updateSchedule({ teamId: sender.teamId, emailId: b }))).toBe('FAILED_PRECONDITION');
    await new Promise((r) => setTimeout(r, 5_500));
    expect(await sinkCount(to)).toBe(0);
    await eventually(() => h.events.some((e) => e.type === 'email.cancelled' && (e.data as { id: string }).id === b));
    expect(await code(h.emails.call.cancelEmail({ teamId: sender.teamId, emailId: 'em_nope' }))).toBe('NOT_FOUND');
  });

  it('fails the scheduled emails of a deleted domain', async () => {
    const doomed = await h.newSender();
    const { emailId } = await h.emails.call.sendEmail({ teamId: doomed.teamId, email: email({ from: `a@${doomed.domain}`, scheduledAt: new Date(Date.now() + 3_600_000) }) });
    await h.domains.call.deleteDomain({ teamId: doomed.teamId, domainId: doomed.domainId });
    const r = await h.waitForStatus(doomed.teamId, emailId, 'FAILED', 15_000);
    expect(r.events.at(-1)?.data).toMatchObject({ reason: expect.stringContaining('deleted') });
    expect(await code(h.emails.call.sendEmail({ teamId: doomed.teamId, email: email({ from: `a@${doomed.domain}` }) }))).toBe('INVALID_ARGUMENT');
  });
});
