import * as chrono from 'chrono-node';

/**
 * What a `scheduledAt` phrase will mean, for the preview before saving: ISO 8601 as is, otherwise
 * chrono-node (the library the campaigns service reads it with, forward dates). The API's own
 * resolution is what the campaign shows once saved.
 */
export function resolveSchedule(text: string, now = new Date()): Date | null {
  const t = text.trim();
  if (!t) return null;
  if (/^\d{4}-\d{2}-\d{2}T/.test(t)) {
    const d = new Date(t);
    return Number.isNaN(d.getTime()) ? null : d;
  }
  return chrono.parseDate(t, now, { forwardDate: true });
}
