import * as chrono from 'chrono-node';

const ISO_8601 = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i;

export type ScheduleResult = { readonly ok: true; readonly at: Date } | { readonly ok: false; readonly message: string };

/** Whether `zone` is an IANA time zone name this runtime knows. */
export function isValidTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** Offset of `zone` from UTC at `at`, in minutes (Paris in winter: 60). */
export function zoneOffsetMinutes(zone: string, at: Date): number {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
  }).formatToParts(at);
  const get = (t: string) => Number(parts.find((p) => p.type === t)?.value ?? '0');
  const asUtc = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second'));
  return Math.round((asUtc - Math.floor(at.getTime() / 1000) * 1000) / 60_000);
}

/**
 * Resolves a schedule: an ISO 8601 timestamp (without an offset it is read
 * in `timeZone`), or a natural-language phrase ("in 2 hours", "tomorrow at
 * 9am") read by chrono-node in `timeZone` relative to `now`. Unparseable or
 * in the past (more than a minute ago, to absorb clock skew of "now") fails.
 */
export function resolveSchedule(input: string, now: Date, timeZone: string): ScheduleResult {
  const text = input.trim();
  if (!text) return { ok: false, message: 'scheduledAt must not be empty' };
  const offset = zoneOffsetMinutes(timeZone, now);
  let at: Date | null;
  if (ISO_8601.test(text)) {
    const hasZone = /(?:Z|[+-]\d{2}:?\d{2})$/i.test(text) && text.length > 10;
    const parsed = Date.parse(hasZone ? text : `${text.length === 10 ? `${text}T00:00:00` : text.replace(' ', 'T')}Z`);
    if (Number.isNaN(parsed)) at = null;
    else if (hasZone) at = new Date(parsed);
    else {
      // Wall-clock time in the zone: use the zone's offset at that moment (DST), not now's.
      const guess = parsed - offset * 60_000;
      at = new Date(parsed - zoneOffsetMinutes(timeZone, new Date(guess)) * 60_000);
    }
  } else {
    at = chrono.parseDate(text, { instant: now, timezone: offset }, { forwardDate: true });
    const offsetThen = at ? zoneOffsetMinutes(timeZone, at) : offset;
    // The phrase lands across a DST change: read it again with the offset of that day.
    if (at && offsetThen !== offset && /\d\s*(?:am|pm)|\d:\d|noon|midnight|morning|evening|tonight/i.test(text)) {
      at = chrono.parseDate(text, { instant: now, timezone: offsetThen }, { forwardDate: true });
    }
  }
  if (!at || Number.isNaN(at.getTime())) {
    return { ok: false, message: `scheduledAt "${input}" is neither an ISO 8601 timestamp nor a date phrase we understand (try "tomorrow at 9am" or "in 2 hours")` };
  }
  if (at.getTime() < now.getTime() - 60_000) return { ok: false, message: `scheduledAt "${input}" resolves to ${at.toISOString()}, which is in the past` };
  return { ok: true, at };
}
