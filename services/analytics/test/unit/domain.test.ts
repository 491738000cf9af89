import { describe, expect, it } from 'vitest';
import { countsFrom, percent, reputationOf, statsOf, sumCounts, zeroCounts } from '../../src/domain/counts.js';
import {
  addDays, dateRange, dayLabel, daysEndingWith, InvalidRangeError, isDay, monthStart, periodRange, utcDay,
} from '../../src/domain/days.js';
import { metricsOf, readDomainEvent, readEmailEvent, statusOfType } from '../../src/domain/events.js';

describe('days', () => {
  it('works in UTC calendar days', () => {
    expect(utcDay(new Date('2026-03-01T23:59:59.999Z'))).toBe('2026-03-01');
    expect(utcDay(new Date('2026-03-01T23:30:00-01:00'))).toBe('2026-03-02');
    expect(addDays('2026-03-01', -1)).toBe('2026-02-28');
    expect(addDays('2024-02-28', 1)).toBe('2024-02-29');
    expect(addDays('2026-12-31', 1)).toBe('2027-01-01');
    expect(daysEndingWith('2026-01-02', 4)).toEqual(['2025-12-30', '2025-12-31', '2026-01-01', '2026-01-02']);
    expect(monthStart('2026-11-21')).toBe('2026-11-01');
    expect(isDay('2026-02-29')).toBe(false);
    expect(isDay('2024-02-29')).toBe(true);
  });

  it('labels days as useSend does (MMM dd)', () => {
    expect(dayLabel('2026-11-21')).toBe('Nov 21');
    expect(dayLabel('2026-03-04')).toBe('Mar 04');
    expect(dayLabel('2026-01-31')).toBe('Jan 31');
    expect(dayLabel('2026-12-01')).toBe('Dec 01');
  });

  it('periods are trailing windows of whole days ending today', () => {
    const now = new Date('2026-05-10T08:00:00Z');
    expect(periodRange('day', now)).toEqual({ from: '2026-05-10', to: '2026-05-10' });
    expect(periodRange('week', now)).toEqual({ from: '2026-05-04', to: '2026-05-10' });
    expect(periodRange('month', now)).toEqual({ from: '2026-04-11', to: '2026-05-10' });
  });

  it('date ranges widen to whole days and refuse a start after the end', () => {
    const now = new Date('2026-05-10T08:00:00Z');
    expect(dateRange(undefined, undefined, now)).toEqual({ from: undefined, to: '2026-05-10' });
    expect(dateRange(new Date('2026-05-01T23:00:00Z'), new Date('2026-05-03T01:00:00Z'), now)).toEqual({ from: '2026-05-01', to: '2026-05-03' });
    expect(() => dateRange(new Date('2026-05-03T00:00:00Z'), new Date('2026-05-01T00:00:00Z'), now)).toThrow(InvalidRangeError);
    expect(() => dateRange(new Date('nonsense'), undefined, now)).toThrow(InvalidRangeError);
  });
});

describe('counts and rates', () => {
  it('never divides by zero', () => {
    expect(percent(3, 0)).toBe(0);
    expect(percent(1, 4)).toBe(25);
    expect(reputationOf(zeroCounts())).toEqual({ delivered: 0, hardBounced: 0, complained: 0, bounceRate: 0, complaintRate: 0 });
    const s = statsOf(zeroCounts());
    expect(Object.values(s).every((v) => v === 0)).toBe(true);
  });

  it('computes the SPEC rates from counts', () => {
    const c = { sent: 8, delivered: 4, opened: 2, clicked: 1, bounced: 2, hardBounced: 1, complained: 1 };
    expect(statsOf(c)).toEqual({
      totalSent: 8, totalDelivered: 4, totalOpened: 2, totalClicked: 1, totalBounced: 2, totalComplained: 1,
      deliveryRate: 50, openRate: 50, clickRate: 25, bounceRate: 25, complaintRate: 25,
    });
    expect(reputationOf(c)).toEqual({ delivered: 4, hardBounced: 1, complained: 1, bounceRate: 25, complaintRate: 25 });
  });

  it('reads stored counters, treating missing fields as 0, and sums them', () => {
    expect(countsFrom({ sent: 2, opened: 'x' })).toEqual({ ...zeroCounts(), sent: 2 });
    expect(sumCounts([countsFrom({ sent: 1 }), countsFrom({ sent: 2, delivered: 1 })])).toMatchObject({ sent: 3, delivered: 1 });
  });
});

describe('reading events', () => {
  const base = { id: 'evt_1', createdAt: '2026-05-10T10:00:00.000Z', teamId: 'team_1' };

  it('maps types to statuses and counters; a bounce is hard only when Permanent', () => {
    expect(statusOfType('email.delivery_delayed')).toBe('DELIVERY_DELAYED');
    expect(statusOfType('email.nonsense')).toBeUndefined();
    expect(statusOfType('domain.created')).toBeUndefined();
    expect(metricsOf('BOUNCED', { bounce: { type: 'Permanent' } })).toEqual(['sent', 'bounced', 'hardBounced']);
    expect(metricsOf('BOUNCED', { bounce: { type: 'Transient' } })).toEqual(['sent', 'bounced']);
    expect(metricsOf('BOUNCED', {})).toEqual(['sent', 'bounced']);
    expect(metricsOf('QUEUED', {})).toEqual([]);
    expect(metricsOf('OPENED', {})).toEqual(['opened']);
  });

  it('reads the SPEC 6.3 payload: kind, domain, day of occurrence, summary', () => {
    const f = readEmailEvent({
      ...base, type: 'email.delivered',
      data: { id: 'em_1', status: 'DELIVERED', from: 'a@x.test', to: ['b@y.test'], subject: 'Hi', occurredAt: '2026-05-09T23:59:00.000Z', campaignId: 'cmp_1', domainId: 7 },
    })!;
    expect(f).toMatchObject({
      eventId: 'evt_1', teamId: 'team_1', emailId: 'em_1', status: 'DELIVERED', domainId: '7', kind: 'campaign', day: '2026-05-09',
      metrics: ['delivered'], summary: { id: 'em_1', to: ['b@y.test'], subject: 'Hi', from: 'a@x.test' },
    });
    expect(f.createdAt.toISOString()).toBe(base.createdAt);
    const t = readEmailEvent({ ...base, type: 'email.sent', data: { id: 'em_2', to: 'one@y.test' } })!;
    expect(t).toMatchObject({ kind: 'transactional', domainId: '', day: '2026-05-10', summary: { to: ['one@y.test'], subject: '', from: '' } });
    expect(readEmailEvent({ ...base, type: 'email.unknown_thing', data: {} })).toBeUndefined();
  });

  it('refuses events without a team, an email id or a valid createdAt', () => {
    expect(() => readEmailEvent({ ...base, teamId: '', type: 'email.sent', data: { id: 'em' } })).toThrow(/teamId/);
    expect(() => readEmailEvent({ ...base, type: 'email.sent', data: {} })).toThrow(/data.id/);
    expect(() => readEmailEvent({ ...base, createdAt: 'yesterday', type: 'email.sent', data: { id: 'em' } })).toThrow(/createdAt/);
  });

  it('reads domain events into id, lower-case name and deletion', () => {
    expect(readDomainEvent({ ...base, type: 'domain.deleted', data: { id: 'dom_1', name: 'Mail.Example.COM' } })).toEqual({
      teamId: 'team_1', id: 'dom_1', name: 'mail.example.com', deleted: true, at: new Date(base.createdAt),
    });
    expect(readDomainEvent({ ...base, type: 'domain.created', data: { id: 'dom_1', name: 'x.test' } })?.deleted).toBe(false);
    expect(readDomainEvent({ ...base, type: 'contact.created', data: {} })).toBeUndefined();
    expect(() => readDomainEvent({ ...base, type: 'domain.updated', data: { id: 'dom_1' } })).toThrow(/name/);
  });
});
