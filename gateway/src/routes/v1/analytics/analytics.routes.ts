import { analyticsV1, emailsV1 } from '@mailfleet/proto';
import type { FastifyInstance } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf, type Principal } from '../../../plugins/auth.plugin.js';
import { GatewayError } from '../../../plugins/errors.plugin.js';
import { iso } from '../../../schemas/common.js';
import {
  activityItem, analyticsResponse, EMAIL_STATUSES, emailEvent, metricsResponse, pageQuery, reputationResponse, STAT_FIELDS, statsResponse,
  timeSeriesResponse, type EmailStatusName,
} from './analytics.schemas.js';

const TAGS = { analytics: ['Analytics'], feeds: ['Activity and events'] };

type PeriodName = 'day' | 'week' | 'month';
const PERIODS: Record<PeriodName, analyticsV1.Period> = {
  day: analyticsV1.Period.PERIOD_DAY, week: analyticsV1.Period.PERIOD_WEEK, month: analyticsV1.Period.PERIOD_MONTH,
};
function periodName(p: analyticsV1.Period, asked: PeriodName): PeriodName {
  return (Object.entries(PERIODS) as [PeriodName, analyticsV1.Period][]).find(([, v]) => v === p)?.[0] ?? asked;
}

function statusName(s: emailsV1.EmailStatus): string {
  return emailsV1.emailStatusToJSON(s).replace(/^EMAIL_STATUS_/, '');
}

const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2})?)?$/;
/** A Date from an optional ISO 8601 query value, or a 400 naming the field. */
function isoDate(value: string | undefined, field: string): Date | undefined {
  if (value === undefined || value === '') return undefined;
  const d = new Date(value);
  if (!ISO_DATE.test(value.trim()) || Number.isNaN(d.getTime())) {
    throw new GatewayError(400, `Invalid ${field}: expected an ISO 8601 date such as 2026-01-31 or 2026-01-31T12:00:00Z`);
  }
  return d;
}

function toEvent(ev: emailsV1.EmailEvent) {
  return { id: ev.id, emailId: ev.emailId, status: statusName(ev.status), data: ev.data ?? {}, teamId: ev.teamId, createdAt: iso(ev.createdAt) };
}

const totals = (c: analyticsV1.TotalCounts | undefined) => ({
  sent: c?.sent ?? 0, delivered: c?.delivered ?? 0, opened: c?.opened ?? 0, clicked: c?.clicked ?? 0, bounced: c?.bounced ?? 0, complained: c?.complained ?? 0,
});

const domainQuery = { type: 'string', minLength: 1, maxLength: 300 } as const;

/**
 * SPEC 4.10 (analytics, reputation, time series, metrics, statistics) and
 * 4.11 (activity and events), plus the useSend SDK's analytics paths as
 * aliases. Every figure comes from the analytics service's daily rollups.
 * Errors are `{code, message}`; invalid parameters are 400. A domain-
 * restricted key sees only its domain's numbers and events; naming another
 * domain is 404.
 */
export function analyticsRoutes(deps: { upstreams: Upstreams }) {
  const { analytics, domains } = deps.upstreams;

  /** The domain filter to apply: the asked one, narrowed to (and checked against) a restricted key's domain. */
  async function domainScope(p: Principal, asked: string | undefined): Promise<string | undefined> {
    if (!p.domainId) return asked || undefined;
    if (!asked || asked === p.domainId) return p.domainId;
    const own = (await domains.call.getDomain({ teamId: p.teamId, domainId: p.domainId })).domain;
    if (own && own.name === asked.trim().toLowerCase()) return p.domainId;
    throw new GatewayError(404, 'Domain not found');
  }

  return async (app: FastifyInstance): Promise<void> => {
    app.get('/analytics', {
      schema: { tags: TAGS.analytics, summary: 'Emails sent today and this month (UTC)', response: { 200: analyticsResponse } },
    }, async (req) => {
      const p = principalOf(req);
      const r = await analytics.call.getAnalytics({ teamId: p.teamId, domainId: p.domainId });
      return { day: r.day.map((d) => ({ type: d.type, sent: d.sent })), month: r.month.map((d) => ({ type: d.type, sent: d.sent })) };
    });

    async function reputation(p: Principal, domain: string | undefined) {
      const r = await analytics.call.getReputation({ teamId: p.teamId, domain: await domainScope(p, domain) });
      return { delivered: r.delivered, hardBounced: r.hardBounced, complained: r.complained, bounceRate: r.bounceRate, complaintRate: r.complaintRate };
    }

    app.get<{ Querystring: { domain?: string } }>('/analytics/reputation', {
      schema: {
        tags: TAGS.analytics,
        summary: 'Deliveries, hard bounces and complaints over all time, with their rates',
        querystring: { type: 'object', properties: { domain: { ...domainQuery, description: 'only this domain, by name or id' } } },
        response: { 200: reputationResponse },
      },
    }, async (req) => reputation(principalOf(req), req.query.domain));

    app.get<{ Querystring: { domainId?: string } }>('/analytics/reputation-metrics', {
      schema: {
        tags: TAGS.analytics,
        summary: 'Reputation (useSend SDK path; same as /v1/analytics/reputation)',
        querystring: { type: 'object', properties: { domainId: { ...domainQuery, description: 'only this domain' } } },
        response: { 200: reputationResponse },
      },
    }, async (req) => reputation(principalOf(req), req.query.domainId));

    async function timeSeries(p: Principal, days: number, domain: string | undefined) {
      const r = await analytics.call.getTimeSeries({ teamId: p.teamId, days, domain: await domainScope(p, domain) });
      return { result: r.result.map((d) => ({ date: d.date, ...totals(d) })), totalCounts: totals(r.totalCounts) };
    }

    app.get<{ Querystring: { days: number; domain?: string } }>('/analytics/time-series', {
      schema: {
        tags: TAGS.analytics,
        summary: 'Daily counts of the last 7 or 30 days (UTC), days without email included',
        querystring: {
          type: 'object',
          properties: {
            days: { type: 'integer', enum: [7, 30], default: 7, description: '7 or 30' },
            domain: { ...domainQuery, description: 'only this domain, by name or id' },
          },
        },
        response: { 200: timeSeriesResponse },
      },
    }, async (req) => timeSeries(principalOf(req), req.query.days, req.query.domain));

    app.get<{ Querystring: { days: number; domainId?: string } }>('/analytics/email-time-series', {
      schema: {
        tags: TAGS.analytics,
        summary: 'Daily counts (useSend SDK path; as /v1/analytics/time-series, but `days` defaults to 30 as useSend does)',
        querystring: {
          type: 'object',
          properties: {
            days: { type: 'integer', enum: [7, 30], default: 30, description: '7 or 30' },
            domainId: { ...domainQuery, description: 'only this domain' },
          },
        },
        response: { 200: timeSeriesResponse },
      },
    }, async (req) => timeSeries(principalOf(req), req.query.days, req.query.domainId));

    app.get<{ Querystring: { period: PeriodName } }>('/metrics', {
      schema: {
        tags: TAGS.analytics,
        summary: 'Volumes (transactional and campaign), average rates and emails sent per domain over a period',
        description: 'Periods are whole UTC days ending today: day = today, week = the last 7 days, month = the last 30 days.',
        querystring: { type: 'object', properties: { period: { type: 'string', enum: ['day', 'week', 'month'], default: 'month' } } },
        response: { 200: metricsResponse },
      },
    }, async (req) => {
      const p = principalOf(req);
      const asked = req.query.period;
      const r = await analytics.call.getMetrics({ teamId: p.teamId, period: PERIODS[asked], domainId: p.domainId });
      return {
        period: periodName(r.period, asked), transactionalEmails: r.transactionalEmails, marketingEmails: r.marketingEmails, totalEmails: r.totalEmails,
        avgDeliveryRate: r.avgDeliveryRate, avgOpenRate: r.avgOpenRate, avgClickRate: r.avgClickRate,
        domains: r.domains.map((d) => ({ id: d.id, name: d.name, emailsSent: d.emailsSent })),
      };
    });

    app.get<{ Querystring: { startDate?: string; endDate?: string } }>('/stats', {
      schema: {
        tags: TAGS.analytics,
        summary: 'Counts and rates in a date range',
        description: 'The range is widened to whole UTC days: from the day of startDate to the day of endDate, both included.',
        querystring: {
          type: 'object',
          properties: {
            startDate: { type: 'string', description: 'ISO 8601; no lower bound when absent' },
            endDate: { type: 'string', description: 'ISO 8601; now when absent' },
          },
        },
        response: { 200: statsResponse },
      },
    }, async (req) => {
      const p = principalOf(req);
      const startDate = isoDate(req.query.startDate, 'startDate');
      const endDate = isoDate(req.query.endDate, 'endDate');
      if (startDate && endDate && startDate > endDate) throw new GatewayError(400, 'Invalid date range: startDate is after endDate');
      const { stats } = await analytics.call.getStats({ teamId: p.teamId, startDate, endDate, domainId: p.domainId });
      return Object.fromEntries(STAT_FIELDS.map((f) => [f, stats?.[f] ?? 0]));
    });

    app.get<{ Querystring: { page: number; limit: number } }>('/activity', {
      schema: {
        tags: TAGS.feeds,
        summary: 'The team\'s email events with a summary of each email, newest first',
        querystring: { type: 'object', properties: { ...pageQuery } },
        response: {
          200: {
            type: 'object', required: ['activity', 'page', 'limit'],
            properties: { activity: { type: 'array', items: activityItem }, page: { type: 'integer' }, limit: { type: 'integer' } },
          },
        },
      },
    }, async (req) => {
      const p = principalOf(req);
      const r = await analytics.call.listActivity({ teamId: p.teamId, page: req.query.page, limit: req.query.limit, domainId: p.domainId });
      return {
        activity: r.activity.map((a) => ({
          ...toEvent(a.event!), email: { id: a.email?.id ?? '', to: a.email?.to ?? [], subject: a.email?.subject ?? '', from: a.email?.from ?? '' },
        })),
        page: r.page,
        limit: r.limit,
      };
    });

    app.get<{ Querystring: { page: number; limit: number; status?: EmailStatusName; startDate?: string } }>('/events', {
      schema: {
        tags: TAGS.feeds,
        summary: 'The team\'s email events, newest first',
        querystring: {
          type: 'object',
          properties: {
            ...pageQuery,
            status: { type: 'string', enum: EMAIL_STATUSES, description: 'only events of this status' },
            startDate: { type: 'string', description: 'ISO 8601: only events after this instant' },
          },
        },
        response: {
          200: {
            type: 'object', required: ['events', 'page', 'limit'],
            properties: { events: { type: 'array', items: emailEvent }, page: { type: 'integer' }, limit: { type: 'integer' } },
          },
        },
      },
    }, async (req) => {
      const p = principalOf(req);
      const q = req.query;
      const r = await analytics.call.listEvents({
        teamId: p.teamId, page: q.page, limit: q.limit,
        status: q.status ? emailsV1.emailStatusFromJSON(`EMAIL_STATUS_${q.status}`) : emailsV1.EmailStatus.EMAIL_STATUS_UNSPECIFIED,
        startDate: isoDate(q.startDate, 'startDate'), domainId: p.domainId,
      });
      return { events: r.events.map(toEvent), page: r.page, limit: r.limit };
    });
  };
}
