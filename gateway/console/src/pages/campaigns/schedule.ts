import * as chrono from 'chrono-node';

/**
 * What a `scheduledAt` phrase will mean, for the preview before saving, read as the campaigns
 * service reads it with its default zone (CAMPAIGN_TIME_ZONE=UTC): ISO 8601 (without an offset: a
 * UTC wall-clock time), otherwise chrono-node, forward dates. The API does not publish its zone, so
 * the saved campaign shows the time the platform itself resolved.
 */
export function resolveSchedule(text: string, now = new Date()): Date | null {
  const t = text.trim();
  if (!t) return null;
  if (/^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?$/i.test(t)) {
    const hasZone = /(?:Z|[+-]\d{2}:?\d{2})$/i.test(t) && t.length > 10;
    const d = new Date(hasZone ? t : `${t.length === 10 ? `${t}T00:00:00` : t.replace(' ', 'T')}Z`);
    return Number.isNaN(d.getTime()) ? null : d;
  }
  return chrono.parseDate(t, { instant: now, timezone: 0 }, { forwardDate: true });
}

/** The preview's wording: the local time and the UTC instant the API will be sent. */
export function describeSchedule(at: Date): string {
  return `Resolves to ${at.toLocaleString()} (${at.toISOString()}, read in UTC, the platform's default zone)`;
}
