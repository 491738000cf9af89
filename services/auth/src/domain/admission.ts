/**
 * A sender reserves quota in blocks so that most sends need no call to auth.
 * Units a replica holds but never uses are lost if it crashes (a graceful stop
 * gives them back), so the part of a block beyond what the send asked for is
 * capped at a tenth of each limit: a tiny quota stays exact (a block of one),
 * a large one is reserved a block at a time.
 */
export const QUOTA_BLOCK_SHARE = 10;

export interface QuotaState {
  readonly dailyLimit: number;
  /** -1: unlimited. */
  readonly monthlyLimit: number;
  readonly dayCount: number;
  readonly monthCount: number;
}

/** Units left of the day and the month (Infinity for an unlimited month). */
export function quotaRoom(s: QuotaState): { day: number; month: number } {
  return {
    day: Math.max(0, s.dailyLimit - s.dayCount),
    month: s.monthlyLimit < 0 ? Number.POSITIVE_INFINITY : Math.max(0, s.monthlyLimit - s.monthCount),
  };
}

/**
 * How many units to reserve for a request of at least `min` and at most `max`:
 * 0 when `min` does not fit in the day or the month.
 */
export function quotaGrant(s: QuotaState, min: number, max: number): number {
  if (min < 1) return 0;
  const room = quotaRoom(s);
  const fits = Math.min(room.day, room.month);
  if (min > fits) return 0;
  let extraCap = Math.floor(s.dailyLimit / QUOTA_BLOCK_SHARE);
  if (s.monthlyLimit >= 0) extraCap = Math.min(extraCap, Math.floor(s.monthlyLimit / QUOTA_BLOCK_SHARE));
  const wanted = Math.min(Math.max(min, max), min + Math.max(0, extraCap));
  return Math.min(wanted, fits);
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** A quota day key (YYYY-MM-DD) as AdmitResponse.quota_day carries it, or undefined when malformed. */
export function parseQuotaDay(day: string): { day: string; month: string } | undefined {
  if (!DAY.test(day) || Number.isNaN(Date.parse(`${day}T00:00:00Z`))) return undefined;
  return { day, month: day.slice(0, 7) };
}
