import { status, type ServiceError } from '@grpc/grpc-js';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  createEvent, createGrpcClient, createLogger, encodeEvent, EVENT_STREAM, startService, subjectFor, type EventEnvelope, type RunningService,
  type UpstreamClient,
} from '@mailfleet/kit';
import { analyticsV1, emailsV1 } from '@mailfleet/proto';
import { awayFromUtcMidnight, durablesIdle, isolatedNats, stopNats, testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type Db } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAnalyticsConfig } from '../../src/config.js';
import { utcDay } from '../../src/domain/days.js';
import { DOMAIN_EVENTS_DURABLE } from '../../src/events/domain-events.consumer.js';
import { EMAIL_EVENTS_DURABLE } from '../../src/events/email-events.consumer.js';
import { createRollupsRepository, rollupIdOf } from '../../src/repositories/rollups.repository.js';
import { createAnalyticsServer } from '../../src/server.js';

const logger = createLogger({ service: 'analytics-test', level: 'silent' });
const dbName = uniqueDbName('analytics');
const P = analyticsV1.Period;
let natsInstance: string;
let natsUrl: string;
let svc: RunningService | undefined;
let client: UpstreamClient<analyticsV1.AnalyticsServiceClient>;
let nc: NatsConnection;
let js: JetStreamClient;
let jsm: JetStreamManager;
let mongo: MongoClient;
let db: Db;

async function startAnalytics(): Promise<RunningService> {
  const config = loadAnalyticsConfig({
    GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: testMongoUrl(), MONGO_DB: dbName, NATS_URL: natsUrl, LOG_LEVEL: 'silent',
  });
  const s = await startService({ name: 'analytics', config, env: {}, logger, build: (infra) => createAnalyticsServer({ config, infra }) });
  client?.close();
  client = createGrpcClient({ name: 'analytics', address: `127.0.0.1:${s.grpc.port}`, ctor: analyticsV1.AnalyticsServiceClient, logger });
  return s;
}

beforeAll(async () => {
  // A NATS of this file's own: the durables' pending counts reflect only the events published here.
  ({ instance: natsInstance, url: natsUrl } = await isolatedNats());
  svc = await startAnalytics();
  nc = await connect({ servers: natsUrl });
  js = jetstream(nc);
  jsm = await jetstreamManager(nc);
  mongo = new MongoClient(testMongoUrl());
  db = mongo.db(dbName);
});
afterAll(async () => {
  client?.close();
  await nc?.close();
  await svc?.infra.mongo.db.dropDatabase();
  await svc?.shutdown('test over');
  await mongo?.close();
  await stopNats({ instance: natsInstance }).catch(() => undefined);
});

const code = (p: Promise<unknown>) => p.then(() => 'OK', (e: ServiceError) => status[e.code]);
let teamSeq = 0;
const newTeam = () => `team_it_${Date.now().toString(36)}_${++teamSeq}`;

async function publish(e: EventEnvelope<unknown>, msgID = e.id): Promise<void> {
  await js.publish(subjectFor(e.type), encodeEvent(e), { msgID });
}

/** Resolves once both durables have handled every event published so far. */
const consumersIdle = (timeoutMs = 30_000): Promise<void> => durablesIdle(jsm, [EMAIL_EVENTS_DURABLE, DOMAIN_EVENTS_DURABLE], { timeoutMs });

const DAY = 86_400_000;
/** `daysAgo` days before now, plus `seconds` (the order of the script's events within a day). */
const at = (daysAgo: number, seconds = 0) => new Date(Date.now() - daysAgo * DAY + seconds * 1000);
let tick = 0;

/** An `email.*` event with the SPEC 6.3 payload, created when it occurred (plus a tick, so the feed order is known). */
function emailEvent(teamId: string, type: string, emailId: string, extra: Record<string, unknown> = {}, when = at(0)): EventEnvelope {
  tick += 1;
  return createEvent(type, teamId, {
    id: emailId, status: type.slice('email.'.length).toUpperCase(), from: 'Shop <shop@a.example>', to: ['someone@r.example'],
    subject: `About ${emailId}`, occurredAt: when.toISOString(), ...extra,
  }, new Date(when.getTime() + tick));
}

/** Everything a user could read for a team, in one object: what replays must leave unchanged. */
async function snapshot(teamId: string) {
  return {
    analytics: await client.call.getAnalytics({ teamId }),
    reputation: await client.call.getReputation({ teamId }),
    reputationA: await client.call.getReputation({ teamId, domain: 'a.example' }),
    week: await client.call.getTimeSeries({ teamId, days: 7 }),
    month: await client.call.getTimeSeries({ teamId, days: 30 }),
    metrics: await client.call.getMetrics({ teamId, period: P.PERIOD_MONTH }),
    stats: await client.call.getStats({ teamId }),
    domainA: await client.call.getDomainAnalytics({ teamId, domainId: 'dom_a', period: P.PERIOD_WEEK }),
    activity: await client.call.listActivity({ teamId, page: 1, limit: 100 }),
  };
}

describe('rollups from real events', () => {
  const teamId = newTeam();
  const a = { domainId: 'dom_a' };
  const b = { domainId: 'dom_b', campaignId: 'cmp_1' };
  const script: EventEnvelope[] = [];

  beforeAll(async () => {
    // Today's events are back-dated by up to 50 s and the reads name days: keep the file inside one UTC day.
    await awayFromUtcMidnight({ needMs: 120_000, afterMs: 60_000 });
    script.push(
      createEvent('domain.created', teamId, { id: 'dom_a', name: 'a.example' }, at(50)),
      createEvent('domain.created', teamId, { id: 'dom_b', name: 'b.example' }, at(50)),
      createEvent('domain.created', teamId, { id: 'dom_gone', name: 'gone.example' }, at(50)),
      createEvent('domain.deleted', teamId, { id: 'dom_gone', name: 'gone.example' }, at(49)),
      // em_1: two recipients, delivered to both, opened twice, clicked.
      emailEvent(teamId, 'email.queued', 'em_1', { ...a, to: ['one@r.example', 'two@r.example'] }, at(0, -50)),
      emailEvent(teamId, 'email.sent', 'em_1', { ...a, to: ['one@r.example', 'two@r.example'] }, at(0, -49)),
      emailEvent(teamId, 'email.delivered', 'em_1', { ...a, to: ['one@r.example'] }, at(0, -48)),
      emailEvent(teamId, 'email.delivered', 'em_1', { ...a, to: ['two@r.example'] }, at(0, -47)),
      emailEvent(teamId, 'email.opened', 'em_1', { ...a, open: { timestamp: at(0, -40).toISOString(), userAgent: 'UA', ip: '10.0.0.1', platform: 'macOS' } }, at(0, -40)),
      emailEvent(teamId, 'email.opened', 'em_1', { ...a, open: { timestamp: at(0, -30).toISOString(), userAgent: 'UA', ip: '10.0.0.1', platform: 'macOS' } }, at(0, -30)),
      emailEvent(teamId, 'email.clicked', 'em_1', { ...a, click: { timestamp: at(0, -29).toISOString(), url: 'https://x.example', userAgent: 'UA', ip: '10.0.0.1', platform: 'macOS' } }, at(0, -29)),
      // em_2: hard bounce.
      emailEvent(teamId, 'email.sent', 'em_2', a, at(0, -45)),
      emailEvent(teamId, 'email.bounced', 'em_2', { ...a, bounce: { type: 'Permanent', subType: 'General', message: '550 5.1.1 unknown' } }, at(0, -44)),
      // em_3: campaign mail, delivered and complained about.
      emailEvent(teamId, 'email.sent', 'em_3', b, at(0, -45)),
      emailEvent(teamId, 'email.delivered', 'em_3', b, at(0, -44)),
      emailEvent(teamId, 'email.complained', 'em_3', b, at(0, -20)),
      // em_4: a soft bounce, then delivered.
      emailEvent(teamId, 'email.sent', 'em_4', a, at(0, -43)),
      emailEvent(teamId, 'email.bounced', 'em_4', { ...a, bounce: { type: 'Transient', subType: 'MailboxFull', message: '452 full' } }, at(0, -42)),
      emailEvent(teamId, 'email.delivered', 'em_4', a, at(0, -41)),
      // em_5: no domain in the payload; metadata keys that are not valid field names.
      emailEvent(teamId, 'email.sent', 'em_5', { metadata: { '$odd': 'x', 'a.b': 'y' } }, at(0, -39)),
      // em_6: campaign mail 3 days ago; em_7: 40 days ago (outside every window but all-time figures).
      emailEvent(teamId, 'email.sent', 'em_6', b, at(3)),
      emailEvent(teamId, 'email.delivered', 'em_6', b, at(3, 1)),
      emailEvent(teamId, 'email.sent', 'em_7', a, at(40)),
      emailEvent(teamId, 'email.delivered', 'em_7', a, at(40, 1)),
    );
  }, 240_000);

  it('every read returns the exact numbers of a scripted mix', async () => {
    for (const e of script) await publish(e);
    await consumersIdle();
    const today = utcDay(new Date());
    const em6ThisMonth = utcDay(at(3)).slice(0, 7) === today.slice(0, 7);

    expect(await client.call.getAnalytics({ teamId })).toEqual({ day: [{ type: 'email', sent: 5 }], month: [{ type: 'email', sent: 5 + (em6ThisMonth ? 1 : 0) }] });
    // All time: delivered em_1, em_3, em_4, em_6, em_7; one hard bounce (em_2); one complaint.
    expect(await client.call.getReputation({ teamId })).toEqual({ delivered: 5, hardBounced: 1, complained: 1, bounceRate: 20, complaintRate: 20 });
    expect(await client.call.getReputation({ teamId, domain: 'A.Example' })).toEqual({ delivered: 3, hardBounced: 1, complained: 0, bounceRate: (1 / 3) * 100, complaintRate: 0 });
    expect(await client.call.getReputation({ teamId, domain: 'dom_b' })).toEqual({ delivered: 2, hardBounced: 0, complained: 1, bounceRate: 0, complaintRate: 50 });

    const week = await client.call.getTimeSeries({ teamId, days: 7 });
    expect(week.result).toHaveLength(7);
    expect(week.result[6]).toEqual({ date: expect.stringMatching(/^[A-Z][a-z]{2} \d{2}$/), sent: 5, delivered: 3, opened: 1, clicked: 1, bounced: 2, complained: 1 });
    expect(week.result[3]).toMatchObject({ sent: 1, delivered: 1 });
    expect(week.result.filter((r, i) => i !== 3 && i !== 6).every((r) => r.sent + r.delivered + r.opened + r.clicked + r.bounced + r.complained === 0)).toBe(true);
    expect(week.totalCounts).toEqual({ sent: 6, delivered: 4, opened: 1, clicked: 1, bounced: 2, complained: 1 });
    const monthB = await client.call.getTimeSeries({ teamId, days: 30, domain: 'b.example' });
    expect(monthB.result).toHaveLength(30);
    expect(monthB.totalCounts).toEqual({ sent: 2, delivered: 2, opened: 0, clicked: 0, bounced: 0, complained: 1 });

    const metrics = await client.call.getMetrics({ teamId, period: P.PERIOD_UNSPECIFIED });
    expect(metrics).toEqual({
      period: P.PERIOD_MONTH, transactionalEmails: 4, marketingEmails: 2, totalEmails: 6,
      avgDeliveryRate: (4 / 6) * 100, avgOpenRate: 25, avgClickRate: 25,
      domains: [{ id: 'dom_a', name: 'a.example', emailsSent: 3 }, { id: 'dom_b', name: 'b.example', emailsSent: 2 }],
    });
    expect(await client.call.getMetrics({ teamId, period: P.PERIOD_DAY })).toMatchObject({ transactionalEmails: 4, marketingEmails: 1, totalEmails: 5 });

    expect((await client.call.getStats({ teamId })).stats).toEqual({
      totalSent: 7, totalDelivered: 5, totalOpened: 1, totalClicked: 1, totalBounced: 2, totalComplained: 1,
      deliveryRate: (5 / 7) * 100, openRate: 20, clickRate: 20, bounceRate: (2 / 7) * 100, complaintRate: 20,
    });
    expect((await client.call.getStats({ teamId, startDate: at(1), endDate: new Date() })).stats).toMatchObject({ totalSent: 5, totalDelivered: 3 });
    expect(await client.call.getDomainAnalytics({ teamId, domainId: 'dom_a', period: P.PERIOD_WEEK })).toEqual({
      period: P.PERIOD_WEEK, totalSent: 3, totalDelivered: 2, totalOpened: 1, totalClicked: 1, deliveryRate: (2 / 3) * 100, openRate: 50, clickRate: 50,
    });
    expect((await client.call.getDomainStats({ teamId, domainId: 'dom_b', startDate: at(5) })).stats).toMatchObject({ totalSent: 2, totalComplained: 1, complaintRate: 50 });

    // The feed: every email event, newest first, with the email's summary.
    const activity = await client.call.listActivity({ teamId, page: 1, limit: 100 });
    const emailEvents = script.filter((e) => e.type.startsWith('email.'));
    expect(activity.activity.map((x) => x.event!.id)).toEqual([...emailEvents].sort((x, y) => y.createdAt.localeCompare(x.createdAt)).map((e) => e.id));
    expect(activity.activity.find((x) => x.event!.status === emailsV1.EmailStatus.EMAIL_STATUS_QUEUED)).toEqual({
      event: { id: script[4]!.id, emailId: 'em_1', status: emailsV1.EmailStatus.EMAIL_STATUS_QUEUED, teamId, createdAt: new Date(script[4]!.createdAt), data: script[4]!.data },
      email: { id: 'em_1', to: ['one@r.example', 'two@r.example'], subject: 'About em_1', from: 'Shop <shop@a.example>' },
    });
    const em5 = activity.activity.find((x) => x.event!.emailId === 'em_5');
    expect(em5?.event?.data).toMatchObject({ metadata: { '$odd': 'x', 'a.b': 'y' } });
    const page2 = await client.call.listActivity({ teamId, page: 2, limit: 5 });
    expect(page2).toMatchObject({ page: 2, limit: 5 });
    expect(page2.activity.map((x) => x.event!.id)).toEqual(activity.activity.slice(5, 10).map((x) => x.event!.id));

    const bounced = await client.call.listEvents({ teamId, page: 1, limit: 50, status: emailsV1.EmailStatus.EMAIL_STATUS_BOUNCED });
    expect(bounced.events.map((e) => e.emailId)).toEqual(['em_4', 'em_2']);
    expect(bounced.events[1]?.data).toMatchObject({ bounce: { type: 'Permanent' } });
    const recent = await client.call.listEvents({ teamId, page: 1, limit: 50, status: 0, startDate: at(1) });
    expect(recent.events).toHaveLength(emailEvents.length - 4);
    expect((await client.call.listEvents({ teamId, page: 1, limit: 50, status: 0, domainId: 'dom_b' })).events).toHaveLength(5);
    expect((await client.call.listEvents({ teamId: newTeam(), page: 1, limit: 50, status: 0 })).events).toEqual([]);
  });

  it('replays change nothing: the same ids again, new message ids past dedup, and a reset durable', async () => {
    const before = await snapshot(teamId);
    // 1. The same message ids: the server's dedup drops them.
    for (const e of script) await publish(e);
    await consumersIdle();
    // 2. New message ids, same event ids (a republish past the dedup window): the service's own idempotency holds.
    for (const e of script) await publish(e, `${e.id}-again`);
    await consumersIdle();
    expect(await snapshot(teamId)).toEqual(before);
    // 3. The consumers replay the whole stream from the start (durables deleted while the service is down).
    await svc!.shutdown('replay');
    await jsm.consumers.delete(EVENT_STREAM, EMAIL_EVENTS_DURABLE);
    await jsm.consumers.delete(EVENT_STREAM, DOMAIN_EVENTS_DURABLE);
    svc = await startAnalytics();
    await consumersIdle();
    expect(await snapshot(teamId)).toEqual(before);
    // In-flight bookkeeping is gone once every counting finished: no rollup keeps pending tokens.
    expect(await db.collection('daily_rollups').countDocuments({ teamId, 'pending.0': { $exists: true } })).toBe(0);
  });

  it('a deleted domain keeps its name for the history, and a newer name wins over an older event', async () => {
    const t = newTeam();
    await publish(createEvent('domain.created', t, { id: 'dom_1', name: 'first.example' }, at(2)));
    await publish(createEvent('domain.updated', t, { id: 'dom_1', name: 'renamed.example' }, at(1)));
    await publish(createEvent('domain.created', t, { id: 'dom_1', name: 'stale.example' }, at(3)));
    await publish(emailEvent(t, 'email.sent', 'em_1', { domainId: 'dom_1' }));
    await publish(createEvent('domain.deleted', t, { id: 'dom_1', name: 'renamed.example' }, at(0)));
    await consumersIdle();
    expect((await client.call.getMetrics({ teamId: t, period: P.PERIOD_DAY })).domains).toEqual([{ id: 'dom_1', name: 'renamed.example', emailsSent: 1 }]);
    expect(await client.call.getReputation({ teamId: t, domain: 'renamed.example' })).toMatchObject({ delivered: 0 });
  });

  it('malformed events are terminated and do not hold up the ones behind them', async () => {
    const t = newTeam();
    await publish(createEvent('email.sent', t, { to: ['nobody'] }));
    await js.publish(subjectFor('email.delivered'), new TextEncoder().encode('{not json'));
    await publish(createEvent('domain.created', t, { id: 'dom_x' }));
    await publish(emailEvent(t, 'email.sent', 'em_ok'));
    await consumersIdle();
    expect((await client.call.getStats({ teamId: t })).stats).toMatchObject({ totalSent: 1 });
  });

  it('refuses invalid arguments', async () => {
    expect(await code(client.call.getTimeSeries({ teamId, days: 8 }))).toBe('INVALID_ARGUMENT');
    expect(await code(client.call.getMetrics({ teamId, period: 9 as analyticsV1.Period }))).toBe('INVALID_ARGUMENT');
    expect(await code(client.call.getStats({ teamId, startDate: at(1), endDate: at(2) }))).toBe('INVALID_ARGUMENT');
    expect(await code(client.call.listEvents({ teamId, page: 1, limit: 101, status: 0 }))).toBe('INVALID_ARGUMENT');
    expect(await code(client.call.getAnalytics({ teamId: '' }))).toBe('INVALID_ARGUMENT');
  });
});

describe('counting once without transactions', () => {
  const rollupKey = (teamId: string) => ({ teamId, day: utcDay(new Date()), domainId: 'dom_c', kind: 'transactional' as const });
  const sentOf = async (teamId: string) => (await client.call.getStats({ teamId })).stats!.totalSent;

  it('many concurrent countings of one email count it once; of many emails on a fresh rollup, each once', async () => {
    const repo = createRollupsRepository(db);
    const teamId = newTeam();
    const input = (emailId: string, eventId: string) => ({ teamId, emailId, metric: 'sent' as const, eventId, rollup: rollupKey(teamId) });
    const same = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => repo.countOnce(input('em_same', `evt_${i % 3}`))));
    expect(same.filter((r) => r.status === 'fulfilled' && r.value === 'counted')).toHaveLength(1);
    // Losers either counted nothing or were told to retry (the same event held elsewhere): a retry then counts nothing.
    for (const r of same) if (r.status === 'rejected') expect((r.reason as Error).name).toBe('CountingBusyError');
    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => repo.countOnce(input(`em_${i}`, `evt_m${i}`))));
    expect(many.every((o) => o === 'counted')).toBe(true);
    expect(await sentOf(teamId)).toBe(21);
    const doc = await db.collection('daily_rollups').findOne({ _id: rollupIdOf(rollupKey(teamId)) as never });
    expect(doc?.pending ?? []).toEqual([]);
  });

  it('a crash after the counter was applied, before the claim was finished: the redelivery adds nothing', async () => {
    const teamId = newTeam();
    // A holder with a short lease stops right after step 2, as a process killed there would. Its clock stands still,
    // so its own apply finds the lease live however slow the store is; the service's clock then finds it over.
    const claimedAt = new Date();
    const crashed = createRollupsRepository(db, { leaseMs: 300, marginMs: 100, now: () => claimedAt });
    const e = emailEvent(teamId, 'email.sent', 'em_crash', { domainId: 'dom_c' });
    const c = await crashed.claim({ teamId, emailId: 'em_crash', metric: 'sent', eventId: e.id, rollup: rollupKey(teamId) });
    await crashed.apply(c!, 'sent');
    expect(await sentOf(teamId)).toBe(1);
    await new Promise((r) => setTimeout(r, 350));
    await publish(e);
    await consumersIdle();
    expect(await sentOf(teamId)).toBe(1);
    const doc = await db.collection('daily_rollups').findOne({ _id: rollupIdOf(rollupKey(teamId)) as never });
    expect(doc?.pending).toEqual([]);
  });

  it('a crash after the claim, before the counter: the redelivery (or another event for the email) takes over and counts once', async () => {
    const teamId = newTeam();
    const crashed = createRollupsRepository(db, { leaseMs: 300, marginMs: 100 });
    const first = emailEvent(teamId, 'email.opened', 'em_crash2', { domainId: 'dom_c' });
    await crashed.claim({ teamId, emailId: 'em_crash2', metric: 'opened', eventId: first.id, rollup: rollupKey(teamId) });
    await new Promise((r) => setTimeout(r, 350));
    // A second open of the same email arrives first: it takes the abandoned counting over.
    await publish(emailEvent(teamId, 'email.opened', 'em_crash2', { domainId: 'dom_c' }));
    await consumersIdle();
    await publish(first);
    await consumersIdle();
    expect((await client.call.getStats({ teamId })).stats).toMatchObject({ totalOpened: 1 });
  });

  it('a redelivery while the crashed holder\'s lease still runs waits for it, then counts once', async () => {
    const teamId = newTeam();
    const crashed = createRollupsRepository(db, { leaseMs: 1_500, marginMs: 100 });
    const e = emailEvent(teamId, 'email.delivered', 'em_crash3', { domainId: 'dom_c' });
    await crashed.claim({ teamId, emailId: 'em_crash3', metric: 'delivered', eventId: e.id, rollup: rollupKey(teamId) });
    // The service finds the live lease of the same event, naks, and takes over on a later delivery.
    await publish(e);
    // A nak'd event stays unacknowledged until its redelivery is handled: idle means counted.
    await consumersIdle(30_000);
    expect((await client.call.getStats({ teamId })).stats).toMatchObject({ totalDelivered: 1 });
  });
});
