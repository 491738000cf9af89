import { randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createEvent, decodeEvent, encodeEvent, EVENT_STREAM, subjectFor, type EventEnvelope } from '@mailfleet/kit';
import { awayFromUtcMidnight, durablesIdle, startChild, stopChild } from '@mailfleet/testkit';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { addVerifiedDomain, apiAt, createTeam, detail, gatewayUrl, mailTo, newSender, trackingLinks, until, waitEvents } from './helpers.js';

const api = apiAt(gatewayUrl());
const DAY = 86_400_000;
/** The analytics service's durables (services/analytics/src/events). */
const DURABLES = ['analytics-email-events', 'analytics-domains'];

let nc: NatsConnection;
let js: JetStreamClient;
let jsm: JetStreamManager;
let teamId: string;
let token: string;
let d1: { id: string; name: string };
let d2: { id: string; name: string };

/**
 * Every `email.*` event of the team as it is on the stream (what analytics
 * consumes), by event id: the emails service's events of the real sends below,
 * plus the synthetic back-dated ones this file publishes itself.
 */
const streamed = new Map<string, EventEnvelope>();
/** What each email of the mix is: its id, recipient, subject, from (for the activity's `email`), and its events' ids. */
interface Mail { emailId: string; to: string[]; subject: string; from: string; eventIds: string[] }
const mails = new Map<string, Mail>();

const consumersIdle = (timeoutMs = 60_000): Promise<void> => durablesIdle(jsm, DURABLES, { timeoutMs, intervalMs: 200 });

async function get<T = Record<string, unknown>>(path: string, as = token): Promise<T> {
  const res = await api('GET', path, { token: as });
  expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body as T;
}

const tag = randomBytes(3).toString('hex');
/** Mailbox simulator addresses: `bounce` 550, `softbounce` 451 then accepted, `complaint` accepted then an ARF report, others delivered. */
const address = (local: string) => `${local}+${tag}@inbox.analytics-e2e.test`;
const HTML = '<html><body><p>Hello</p><p><a href="https://shop.example/offer">Offer</a></p></body></html>';

/** POST /v1/emails from d1 (open and click tracking on). */
async function send(local: string): Promise<string> {
  const to = address(local);
  const res = await api('POST', '/v1/emails', { token, body: { from: `Shop <shop@${d1.name}>`, to, subject: `Hello ${local}`, html: HTML } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return (res.body as { emailId: string }).emailId;
}

/** Fetches the open pixel `opens` times and the click link `clicks` times, as a mail client would. */
async function read(to: string, opens: number, clicks: number): Promise<void> {
  const links = trackingLinks((await mailTo(to)).parsed.html as string);
  const ua = { 'user-agent': 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0) AppleWebKit/605.1.15' };
  for (let i = 0; i < opens; i++) expect((await fetch(links.pixel!, { headers: ua })).status).toBe(200);
  for (let i = 0; i < clicks; i++) expect((await fetch(links.click!, { headers: ua, redirect: 'manual' })).status).toBe(302);
}

/**
 * SYNTHETIC, and the only synthetic part: an email delivered three days ago
 * (real sends cannot be back-dated). Published to JetStream as the emails
 * service would have; it exists for the past-day row of the time series and the
 * week/month windows.
 */
async function publishBackdatedDelivery(): Promise<void> {
  const when = new Date(Date.now() - 3 * DAY);
  const m: Mail = { emailId: `em_${randomBytes(8).toString('hex')}`, to: [address('past')], subject: 'Three days ago', from: `Shop <shop@${d1.name}>`, eventIds: [] };
  for (const [i, type] of ['email.queued', 'email.sent', 'email.delivered'].entries()) {
    const at = new Date(when.getTime() + i);
    const e = createEvent(type, teamId, {
      id: m.emailId, status: type.slice('email.'.length).toUpperCase(), from: m.from, to: m.to, subject: m.subject, occurredAt: at.toISOString(), domainId: d1.id,
    }, at);
    await js.publish(subjectFor(e.type), encodeEvent(e), { msgID: e.id });
    m.eventIds.push(e.id);
  }
  mails.set(m.emailId, m);
}

let ids: { delivered: string; bounced: string; complained: string; softBounced: string; campaignOpened: string; campaign: string };

beforeAll(async () => {
  // Real sends happen "today" and the reads name days: the whole file (a minute or two) within one UTC day.
  await awayFromUtcMidnight({ needMs: 4 * 60_000, afterMs: 10_000 });
  nc = await connect({ servers: inject('natsUrl') });
  js = jetstream(nc);
  jsm = await jetstreamManager(nc);
  // Everything on the stream, from its start: this team's email events are collected as they are published.
  const messages = await (await js.consumers.get(EVENT_STREAM, { filter_subjects: ['mailfleet.email.>'] })).consume();
  void (async () => {
    for await (const m of messages) {
      const e = decodeEvent(m.data);
      if (e.teamId === teamId) streamed.set(e.id, e);
    }
  })().catch(() => undefined);

  // A team with two verified domains (their domain.* events give analytics the names): d1 tracks opens and clicks, d2 opens.
  const s = await newSender('Analytics', { tracking: true });
  ({ teamId, token } = s);
  d1 = { id: s.domainId, name: s.domain };
  const two = await addVerifiedDomain(token, 'analytics-two', { open: true });
  d2 = { id: two.domainId, name: two.domain };

  // Transactional mail from d1, each to a mailbox simulator address.
  ids = {
    delivered: await send('reader'),
    bounced: await send('bounce'),
    complained: await send('complaint'),
    softBounced: await send('softbounce'),
    campaignOpened: '',
    campaign: '',
  };
  // The reader opens it twice and clicks once.
  await read(address('reader'), 2, 1);

  // Campaign mail from d2: a book of two contacts, sent now by the campaigns service (through the emails service's SendBatch).
  const book = await api('POST', '/v1/contactBooks', { token, body: { name: `Analytics ${tag}` } });
  expect(book.status).toBe(200);
  const bookId = (book.body as { id: string }).id;
  const contacts = await api('POST', `/v1/contactBooks/${bookId}/contacts/bulk`, { token, body: [{ email: address('fan1'), firstName: 'One' }, { email: address('fan2'), firstName: 'Two' }] });
  expect(contacts.status, JSON.stringify(contacts.body)).toBe(200);
  const campaign = await api('POST', '/v1/campaigns', {
    token,
    body: {
      name: 'Analytics', from: `News <news@${d2.name}>`, subject: 'News for {{firstName}}', contactBookId: bookId, sendNow: true,
      html: '<p>Hello {{firstName}}</p><p><a href="{{service_unsubscribe_url}}">Unsubscribe</a></p>',
    },
  });
  expect(campaign.status, JSON.stringify(campaign.body)).toBe(200);
  const campaignMail = await until(async () => {
    const list = await get<{ data: { id: string; to: string[] }[] }>(`/v1/emails?domainId=${d2.id}`);
    return list.data.length === 2 && list.data;
  }, 60_000, 'the campaign\'s two emails');
  ids.campaignOpened = campaignMail.find((e) => e.to.includes(address('fan1')))!.id;
  ids.campaign = campaignMail.find((e) => e.to.includes(address('fan2')))!.id;
  await read(address('fan1'), 1, 0);

  // Every email in its final state: exactly these events, nothing pending.
  const finalEvents: Record<string, string[]> = {
    [ids.delivered]: ['QUEUED', 'SENT', 'DELIVERED', 'OPENED', 'OPENED', 'CLICKED'],
    [ids.bounced]: ['QUEUED', 'BOUNCED'],
    [ids.complained]: ['QUEUED', 'SENT', 'DELIVERED', 'COMPLAINED'],
    // The simulator's soft bounce is a 451 then acceptance: delayed, retried, delivered. No final transient bounce can be produced.
    [ids.softBounced]: ['QUEUED', 'DELIVERY_DELAYED', 'SENT', 'DELIVERED'],
    [ids.campaignOpened]: ['QUEUED', 'SENT', 'DELIVERED', 'OPENED'],
    [ids.campaign]: ['QUEUED', 'SENT', 'DELIVERED'],
  };
  for (const [emailId, statuses] of Object.entries(finalEvents)) {
    const d = await waitEvents({ token }, emailId, statuses);
    const events = await get<{ events: { id: string }[] }>(`/v1/emails/${emailId}/events?limit=100`);
    mails.set(emailId, { emailId, to: d.to, subject: d.subject, from: d.from, eventIds: events.events.map((e) => e.id) });
  }
  expect((await detail({ token }, ids.bounced)).emailEvents[1]?.data).toMatchObject({ bounce: { type: 'Permanent' } });

  await publishBackdatedDelivery();

  // The stream carries exactly the events the emails service recorded (and the synthetic ones), then analytics has counted them all.
  const expected = [...mails.values()].flatMap((m) => m.eventIds).sort();
  await until(async () => expected.every((id) => streamed.has(id)), 60_000, 'every event of the mix on the stream');
  expect([...streamed.keys()].sort()).toEqual(expected);
  await consumersIdle();
  // And both domains' names have arrived (through the domains outbox).
  await until(async () => {
    const names = (await get<{ domains: { name: string }[] }>('/v1/metrics')).domains.map((d) => d.name);
    return names.includes(d1.name) && names.includes(d2.name);
  }, 60_000, 'domain names in analytics');
  // Up to 4 min 10 s of that near midnight.
}, 600_000);
afterAll(async () => {
  await nc?.close();
});

const today = () => new Date().toISOString().slice(0, 10);
const ZERO = { sent: 0, delivered: 0, opened: 0, clicked: 0, bounced: 0, complained: 0 };
/** As the service computes a rate: part / whole x 100, not rounded. */
const pct = (part: number, whole: number) => (part / whole) * 100;

/** Every analytics read of the team, in one object: what a replay must leave unchanged. */
async function everything() {
  return {
    analytics: await get('/v1/analytics'),
    reputation: await get('/v1/analytics/reputation'),
    reputationD1: await get(`/v1/analytics/reputation?domain=${d1.name}`),
    week: await get('/v1/analytics/time-series'),
    month: await get(`/v1/analytics/time-series?days=30&domain=${d2.id}`),
    metrics: await get('/v1/metrics'),
    stats: await get('/v1/stats'),
    domainAnalytics: await get(`/v1/domains/${d1.id}/analytics`),
    domainStats: await get(`/v1/domains/${d1.id}/stats`),
    activity: await get('/v1/activity?limit=100'),
    events: await get('/v1/events?limit=100'),
  };
}

/*
 * The mix, and what it counts (an email counts at most once per counter):
 *   today, d1 (transactional): delivered + opened twice + clicked; hard bounce (bounce@); delivered + complained
 *     (complaint@); soft bounce retried then delivered (softbounce@)  -> sent 4, delivered 3, opened 1, clicked 1, bounced 1, complained 1
 *   today, d2 (campaign): delivered + opened; delivered                 -> sent 2, delivered 2, opened 1
 *   three days ago, d1 (synthetic): delivered                          -> sent 1, delivered 1
 * The hard-bounced email was sent (the API accepted it and the platform handed it to the relay, which refused the
 * recipient): it counts as sent, as in useSend, where every bounce follows a send.
 */
describe('analytics (SPEC 4.10) after a real mix of mail through the mailbox simulator', () => {
  it('GET /v1/analytics: emails sent today and this month', async () => {
    const pastThisMonth = new Date(Date.now() - 3 * DAY).toISOString().slice(0, 7) === today().slice(0, 7);
    expect(await get('/v1/analytics')).toEqual({ day: [{ type: 'email', sent: 6 }], month: [{ type: 'email', sent: pastThisMonth ? 7 : 6 }] });
  });

  it('reputation: hard bounces and complaints per delivered email, for the team and by domain name or id', async () => {
    expect(await get('/v1/analytics/reputation')).toEqual({ delivered: 6, hardBounced: 1, complained: 1, bounceRate: pct(1, 6), complaintRate: pct(1, 6) });
    const one = { delivered: 4, hardBounced: 1, complained: 1, bounceRate: 25, complaintRate: 25 };
    expect(await get(`/v1/analytics/reputation?domain=${d1.name}`)).toEqual(one);
    expect(await get(`/v1/analytics/reputation?domain=${d1.id}`)).toEqual(one);
    expect(await get(`/v1/analytics/reputation?domain=${d2.name}`)).toEqual({ delivered: 2, hardBounced: 0, complained: 0, bounceRate: 0, complaintRate: 0 });
    // A domain that sent nothing: zeros, never NaN.
    expect(await get('/v1/analytics/reputation?domain=nothing.analytics-e2e.test')).toEqual({ delivered: 0, hardBounced: 0, complained: 0, bounceRate: 0, complaintRate: 0 });
  });

  it('time series: a row for every day, oldest first, with short day labels and totals', async () => {
    const week = await get<{ result: (typeof ZERO & { date: string })[]; totalCounts: typeof ZERO }>('/v1/analytics/time-series');
    expect(week.result).toHaveLength(7);
    const label = (d: Date) => `${d.toLocaleString('en-US', { month: 'short', timeZone: 'UTC' })} ${String(d.getUTCDate()).padStart(2, '0')}`;
    expect(week.result.map((r) => r.date)).toEqual(Array.from({ length: 7 }, (_, i) => label(new Date(Date.now() - (6 - i) * DAY))));
    expect(week.result[6]).toEqual({ date: label(new Date()), sent: 6, delivered: 5, opened: 2, clicked: 1, bounced: 1, complained: 1 });
    expect(week.result[3]).toEqual({ date: label(new Date(Date.now() - 3 * DAY)), sent: 1, delivered: 1, opened: 0, clicked: 0, bounced: 0, complained: 0 });
    for (const i of [0, 1, 2, 4, 5]) expect(week.result[i]).toMatchObject(ZERO);
    expect(week.totalCounts).toEqual({ sent: 7, delivered: 6, opened: 2, clicked: 1, bounced: 1, complained: 1 });

    const month = await get<{ result: unknown[]; totalCounts: typeof ZERO }>(`/v1/analytics/time-series?days=30&domain=${d2.name}`);
    expect(month.result).toHaveLength(30);
    expect(month.totalCounts).toEqual({ sent: 2, delivered: 2, opened: 1, clicked: 0, bounced: 0, complained: 0 });
  });

  it('metrics: transactional vs campaign volumes, average rates, emails sent per domain', async () => {
    expect(await get('/v1/metrics')).toEqual({
      period: 'month', transactionalEmails: 5, marketingEmails: 2, totalEmails: 7,
      avgDeliveryRate: pct(6, 7), avgOpenRate: pct(2, 6), avgClickRate: pct(1, 6),
      domains: [{ id: d1.id, name: d1.name, emailsSent: 5 }, { id: d2.id, name: d2.name, emailsSent: 2 }],
    });
    expect(await get('/v1/metrics?period=day')).toMatchObject({ period: 'day', transactionalEmails: 4, marketingEmails: 2, totalEmails: 6 });
    expect(await get('/v1/metrics?period=week')).toMatchObject({ period: 'week', totalEmails: 7 });
  });

  it('stats: absolute counts and percentage rates, over a date range', async () => {
    expect(await get('/v1/stats')).toEqual({
      totalSent: 7, totalDelivered: 6, totalOpened: 2, totalClicked: 1, totalBounced: 1, totalComplained: 1,
      deliveryRate: pct(6, 7), openRate: pct(2, 6), clickRate: pct(1, 6), bounceRate: pct(1, 7), complaintRate: pct(1, 6),
    });
    expect(await get(`/v1/stats?startDate=${today()}&endDate=${new Date().toISOString()}`)).toEqual({
      totalSent: 6, totalDelivered: 5, totalOpened: 2, totalClicked: 1, totalBounced: 1, totalComplained: 1,
      deliveryRate: pct(5, 6), openRate: 40, clickRate: 20, bounceRate: pct(1, 6), complaintRate: 20,
    });
    expect(await get('/v1/stats?endDate=2020-01-01')).toMatchObject({ totalSent: 0, deliveryRate: 0, openRate: 0, bounceRate: 0 });
  });

  it('one domain: GET /v1/domains/{id}/analytics and /stats', async () => {
    expect(await get(`/v1/domains/${d2.id}/analytics`)).toEqual({
      period: 'month', totalSent: 2, totalDelivered: 2, totalOpened: 1, totalClicked: 0, deliveryRate: 100, openRate: 50, clickRate: 0,
    });
    expect(await get(`/v1/domains/${d1.id}/analytics?period=day`)).toEqual({
      period: 'day', totalSent: 4, totalDelivered: 3, totalOpened: 1, totalClicked: 1, deliveryRate: 75, openRate: pct(1, 3), clickRate: pct(1, 3),
    });
    expect(await get(`/v1/domains/${d1.id}/stats`)).toEqual({
      totalSent: 5, totalDelivered: 4, totalOpened: 1, totalClicked: 1, totalBounced: 1, totalComplained: 1,
      deliveryRate: 80, openRate: 25, clickRate: 25, bounceRate: 20, complaintRate: 25,
    });
  });

  it('the useSend SDK paths answer the same, under /v1 and /api/v1', async () => {
    expect(await get(`/api/v1/analytics/email-time-series?days=7&domainId=${d1.id}`)).toEqual(await get(`/v1/analytics/time-series?days=7&domain=${d1.name}`));
    const dflt = await get<{ result: unknown[] }>('/v1/analytics/email-time-series');
    expect(dflt.result).toHaveLength(30);
    expect(await get(`/api/v1/analytics/reputation-metrics?domainId=${d1.id}`)).toEqual(await get(`/v1/analytics/reputation?domain=${d1.id}`));
    expect(await get('/api/v1/analytics/reputation-metrics')).toEqual(await get('/v1/analytics/reputation'));
  });
});

describe('activity and events (SPEC 4.11)', () => {
  /** The team's events newest first, ties by id (descending), as the feed orders them. */
  const allEvents = () => [...streamed.values()].sort((a, b) => b.createdAt.localeCompare(a.createdAt) || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));

  it('GET /v1/activity: every email event newest first, each with its email', async () => {
    const page = await get<{ activity: Record<string, unknown>[]; page: number; limit: number }>('/v1/activity?limit=100');
    expect(page).toMatchObject({ page: 1, limit: 100 });
    expect(page.activity.map((a) => a.id)).toEqual(allEvents().map((e) => e.id));
    const newest = allEvents()[0]!;
    const mail = mails.get((newest.data as { id: string }).id)!;
    expect(page.activity[0]).toEqual({
      id: newest.id, emailId: mail.emailId, status: newest.type.slice(6).toUpperCase(), data: newest.data, teamId, createdAt: newest.createdAt,
      email: { id: mail.emailId, to: mail.to, subject: mail.subject, from: mail.from },
    });
    const defaults = await get<{ activity: unknown[]; page: number; limit: number }>('/v1/activity');
    expect(defaults).toMatchObject({ page: 1, limit: 50 });
    const second = await get<{ activity: { id: string }[] }>('/v1/activity?page=2&limit=5');
    expect(second.activity.map((a) => a.id)).toEqual(allEvents().slice(5, 10).map((e) => e.id));
  });

  it('GET /v1/events: newest first, by status and from a start date', async () => {
    const all = await get<{ events: Record<string, unknown>[] }>('/v1/events?limit=100');
    expect(all.events.map((e) => e.id)).toEqual(allEvents().map((e) => e.id));
    expect(Object.keys(all.events[0]!).sort()).toEqual(['createdAt', 'data', 'emailId', 'id', 'status', 'teamId']);
    const bounced = await get<{ events: { emailId: string; data: { bounce: { type: string } } }[] }>('/v1/events?status=BOUNCED');
    expect(bounced.events.map((e) => [e.emailId, e.data.bounce.type])).toEqual([[ids.bounced, 'Permanent']]);
    const delayed = await get<{ events: { emailId: string }[] }>('/v1/events?status=DELIVERY_DELAYED');
    expect(delayed.events.map((e) => e.emailId)).toEqual([ids.softBounced]);
    const opened = await get<{ events: { emailId: string }[] }>('/v1/events?status=OPENED');
    expect(opened.events.map((e) => e.emailId).sort()).toEqual([ids.delivered, ids.delivered, ids.campaignOpened].sort());
    const recent = await get<{ events: unknown[] }>(`/v1/events?limit=100&startDate=${new Date(Date.now() - DAY).toISOString()}`);
    expect(recent.events).toHaveLength(allEvents().length - 3);
  });

  it('another team sees nothing of it', async () => {
    const other = (await createTeam('Other Analytics Team')).token;
    expect(await get('/v1/stats', other)).toMatchObject({ totalSent: 0, deliveryRate: 0 });
    expect(await get('/v1/activity', other)).toMatchObject({ activity: [] });
    expect(await get('/v1/metrics', other)).toMatchObject({ totalEmails: 0, domains: [] });
  });

  it('a domain-restricted key sees its domain\'s numbers only', async () => {
    const created = await api('POST', '/v1/api-keys', { token, body: { name: 'd2 only', domainId: d2.id } });
    expect(created.status).toBe(200);
    const restricted = (created.body as { token: string }).token;
    expect(await get('/v1/stats', restricted)).toMatchObject({ totalSent: 2, totalDelivered: 2, totalOpened: 1 });
    expect(await get('/v1/analytics', restricted)).toMatchObject({ day: [{ type: 'email', sent: 2 }] });
    expect(await get('/v1/analytics/reputation', restricted)).toEqual(await get(`/v1/analytics/reputation?domain=${d2.id}`));
    expect(await get(`/v1/analytics/reputation?domain=${d2.name}`, restricted)).toMatchObject({ delivered: 2 });
    expect(await api('GET', `/v1/analytics/reputation?domain=${d1.name}`, { token: restricted })).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } });
    expect((await api('GET', `/v1/analytics/email-time-series?domainId=${d1.id}`, { token: restricted })).status).toBe(404);
    expect(await get('/v1/metrics', restricted)).toMatchObject({ totalEmails: 2, domains: [{ id: d2.id, emailsSent: 2 }] });
    const activity = await get<{ activity: { email: { from: string } }[] }>('/v1/activity?limit=100', restricted);
    expect(activity.activity).toHaveLength([ids.campaignOpened, ids.campaign].flatMap((id) => mails.get(id)!.eventIds).length);
    expect(activity.activity.every((a) => a.email.from.endsWith(d2.name + '>'))).toBe(true);
  });
});

describe('validation (400, {code, message})', () => {
  it.each([
    '/v1/analytics/time-series?days=8',
    '/v1/analytics/time-series?days=week',
    '/v1/analytics/email-time-series?days=14',
    '/v1/metrics?period=year',
    '/v1/stats?startDate=garbage',
    '/v1/stats?endDate=2026-13-45',
    '/v1/stats?startDate=2026-02-01&endDate=2026-01-01',
    '/v1/activity?limit=101',
    '/v1/activity?page=0',
    '/v1/events?status=NOPE',
    '/v1/events?startDate=yesterday',
  ])('%s', async (path) => {
    const res = await api('GET', path, { token });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'BAD_REQUEST', message: expect.any(String) });
  });

  it('needs a FULL key', async () => {
    expect((await api('GET', '/v1/analytics')).status).toBe(401);
    const sending = await api('POST', '/v1/api-keys', { token, body: { name: 'sender', permission: 'SENDING' } });
    expect((await api('GET', '/v1/stats', { token: (sending.body as { token: string }).token })).status).toBe(403);
  });
});

describe('idempotency: replaying the events changes nothing', () => {
  it('the same events again (same ids, new message ids), and a full replay of the stream by reset consumers', async () => {
    const before = await everything();
    const events = [...streamed.values()];
    // Same message ids (the relay publishes with the event id as Nats-Msg-Id): dropped by the server's dedup window.
    for (const e of events) await js.publish(subjectFor(e.type), encodeEvent(e), { msgID: e.id });
    // New message ids, same event ids (what a republish after the dedup window looks like): analytics' own idempotency.
    for (const e of events) await js.publish(subjectFor(e.type), encodeEvent(e), { msgID: `${e.id}.replayed` });
    await consumersIdle();
    expect(await everything()).toEqual(before);

    // Redelivery of everything: the consumers are deleted while analytics is down and start over from the stream's start.
    await stopChild('analytics');
    for (const d of DURABLES) await jsm.consumers.delete(EVENT_STREAM, d);
    await startChild('analytics');
    await consumersIdle();
    expect(await everything()).toEqual(before);
  });
});
