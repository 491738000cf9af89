import { randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createEvent, encodeEvent, EVENT_STREAM, subjectFor, type EventEnvelope } from '@mailfleet/kit';
import { startChild, stopChild } from '@mailfleet/testkit';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiAt, createTeam, gatewayUrl } from './helpers.js';

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
 * The mail a scripted mix produces, as the events the emails service will
 * publish for it (SPEC 6.3): while that service is being built, this driver
 * publishes them to JetStream itself. Switching to real sends means replacing
 * `send` with POST /v1/emails to the mailbox simulator's addresses (the
 * outcome chosen by the recipient) and `open`/`click` with fetches of the
 * tracking links; the expectations below stay as they are.
 */
interface Mail {
  readonly emailId: string;
  readonly events: EventEnvelope[];
}
type Outcome = 'delivered' | 'hard-bounce' | 'soft-bounce';
let tick = 0;
function mailDriver(team: string) {
  const publish = async (e: EventEnvelope, msgID = e.id) => {
    await js.publish(subjectFor(e.type), encodeEvent(e), { msgID });
  };
  const event = (m: Mail, type: string, extra: Record<string, unknown>, data: Record<string, unknown>, when: Date) => {
    tick += 1;
    const at = new Date(when.getTime() + tick);
    const e = createEvent(type, team, { ...data, status: type.slice('email.'.length).toUpperCase(), occurredAt: at.toISOString(), ...extra }, at);
    m.events.push(e);
    return publish(e);
  };
  return {
    publish,
    async send(opts: { domain: { id: string; name: string }; campaignId?: string; outcome: Outcome; complain?: boolean; opens?: number; click?: boolean; daysAgo?: number }): Promise<Mail> {
      const when = new Date(Date.now() - (opts.daysAgo ?? 0) * DAY);
      const m: Mail = { emailId: `em_${randomBytes(8).toString('hex')}`, events: [] };
      const data = {
        id: m.emailId, from: `Shop <shop@${opts.domain.name}>`, to: ['reader@mailbox.simulator.test'], subject: `Hello ${m.emailId}`,
        domainId: opts.domain.id, ...(opts.campaignId ? { campaignId: opts.campaignId } : {}),
      };
      await event(m, 'email.queued', {}, data, when);
      await event(m, 'email.sent', {}, data, when);
      if (opts.outcome === 'delivered') await event(m, 'email.delivered', {}, data, when);
      else {
        const bounce = opts.outcome === 'hard-bounce'
          ? { type: 'Permanent', subType: 'General', message: '550 5.1.1 user unknown' }
          : { type: 'Transient', subType: 'MailboxFull', message: '452 4.2.2 mailbox full' };
        await event(m, 'email.bounced', { bounce }, data, when);
      }
      for (let i = 0; i < (opts.opens ?? 0); i++) {
        await event(m, 'email.opened', { open: { timestamp: when.toISOString(), userAgent: 'Mozilla/5.0', ip: '192.0.2.1', platform: 'macOS' } }, data, when);
      }
      if (opts.click) {
        await event(m, 'email.clicked', { click: { timestamp: when.toISOString(), url: 'https://shop.example/offer', userAgent: 'Mozilla/5.0', ip: '192.0.2.1', platform: 'macOS' } }, data, when);
      }
      if (opts.complain) await event(m, 'email.complained', {}, data, when);
      return m;
    },
  };
}

async function durablesIdle(timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const infos = await Promise.all(DURABLES.map((d) => jsm.consumers.info(EVENT_STREAM, d)));
    if (infos.every((i) => i.num_pending === 0 && i.num_ack_pending === 0)) return;
    if (Date.now() > deadline) throw new Error(`analytics consumers still busy: ${JSON.stringify(infos.map((i) => [i.name, i.num_pending, i.num_ack_pending]))}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function get<T = Record<string, unknown>>(path: string, as = token): Promise<T> {
  const res = await api('GET', path, { token: as });
  expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body as T;
}

async function addDomain(label: string): Promise<{ id: string; name: string }> {
  const res = await api('POST', '/v1/domains', { token, body: { name: `${label}-${randomBytes(4).toString('hex')}.analytics-e2e.test`, region: 'us-east-1' } });
  expect(res.status).toBe(200);
  return res.body as { id: string; name: string };
}

const mails: Mail[] = [];

beforeAll(async () => {
  nc = await connect({ servers: inject('natsUrl') });
  js = jetstream(nc);
  jsm = await jetstreamManager(nc);
  ({ teamId, token } = await createTeam('Analytics Team'));
  // Real domains through the API: their domain.created events give analytics the names.
  d1 = await addDomain('one');
  d2 = await addDomain('two');
  const mail = mailDriver(teamId);
  mails.push(
    await mail.send({ domain: d1, outcome: 'delivered', opens: 2, click: true }),
    await mail.send({ domain: d1, outcome: 'hard-bounce' }),
    await mail.send({ domain: d1, outcome: 'delivered', complain: true }),
    await mail.send({ domain: d1, outcome: 'soft-bounce' }),
    await mail.send({ domain: d2, campaignId: 'cmp_e2e', outcome: 'delivered', opens: 1 }),
    await mail.send({ domain: d2, campaignId: 'cmp_e2e', outcome: 'delivered' }),
    await mail.send({ domain: d1, outcome: 'delivered', daysAgo: 3 }),
  );
  // The numbers are there once every event is counted and both domains' names have arrived (through the domains outbox).
  await durablesIdle();
  const deadline = Date.now() + 60_000;
  for (;;) {
    const names = (await get<{ domains: { name: string }[] }>('/v1/metrics')).domains.map((d) => d.name);
    if (names.includes(d1.name) && names.includes(d2.name)) break;
    if (Date.now() > deadline) throw new Error(`domain names never reached analytics: ${names.join(', ')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
});
afterAll(async () => {
  await nc?.close();
});

const today = () => new Date().toISOString().slice(0, 10);
const ZERO = { sent: 0, delivered: 0, opened: 0, clicked: 0, bounced: 0, complained: 0 };

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

describe('analytics (SPEC 4.10) after a scripted mix of mail', () => {
  it('GET /v1/analytics: emails sent today and this month', async () => {
    const e7ThisMonth = new Date(Date.now() - 3 * DAY).toISOString().slice(0, 7) === today().slice(0, 7);
    expect(await get('/v1/analytics')).toEqual({ day: [{ type: 'email', sent: 6 }], month: [{ type: 'email', sent: e7ThisMonth ? 7 : 6 }] });
  });

  it('reputation: hard bounces and complaints per delivered email, for the team and by domain name or id', async () => {
    expect(await get('/v1/analytics/reputation')).toEqual({ delivered: 5, hardBounced: 1, complained: 1, bounceRate: 20, complaintRate: 20 });
    const one = { delivered: 3, hardBounced: 1, complained: 1, bounceRate: (1 / 3) * 100, complaintRate: (1 / 3) * 100 };
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
    expect(week.result[6]).toEqual({ date: label(new Date()), sent: 6, delivered: 4, opened: 2, clicked: 1, bounced: 2, complained: 1 });
    expect(week.result[3]).toMatchObject({ sent: 1, delivered: 1, opened: 0 });
    for (const i of [0, 1, 2, 4, 5]) expect(week.result[i]).toMatchObject(ZERO);
    expect(week.totalCounts).toEqual({ sent: 7, delivered: 5, opened: 2, clicked: 1, bounced: 2, complained: 1 });

    const month = await get<{ result: unknown[]; totalCounts: typeof ZERO }>(`/v1/analytics/time-series?days=30&domain=${d2.name}`);
    expect(month.result).toHaveLength(30);
    expect(month.totalCounts).toEqual({ sent: 2, delivered: 2, opened: 1, clicked: 0, bounced: 0, complained: 0 });
  });

  it('metrics: transactional vs campaign volumes, average rates, emails sent per domain', async () => {
    expect(await get('/v1/metrics')).toEqual({
      period: 'month', transactionalEmails: 5, marketingEmails: 2, totalEmails: 7,
      avgDeliveryRate: (5 / 7) * 100, avgOpenRate: 40, avgClickRate: 20,
      domains: [{ id: d1.id, name: d1.name, emailsSent: 5 }, { id: d2.id, name: d2.name, emailsSent: 2 }],
    });
    expect(await get('/v1/metrics?period=day')).toMatchObject({ period: 'day', transactionalEmails: 4, marketingEmails: 2, totalEmails: 6 });
    expect(await get('/v1/metrics?period=week')).toMatchObject({ period: 'week', totalEmails: 7 });
  });

  it('stats: absolute counts and percentage rates, over a date range', async () => {
    expect(await get('/v1/stats')).toEqual({
      totalSent: 7, totalDelivered: 5, totalOpened: 2, totalClicked: 1, totalBounced: 2, totalComplained: 1,
      deliveryRate: (5 / 7) * 100, openRate: 40, clickRate: 20, bounceRate: (2 / 7) * 100, complaintRate: 20,
    });
    expect(await get(`/v1/stats?startDate=${today()}&endDate=${new Date().toISOString()}`)).toMatchObject({
      totalSent: 6, totalDelivered: 4, deliveryRate: (4 / 6) * 100, openRate: 50, clickRate: 25, bounceRate: (2 / 6) * 100, complaintRate: 25,
    });
    expect(await get('/v1/stats?endDate=2020-01-01')).toMatchObject({ totalSent: 0, deliveryRate: 0, openRate: 0, bounceRate: 0 });
  });

  it('one domain: GET /v1/domains/{id}/analytics and /stats', async () => {
    expect(await get(`/v1/domains/${d2.id}/analytics`)).toEqual({
      period: 'month', totalSent: 2, totalDelivered: 2, totalOpened: 1, totalClicked: 0, deliveryRate: 100, openRate: 50, clickRate: 0,
    });
    expect(await get(`/v1/domains/${d1.id}/analytics?period=day`)).toEqual({
      period: 'day', totalSent: 4, totalDelivered: 2, totalOpened: 1, totalClicked: 1, deliveryRate: 50, openRate: 50, clickRate: 50,
    });
    expect(await get(`/v1/domains/${d1.id}/stats`)).toEqual({
      totalSent: 5, totalDelivered: 3, totalOpened: 1, totalClicked: 1, totalBounced: 2, totalComplained: 1,
      deliveryRate: 60, openRate: (1 / 3) * 100, clickRate: (1 / 3) * 100, bounceRate: 40, complaintRate: (1 / 3) * 100,
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
  const allEvents = () => mails.flatMap((m) => m.events).sort((a, b) => b.createdAt.localeCompare(a.createdAt));

  it('GET /v1/activity: every email event newest first, each with its email', async () => {
    const page = await get<{ activity: Record<string, unknown>[]; page: number; limit: number }>('/v1/activity?limit=100');
    expect(page).toMatchObject({ page: 1, limit: 100 });
    expect(page.activity.map((a) => a.id)).toEqual(allEvents().map((e) => e.id));
    const newest = allEvents()[0]!;
    expect(page.activity[0]).toEqual({
      id: newest.id, emailId: (newest.data as { id: string }).id, status: newest.type.slice(6).toUpperCase(), data: newest.data, teamId, createdAt: newest.createdAt,
      email: { id: (newest.data as { id: string }).id, to: ['reader@mailbox.simulator.test'], subject: (newest.data as { subject: string }).subject, from: (newest.data as { from: string }).from },
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
    const bounced = await get<{ events: { status: string; data: { bounce: { type: string } } }[] }>('/v1/events?status=BOUNCED');
    expect(bounced.events.map((e) => e.data.bounce.type).sort()).toEqual(['Permanent', 'Transient']);
    const opened = await get<{ events: { emailId: string }[] }>('/v1/events?status=OPENED');
    expect(opened.events).toHaveLength(3);
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
    expect(activity.activity).toHaveLength(mails.slice(4, 6).flatMap((m) => m.events).length);
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
    const mail = mailDriver(teamId);
    const events = mails.flatMap((m) => m.events);
    // Same message ids: dropped by the server's dedup window.
    for (const e of events) await mail.publish(e);
    // New message ids, same event ids (what a republish after the dedup window looks like): analytics' own idempotency.
    for (const e of events) await mail.publish(e, `${e.id}.replayed`);
    await durablesIdle();
    expect(await everything()).toEqual(before);

    // Redelivery of everything: the consumers are deleted while analytics is down and start over from the stream's start.
    await stopChild('analytics');
    for (const d of DURABLES) await jsm.consumers.delete(EVENT_STREAM, d);
    await startChild('analytics');
    await durablesIdle();
    expect(await everything()).toEqual(before);
  });
});
