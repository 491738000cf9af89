import { analyticsV1, emailsV1 } from '@mailfleet/proto';
import type { Stats } from '../domain/counts.js';
import type { PeriodName } from '../domain/days.js';
import { isEmailStatus, type EmailStatus } from '../domain/events.js';
import type { FeedItem } from '../repositories/feed.repository.js';

const PERIODS: Partial<Record<analyticsV1.Period, PeriodName>> = {
  [analyticsV1.Period.PERIOD_UNSPECIFIED]: 'month',
  [analyticsV1.Period.PERIOD_DAY]: 'day',
  [analyticsV1.Period.PERIOD_WEEK]: 'week',
  [analyticsV1.Period.PERIOD_MONTH]: 'month',
};

/** UNSPECIFIED is MONTH; undefined for a value the contract does not know. */
export function periodFromProto(p: analyticsV1.Period): PeriodName | undefined {
  return PERIODS[p];
}

export function periodToProto(p: PeriodName): analyticsV1.Period {
  return p === 'day' ? analyticsV1.Period.PERIOD_DAY : p === 'week' ? analyticsV1.Period.PERIOD_WEEK : analyticsV1.Period.PERIOD_MONTH;
}

/** UNSPECIFIED (no filter) is null; undefined for a value the contract does not know. */
export function statusFromProto(s: emailsV1.EmailStatus): EmailStatus | null | undefined {
  if (s === emailsV1.EmailStatus.EMAIL_STATUS_UNSPECIFIED) return null;
  const name = emailsV1.emailStatusToJSON(s).replace(/^EMAIL_STATUS_/, '');
  return isEmailStatus(name) ? name : undefined;
}

export function statusToProto(s: EmailStatus): emailsV1.EmailStatus {
  return emailsV1.emailStatusFromJSON(`EMAIL_STATUS_${s}`);
}

export function statsToProto(s: Stats): analyticsV1.Stats {
  return { ...s };
}

export function eventToProto(item: FeedItem): emailsV1.EmailEvent {
  return { id: item.id, emailId: item.emailId, status: statusToProto(item.status), data: item.data, teamId: item.teamId, createdAt: item.createdAt };
}

export function activityToProto(item: FeedItem): analyticsV1.ActivityItem {
  return { event: eventToProto(item), email: { id: item.email.id, to: [...item.email.to], subject: item.email.subject, from: item.email.from } };
}
