import { describe, expect, it } from 'vitest';
import { changeEvents, createdEvent, deletedEvent, domainEventData, type EventSource } from '../../src/domain/events.js';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const t1 = new Date('2026-01-01T00:01:00.000Z');
const base: EventSource = {
  id: 'dom_1', teamId: 'team_1', name: 'example.com', status: 'PENDING', region: 'us-east-1', clickTracking: false, openTracking: false,
  dkimStatus: 'Pending', spfDetails: 'Pending', dmarcAdded: false, createdAt: t0, updatedAt: t0,
};

describe('domain events', () => {
  it('carry exactly the SPEC 6.3 payload', () => {
    expect(domainEventData(base)).toEqual({
      id: 'dom_1', name: 'example.com', status: 'PENDING', region: 'us-east-1', clickTracking: false, openTracking: false,
      dkimStatus: 'Pending', spfDetails: 'Pending', dmarcAdded: false, createdAt: t0.toISOString(), updatedAt: t0.toISOString(),
    });
    expect(createdEvent({ ...base, dkimStatus: null, spfDetails: null }, t0)).toMatchObject({ type: 'domain.created', teamId: 'team_1', data: { dkimStatus: null, spfDetails: null } });
    expect(deletedEvent(base, t1)).toMatchObject({ type: 'domain.deleted', createdAt: t1.toISOString() });
  });

  it('domain.updated on any payload change, domain.verified besides on reaching SUCCESS', () => {
    expect(changeEvents(base, { ...base, updatedAt: t1 }, t1)).toEqual([]);
    expect(changeEvents(base, { ...base, openTracking: true, updatedAt: t1 }, t1).map((e) => e.type)).toEqual(['domain.updated']);
    expect(changeEvents(base, { ...base, dmarcAdded: true }, t1).map((e) => e.type)).toEqual(['domain.updated']);
    const verified = changeEvents(base, { ...base, status: 'SUCCESS', dkimStatus: 'Success', spfDetails: 'Success', updatedAt: t1 }, t1);
    expect(verified.map((e) => e.type)).toEqual(['domain.updated', 'domain.verified']);
    expect(verified[1]!.data).toMatchObject({ status: 'SUCCESS', updatedAt: t1.toISOString() });
    expect(verified[0]!.id).not.toBe(verified[1]!.id);
    const ok = { ...base, status: 'SUCCESS' as const };
    expect(changeEvents(ok, { ...ok, dkimStatus: 'Failed' }, t1).map((e) => e.type)).toEqual(['domain.updated']);
  });
});
