import { InvalidArgumentError, type UnaryHandlers } from '@mailfleet/kit';
import type { analyticsV1 } from '@mailfleet/proto';
import { percent, reputationOf, statsOf, sumCounts, zeroCounts, type Counts, type Metric } from '../domain/counts.js';
import {
  dateRange, dayLabel, daysEndingWith, InvalidRangeError, monthStart, periodRange, utcDay, type DayRange, type PeriodName,
} from '../domain/days.js';
import type { DomainsRepository } from '../repositories/domains.repository.js';
import type { FeedRepository } from '../repositories/feed.repository.js';
import type { RollupsRepository } from '../repositories/rollups.repository.js';
import { activityToProto, eventToProto, periodFromProto, periodToProto, statsToProto, statusFromProto } from './mapping.js';

export interface AnalyticsRpcDeps {
  readonly rollups: RollupsRepository;
  readonly feed: FeedRepository;
  readonly domains: DomainsRepository;
  readonly now?: () => Date;
}

export const TIME_SERIES_DAYS = [7, 30] as const;
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 100;

function requireTeam(teamId: string): string {
  if (!teamId) throw new InvalidArgumentError('team_id is required');
  return teamId;
}

function period(p: analyticsV1.Period): PeriodName {
  const name = periodFromProto(p);
  if (!name) throw new InvalidArgumentError('period must be day, week or month');
  return name;
}

function range(start: Date | undefined, end: Date | undefined, now: Date): DayRange {
  try {
    return dateRange(start, end, now);
  } catch (err) {
    if (err instanceof InvalidRangeError) throw new InvalidArgumentError(err.message);
    throw err;
  }
}

function paging(page: number, limit: number): { page: number; limit: number } {
  if (page < 0) throw new InvalidArgumentError('page must be at least 1');
  if (limit < 0 || limit > MAX_PAGE_SIZE) throw new InvalidArgumentError(`limit must be between 1 and ${MAX_PAGE_SIZE}`);
  return { page: page || 1, limit: limit || DEFAULT_PAGE_SIZE };
}

/** An optional filter value: empty means none. */
function optional(v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v;
}

function totalsOf(c: Counts): analyticsV1.TotalCounts {
  return { sent: c.sent, delivered: c.delivered, opened: c.opened, clicked: c.clicked, bounced: c.bounced, complained: c.complained };
}

/**
 * The read side: every figure comes from the daily rollups (summed by the
 * database, grouped by day, kind or domain), never from raw events; the
 * activity and events pages come from the feed projection.
 */
export function createAnalyticsHandlers(deps: AnalyticsRpcDeps): UnaryHandlers<analyticsV1.AnalyticsServiceServer> {
  const now = deps.now ?? (() => new Date());

  async function total(teamId: string, r: DayRange | undefined, domainId?: string, metrics?: readonly Metric[]): Promise<Counts> {
    return (await deps.rollups.sum({ teamId, range: r, domainId }, undefined, metrics)).get('') ?? zeroCounts();
  }

  /** A `domain` filter (name or id) -> the domain id to count; a value naming no known domain is taken as an id (counting nothing if none). */
  async function domainFilter(teamId: string, domain: string | undefined): Promise<string | undefined> {
    const d = optional(domain);
    if (d === undefined) return undefined;
    return (await deps.domains.resolve(teamId, d)) ?? d;
  }

  return {
    async getAnalytics(req) {
      const teamId = requireTeam(req.teamId);
      const today = utcDay(now());
      const domainId = optional(req.domainId);
      const [day, month] = await Promise.all([
        total(teamId, { from: today, to: today }, domainId, ['sent']),
        total(teamId, { from: monthStart(today), to: today }, domainId, ['sent']),
      ]);
      return { day: [{ type: 'email', sent: day.sent }], month: [{ type: 'email', sent: month.sent }] };
    },

    async getReputation(req) {
      const teamId = requireTeam(req.teamId);
      const domainId = await domainFilter(teamId, req.domain);
      return reputationOf(await total(teamId, undefined, domainId, ['delivered', 'hardBounced', 'complained']));
    },

    async getTimeSeries(req) {
      const teamId = requireTeam(req.teamId);
      const days = req.days || 7;
      if (!(TIME_SERIES_DAYS as readonly number[]).includes(days)) throw new InvalidArgumentError('days must be 7 or 30');
      const domainId = await domainFilter(teamId, req.domain);
      const window = daysEndingWith(utcDay(now()), days);
      const byDay = await deps.rollups.sum({ teamId, range: { from: window[0], to: window[window.length - 1]! }, domainId }, 'day');
      const rows = window.map((d) => ({ day: d, counts: byDay.get(d) ?? zeroCounts() }));
      return {
        result: rows.map((r) => ({ date: dayLabel(r.day), ...totalsOf(r.counts) })),
        totalCounts: totalsOf(sumCounts(rows.map((r) => r.counts))),
      };
    },

    async getMetrics(req) {
      const teamId = requireTeam(req.teamId);
      const p = period(req.period);
      const r = periodRange(p, now());
      const onlyDomain = optional(req.domainId);
      const [byKind, byDomain, known] = await Promise.all([
        deps.rollups.sum({ teamId, range: r, domainId: onlyDomain }, 'kind'),
        deps.rollups.sum({ teamId, range: r, domainId: onlyDomain }, 'domainId', ['sent']),
        deps.domains.list(teamId),
      ]);
      const all = sumCounts(byKind.values());
      const transactional = byKind.get('transactional')?.sent ?? 0;
      const marketing = byKind.get('campaign')?.sent ?? 0;
      // Every live domain of the team, and any other (deleted, or never seen) that sent in the window.
      const names = new Map(known.map((d) => [d.id, d.name]));
      const ids = new Set(known.filter((d) => !d.deleted).map((d) => d.id));
      for (const [id, c] of byDomain) if (id !== '' && c.sent > 0) ids.add(id);
      const domains = [...ids]
        .filter((id) => onlyDomain === undefined || id === onlyDomain)
        .map((id) => ({ id, name: names.get(id) ?? id, emailsSent: byDomain.get(id)?.sent ?? 0 }))
        .sort((a, b) => b.emailsSent - a.emailsSent || a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
      return {
        period: periodToProto(p),
        transactionalEmails: transactional,
        marketingEmails: marketing,
        totalEmails: transactional + marketing,
        avgDeliveryRate: percent(all.delivered, all.sent),
        avgOpenRate: percent(all.opened, all.delivered),
        avgClickRate: percent(all.clicked, all.delivered),
        domains,
      };
    },

    async getStats(req) {
      const teamId = requireTeam(req.teamId);
      const r = range(req.startDate, req.endDate, now());
      return { stats: statsToProto(statsOf(await total(teamId, r, optional(req.domainId)))) };
    },

    async getDomainAnalytics(req) {
      const teamId = requireTeam(req.teamId);
      if (!req.domainId) throw new InvalidArgumentError('domain_id is required');
      const p = period(req.period);
      const s = statsOf(await total(teamId, periodRange(p, now()), req.domainId));
      return {
        period: periodToProto(p),
        totalSent: s.totalSent,
        totalDelivered: s.totalDelivered,
        totalOpened: s.totalOpened,
        totalClicked: s.totalClicked,
        deliveryRate: s.deliveryRate,
        openRate: s.openRate,
        clickRate: s.clickRate,
      };
    },

    async getDomainStats(req) {
      const teamId = requireTeam(req.teamId);
      if (!req.domainId) throw new InvalidArgumentError('domain_id is required');
      const r = range(req.startDate, req.endDate, now());
      return { stats: statsToProto(statsOf(await total(teamId, r, req.domainId))) };
    },

    async listActivity(req) {
      const teamId = requireTeam(req.teamId);
      const { page, limit } = paging(req.page, req.limit);
      const items = await deps.feed.list(teamId, { domainId: optional(req.domainId) }, page, limit);
      return { activity: items.map(activityToProto), page, limit };
    },

    async listEvents(req) {
      const teamId = requireTeam(req.teamId);
      const { page, limit } = paging(req.page, req.limit);
      const status = statusFromProto(req.status);
      if (status === undefined) throw new InvalidArgumentError('unknown status');
      if (req.startDate && Number.isNaN(req.startDate.getTime())) throw new InvalidArgumentError('start_date is not a valid instant');
      const items = await deps.feed.list(teamId, { status: status ?? undefined, after: req.startDate, domainId: optional(req.domainId) }, page, limit);
      return { events: items.map(eventToProto), page, limit };
    },
  };
}
