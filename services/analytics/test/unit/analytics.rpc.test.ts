import { createEvent, createLogger, type BatchOutcome, type EventEnvelope } from '@mailfleet/kit';
import { analyticsV1, emailsV1 } from '@mailfleet/proto';
import { beforeEach, describe, expect, it } from 'vitest';
import { createDomainEventsHandler } from '../../src/events/domain-events.consumer.js';
import { createEmailEventsHandler } from '../../src/events/email-events.consumer.js';
import { createAnalyticsHandlers } from '../../src/rpc/analytics.rpc.js';
import { fakeDomains, fakeFeed, fakeRollups } from './fakes.js';

const log = createLogger({ service: 'analytics-unit', level: 'silent' });
const meta = { deliveryCount: 1, log };
const NOW = new Date('2026-05-10T12:00:00.000Z');
const T = 'team_1';
const ctx = { requestId: 'r', log, remainingMs: () => Infinity };
const P = analyticsV1.Period;

let rollups: ReturnType<typeof fakeRollups>;
let feed: ReturnType<typeof fakeFeed>;
let domains: ReturnType<typeof fakeDomains>;
let rpc: ReturnType<typeof createAnalyticsHandlers>;
let handle: (e: EventEnvelope) => Promise<BatchOutcome | void>;
let handleBatch: (es: readonly EventEnvelope[]) => Promise<BatchOutcome | void>;

const daysAgo = (n: number, h = 0) => new Date(NOW.getTime() - n * 86_400_000 + h * 60_000);
let seq = 0;
function emailEvent(type: string, emailId: string, extra: Record<string, unknown> = {}, at = daysAgo(0), teamId = T): EventEnvelope {
  seq += 1;
  return createEvent(type, teamId, {
    id: emailId, status: type.slice(6).toUpperCase(), from: 'App <app@a.test>', to: ['x@r.test'], subject: `Subject ${emailId}`,
    occurredAt: at.toISOString(), ...extra,
  }, new Date(at.getTime() + seq));
}

beforeEach(async () => {
  rollups = fakeRollups();
  feed = fakeFeed();
  domains = fakeDomains([
    { teamId: T, id: 'dom_a', name: 'a.test', deleted: false },
    { teamId: T, id: 'dom_b', name: 'b.test', deleted: false },
    { teamId: T, id: 'dom_c', name: 'c.test', deleted: false },
    { teamId: T, id: 'dom_old', name: 'old.test', deleted: true },
  ]);
  rpc = createAnalyticsHandlers({ rollups, feed, domains, now: () => NOW });
  const h = createEmailEventsHandler({ rollups, feed });
  handleBatch = (es) => h(es.map((event) => ({ event, deliveryCount: 1 })), { log });
  handle = (e) => handleBatch([e]);
  const a = { domainId: 'dom_a' };
  const b = { domainId: 'dom_b', campaignId: 'cmp_1' };
  const script: EventEnvelope[] = [
    emailEvent('email.queued', 'em_1', a, daysAgo(0, 1)),
    emailEvent('email.sent', 'em_1', a, daysAgo(0, 2)),
    emailEvent('email.delivered', 'em_1', a, daysAgo(0, 3)),
    emailEvent('email.delivered', 'em_1', { ...a, to: ['second@r.test'] }, daysAgo(0, 3)),
    emailEvent('email.opened', 'em_1', a, daysAgo(0, 4)),
    emailEvent('email.opened', 'em_1', a, daysAgo(0, 5)),
    emailEvent('email.clicked', 'em_1', a, daysAgo(0, 6)),
    emailEvent('email.sent', 'em_2', a, daysAgo(0, 2)),
    emailEvent('email.bounced', 'em_2', { ...a, bounce: { type: 'Permanent', subType: 'General', message: '550' } }, daysAgo(0, 3)),
    emailEvent('email.sent', 'em_3', b, daysAgo(0, 2)),
    emailEvent('email.delivered', 'em_3', b, daysAgo(0, 3)),
    emailEvent('email.complained', 'em_3', b, daysAgo(0, 4)),
    emailEvent('email.sent', 'em_4', {}, daysAgo(0, 2)),
    emailEvent('email.bounced', 'em_4', { bounce: { type: 'Transient', subType: 'MailboxFull', message: '452' } }, daysAgo(0, 3)),
    emailEvent('email.sent', 'em_5', b, daysAgo(3)),
    emailEvent('email.delivered', 'em_5', b, daysAgo(3, 1)),
    emailEvent('email.sent', 'em_6', { domainId: 'dom_old' }, daysAgo(6)),
    emailEvent('email.sent', 'em_7', a, daysAgo(40)),
    emailEvent('email.delivered', 'em_7', a, daysAgo(40, 1)),
    emailEvent('email.sent', 'em_x', a, daysAgo(0, 2), 'team_other'),
  ];
  // Half one by one, half as one batch: both ways count the same.
  for (const e of script.slice(0, 7)) await handle(e);
  await handleBatch(script.slice(7));
});

describe('email events -> rollups (via the handler)', () => {
  it('counts each email once per counter, and a replay changes nothing', async () => {
    const before = JSON.stringify([...rollups.rows]);
    const again = [...feed.items];
    for (const i of again) await handle({ id: i.id, type: `email.${i.status.toLowerCase()}`, createdAt: i.createdAt.toISOString(), teamId: i.teamId, data: i.data });
    expect(JSON.stringify([...rollups.rows])).toBe(before);
    expect(feed.items).toHaveLength(again.length);
  });

  it('terminates malformed events as poison', async () => {
    const noId = createEvent('email.sent', T, { to: ['x'] });
    const bad = { id: 'evt_bad', type: 'email.sent', createdAt: 'never', teamId: T, data: { id: 'em' } };
    const good = emailEvent('email.sent', 'em_new', { domainId: 'dom_a' });
    const outcome = await handleBatch([noId, bad, good]);
    // Only the malformed ones are terminated; the good one beside them is counted and in the feed.
    expect([...(outcome?.poison?.keys() ?? [])]).toEqual([noId.id, 'evt_bad']);
    expect(feed.items.map((i) => i.id)).toContain(good.id);
    expect(feed.items.map((i) => i.id)).not.toContain('evt_bad');
  });

  it('projects domain events and terminates malformed ones', async () => {
    const h = createDomainEventsHandler({ domains });
    const one = (e: EventEnvelope) => h([{ event: e, deliveryCount: 1 }], meta);
    await one(createEvent('domain.created', T, { id: 'dom_n', name: 'New.Test' }));
    expect(await domains.resolve(T, 'new.test')).toBe('dom_n');
    const bad = createEvent('domain.updated', T, { name: 'x.test' });
    expect([...((await one(bad))?.poison?.keys() ?? [])]).toEqual([bad.id]);
    await one(createEvent('contact.created', T, {}));
    expect(domains.applied).toHaveLength(1);
  });

  it('a batch writes each domain once, with the fact that wins (newest; a deletion wins a tie)', async () => {
    const h = createDomainEventsHandler({ domains });
    const at = new Date('2026-05-10T10:00:00Z');
    const later = new Date(at.getTime() + 1_000);
    const before = domains.applied.length;
    const events = [
      createEvent('domain.updated', T, { id: 'dom_m', name: 'late.test' }, later),
      createEvent('domain.created', T, { id: 'dom_m', name: 'early.test' }, at),
      createEvent('domain.updated', T, { id: 'dom_k', name: 'k.test' }, at),
      createEvent('domain.deleted', T, { id: 'dom_k', name: 'k.test' }, at),
    ];
    await h(events.map((event) => ({ event, deliveryCount: 1 })), meta);
    const applied = domains.applied.slice(before);
    expect(applied).toHaveLength(2);
    expect(applied.find((f) => f.id === 'dom_m')?.name).toBe('late.test');
    expect(applied.find((f) => f.id === 'dom_k')?.deleted).toBe(true);
  });
});

describe('reads', () => {
  it('GET /v1/analytics: sent today and this calendar month', async () => {
    // May 10: em_5 (3 days ago) and em_6 (6 days ago) are this month, em_7 (40 days ago) is not.
    expect(await rpc.getAnalytics({ teamId: T }, ctx)).toEqual({ day: [{ type: 'email', sent: 4 }], month: [{ type: 'email', sent: 6 }] });
    expect(await rpc.getAnalytics({ teamId: T, domainId: 'dom_b' }, ctx)).toEqual({ day: [{ type: 'email', sent: 1 }], month: [{ type: 'email', sent: 2 }] });
  });

  it('reputation: all time, hard bounces and complaints per delivered email, by domain name or id', async () => {
    expect(await rpc.getReputation({ teamId: T }, ctx)).toEqual({
      delivered: 4, hardBounced: 1, complained: 1, bounceRate: 25, complaintRate: 25,
    });
    const a = { delivered: 2, hardBounced: 1, complained: 0, bounceRate: 50, complaintRate: 0 };
    expect(await rpc.getReputation({ teamId: T, domain: 'A.test' }, ctx)).toEqual(a);
    expect(await rpc.getReputation({ teamId: T, domain: 'dom_a' }, ctx)).toEqual(a);
    expect(await rpc.getReputation({ teamId: T, domain: 'nowhere.test' }, ctx)).toEqual({ delivered: 0, hardBounced: 0, complained: 0, bounceRate: 0, complaintRate: 0 });
    expect(await rpc.getReputation({ teamId: 'team_empty' }, ctx)).toMatchObject({ bounceRate: 0, complaintRate: 0 });
  });

  it('time series: a row per day, oldest first, ending today, with totals', async () => {
    const week = await rpc.getTimeSeries({ teamId: T, days: 0 }, ctx);
    expect(week.result.map((r) => r.date)).toEqual(['May 04', 'May 05', 'May 06', 'May 07', 'May 08', 'May 09', 'May 10']);
    expect(week.result[0]).toEqual({ date: 'May 04', sent: 1, delivered: 0, opened: 0, clicked: 0, bounced: 0, complained: 0 });
    expect(week.result[3]).toEqual({ date: 'May 07', sent: 1, delivered: 1, opened: 0, clicked: 0, bounced: 0, complained: 0 });
    expect(week.result[6]).toEqual({ date: 'May 10', sent: 4, delivered: 2, opened: 1, clicked: 1, bounced: 2, complained: 1 });
    expect(week.totalCounts).toEqual({ sent: 6, delivered: 3, opened: 1, clicked: 1, bounced: 2, complained: 1 });
    const month = await rpc.getTimeSeries({ teamId: T, days: 30, domain: 'b.test' }, ctx);
    expect(month.result).toHaveLength(30);
    expect(month.result[0]?.date).toBe('Apr 11');
    expect(month.totalCounts).toEqual({ sent: 2, delivered: 2, opened: 0, clicked: 0, bounced: 0, complained: 1 });
    await expect(rpc.getTimeSeries({ teamId: T, days: 8 }, ctx)).rejects.toThrow(/7 or 30/);
  });

  it('metrics: transactional vs campaign, email-weighted rates, every live domain plus deleted ones that sent', async () => {
    const m = await rpc.getMetrics({ teamId: T, period: P.PERIOD_UNSPECIFIED }, ctx);
    expect(m).toEqual({
      period: P.PERIOD_MONTH, transactionalEmails: 4, marketingEmails: 2, totalEmails: 6,
      avgDeliveryRate: 50, avgOpenRate: (1 / 3) * 100, avgClickRate: (1 / 3) * 100,
      domains: [
        { id: 'dom_a', name: 'a.test', emailsSent: 2 },
        { id: 'dom_b', name: 'b.test', emailsSent: 2 },
        { id: 'dom_old', name: 'old.test', emailsSent: 1 },
        { id: 'dom_c', name: 'c.test', emailsSent: 0 },
      ],
    });
    const day = await rpc.getMetrics({ teamId: T, period: P.PERIOD_DAY }, ctx);
    expect(day).toMatchObject({ period: P.PERIOD_DAY, transactionalEmails: 3, marketingEmails: 1, totalEmails: 4 });
    expect(day.domains.map((d) => d.id)).toEqual(['dom_a', 'dom_b', 'dom_c']);
    const only = await rpc.getMetrics({ teamId: T, period: P.PERIOD_WEEK, domainId: 'dom_b' }, ctx);
    expect(only).toMatchObject({ transactionalEmails: 0, marketingEmails: 2, domains: [{ id: 'dom_b', name: 'b.test', emailsSent: 2 }] });
    await expect(rpc.getMetrics({ teamId: T, period: 42 as analyticsV1.Period }, ctx)).rejects.toThrow(/period/);
  });

  it('stats: absolute counts and percentages over whole days; a start after the end is refused', async () => {
    const all = (await rpc.getStats({ teamId: T }, ctx)).stats;
    expect(all).toEqual({
      totalSent: 7, totalDelivered: 4, totalOpened: 1, totalClicked: 1, totalBounced: 2, totalComplained: 1,
      deliveryRate: (4 / 7) * 100, openRate: 25, clickRate: 25, bounceRate: (2 / 7) * 100, complaintRate: 25,
    });
    // From the day of the start (00:00 widened), so May 7 counts.
    const recent = (await rpc.getStats({ teamId: T, startDate: new Date('2026-05-07T23:00:00Z'), endDate: new Date('2026-05-09T00:00:00Z') }, ctx)).stats;
    expect(recent).toMatchObject({ totalSent: 1, totalDelivered: 1, deliveryRate: 100 });
    await expect(rpc.getStats({ teamId: T, startDate: daysAgo(1), endDate: daysAgo(2) }, ctx)).rejects.toThrow(/after/);
  });

  it('one domain: analytics over a period and stats over a range', async () => {
    expect(await rpc.getDomainAnalytics({ teamId: T, domainId: 'dom_a', period: P.PERIOD_MONTH }, ctx)).toEqual({
      period: P.PERIOD_MONTH, totalSent: 2, totalDelivered: 1, totalOpened: 1, totalClicked: 1, deliveryRate: 50, openRate: 100, clickRate: 100,
    });
    expect((await rpc.getDomainStats({ teamId: T, domainId: 'dom_a' }, ctx)).stats).toMatchObject({ totalSent: 3, totalDelivered: 2, totalBounced: 1, bounceRate: (1 / 3) * 100 });
    expect(await rpc.getDomainAnalytics({ teamId: T, domainId: 'dom_c', period: P.PERIOD_DAY }, ctx)).toMatchObject({ totalSent: 0, deliveryRate: 0, openRate: 0 });
    await expect(rpc.getDomainAnalytics({ teamId: T, domainId: '', period: P.PERIOD_DAY }, ctx)).rejects.toThrow(/domain_id/);
  });

  it('activity and events: newest first, paged, filtered, the team\'s own only', async () => {
    const first = await rpc.listActivity({ teamId: T, page: 0, limit: 0 }, ctx);
    expect(first).toMatchObject({ page: 1, limit: 50 });
    expect(first.activity).toHaveLength(19);
    const times = first.activity.map((a) => a.event!.createdAt!.getTime());
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    expect(first.activity[0]).toMatchObject({
      event: { emailId: 'em_1', status: emailsV1.EmailStatus.EMAIL_STATUS_CLICKED, teamId: T },
      email: { id: 'em_1', to: ['x@r.test'], subject: 'Subject em_1', from: 'App <app@a.test>' },
    });
    const p2 = await rpc.listActivity({ teamId: T, page: 2, limit: 5 }, ctx);
    expect(p2.activity.map((a) => a.event!.id)).toEqual(first.activity.slice(5, 10).map((a) => a.event!.id));

    const bounced = await rpc.listEvents({ teamId: T, page: 1, limit: 10, status: emailsV1.EmailStatus.EMAIL_STATUS_BOUNCED }, ctx);
    expect(bounced.events.map((e) => e.emailId).sort()).toEqual(['em_2', 'em_4']);
    expect(bounced.events[0]?.data).toHaveProperty('bounce');
    const recent = await rpc.listEvents({ teamId: T, page: 1, limit: 100, status: 0, startDate: daysAgo(4) }, ctx);
    expect(recent.events).toHaveLength(16);
    expect((await rpc.listEvents({ teamId: 'team_other', page: 1, limit: 100, status: 0 }, ctx)).events).toHaveLength(1);
    await expect(rpc.listEvents({ teamId: T, page: 1, limit: 101, status: 0 }, ctx)).rejects.toThrow(/limit/);
    await expect(rpc.listEvents({ teamId: T, page: 1, limit: 10, status: 99 as emailsV1.EmailStatus }, ctx)).rejects.toThrow(/status/);
  });
});
