import { createEvent, type EventEnvelope } from '@mailfleet/kit';
import type { CheckStatus, DomainStatus } from './verification.js';

/** `data` of every domain.* event (SPEC 6.3); timestamps are ISO strings, absent checks are null. */
export interface DomainEventData {
  readonly id: string;
  readonly name: string;
  readonly status: DomainStatus;
  readonly region: string;
  readonly clickTracking: boolean;
  readonly openTracking: boolean;
  readonly dkimStatus: CheckStatus | null;
  readonly spfDetails: CheckStatus | null;
  readonly dmarcAdded: boolean;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** The fields of a domain that its events show. */
export interface EventSource {
  readonly id: string;
  readonly teamId: string;
  readonly name: string;
  readonly status: DomainStatus;
  readonly region: string;
  readonly clickTracking: boolean;
  readonly openTracking: boolean;
  readonly dkimStatus: CheckStatus | null;
  readonly spfDetails: CheckStatus | null;
  readonly dmarcAdded: boolean;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export function domainEventData(d: EventSource): DomainEventData {
  return {
    id: d.id, name: d.name, status: d.status, region: d.region, clickTracking: d.clickTracking, openTracking: d.openTracking,
    dkimStatus: d.dkimStatus, spfDetails: d.spfDetails, dmarcAdded: d.dmarcAdded,
    createdAt: d.createdAt.toISOString(), updatedAt: d.updatedAt.toISOString(),
  };
}

/** Whether anything an event shows changed (updatedAt aside). */
export function payloadChanged(before: EventSource, after: EventSource): boolean {
  return before.status !== after.status || before.clickTracking !== after.clickTracking || before.openTracking !== after.openTracking
    || before.dkimStatus !== after.dkimStatus || before.spfDetails !== after.spfDetails || before.dmarcAdded !== after.dmarcAdded
    || before.name !== after.name || before.region !== after.region;
}

/**
 * Events of a change: `domain.updated` when any field of the payload changed
 * (status, tracking flags, check results), and `domain.verified` besides on
 * the transition to SUCCESS.
 */
export function changeEvents(before: EventSource, after: EventSource, now: Date): EventEnvelope<DomainEventData>[] {
  if (!payloadChanged(before, after)) return [];
  const data = domainEventData(after);
  const events = [createEvent('domain.updated', after.teamId, data, now)];
  if (after.status === 'SUCCESS' && before.status !== 'SUCCESS') events.push(createEvent('domain.verified', after.teamId, data, now));
  return events;
}

export function createdEvent(d: EventSource, now: Date): EventEnvelope<DomainEventData> {
  return createEvent('domain.created', d.teamId, domainEventData(d), now);
}

export function deletedEvent(d: EventSource, now: Date): EventEnvelope<DomainEventData> {
  return createEvent('domain.deleted', d.teamId, domainEventData(d), now);
}
