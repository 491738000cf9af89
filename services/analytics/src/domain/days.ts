/**
 * UTC calendar days, the unit of every rollup. A day is written `YYYY-MM-DD`,
 * which sorts and compares as text in date order.
 */
export type Day = string;

const DAY_MS = 86_400_000;
const DAY_RE = /^\d{4}-\d{2}-\d{2}$/;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'] as const;

export function isDay(s: string): s is Day {
  return DAY_RE.test(s) && utcDay(new Date(`${s}T00:00:00.000Z`)) === s;
}

/** The UTC day an instant falls on. */
export function utcDay(d: Date): Day {
  return d.toISOString().slice(0, 10);
}

export function addDays(day: Day, n: number): Day {
  return utcDay(new Date(Date.parse(`${day}T00:00:00.000Z`) + n * DAY_MS));
}

/** The `n` days ending with `last`, oldest first. */
export function daysEndingWith(last: Day, n: number): Day[] {
  return Array.from({ length: n }, (_, i) => addDays(last, i - n + 1));
}

/** First day of the UTC month of `day`. */
export function monthStart(day: Day): Day {
  return `${day.slice(0, 8)}01`;
}

/**
 * Short label of a day: month abbreviation and two-digit day (`Nov 21`,
 * `Mar 04`), what useSend's dashboard shows (date-fns `MMM dd`).
 */
export function dayLabel(day: Day): string {
  const month = MONTHS[Number(day.slice(5, 7)) - 1] ?? '???';
  return `${month} ${day.slice(8, 10)}`;
}

/** An inclusive range of days; `from` absent means no lower bound. */
export interface DayRange {
  readonly from?: Day | undefined;
  readonly to: Day;
}

export type PeriodName = 'day' | 'week' | 'month';
const PERIOD_DAYS: Record<PeriodName, number> = { day: 1, week: 7, month: 30 };

/** A trailing window of whole UTC days ending with today: day = today, week = 7 days, month = 30 days. */
export function periodRange(period: PeriodName, now: Date): DayRange {
  const today = utcDay(now);
  return { from: addDays(today, 1 - PERIOD_DAYS[period]), to: today };
}

export class InvalidRangeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidRangeError';
  }
}

/**
 * The days of a date range, widened to whole UTC days: the day of the start
 * to the day of the end, both included. No start: no lower bound; no end:
 * today. A start after the end is an error.
 */
export function dateRange(start: Date | undefined, end: Date | undefined, now: Date): DayRange {
  for (const [d, name] of [[start, 'start_date'], [end, 'end_date']] as const) {
    if (d && Number.isNaN(d.getTime())) throw new InvalidRangeError(`${name} is not a valid instant`);
  }
  if (start && end && start.getTime() > end.getTime()) throw new InvalidRangeError('start_date is after end_date');
  return { from: start ? utcDay(start) : undefined, to: utcDay(end ?? now) };
}
