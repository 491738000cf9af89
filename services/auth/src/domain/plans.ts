/** Public plan names; the proto enum carries the same names with a PLAN_ prefix. */
export type PlanName = 'FREE' | 'PREMIUM' | 'PRO';

export interface PlanLimits {
  /** Emails per UTC day. */
  readonly dailyEmailLimit: number;
  /** Emails per calendar month (UTC); -1 unlimited. */
  readonly monthlyEmailLimit: number;
}

/** Defaults in line with what hosted platforms offer on their free and paid tiers. */
export const PLAN_LIMITS: Readonly<Record<PlanName, PlanLimits>> = {
  FREE: { dailyEmailLimit: 100, monthlyEmailLimit: 3_000 },
  PREMIUM: { dailyEmailLimit: 50_000, monthlyEmailLimit: -1 },
  PRO: { dailyEmailLimit: 100_000, monthlyEmailLimit: -1 },
};

/** URL-friendly slug of a team name; the repository appends a suffix on collision. */
export function slugify(name: string): string {
  const s = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48);
  return s || 'team';
}

/** UTC day and month keys of a moment, for quota counters. */
export function quotaPeriods(now: Date): { day: string; month: string; dayEndsAt: Date; monthEndsAt: Date } {
  const iso = now.toISOString();
  const dayEndsAt = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
  const monthEndsAt = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
  return { day: iso.slice(0, 10), month: iso.slice(0, 7), dayEndsAt, monthEndsAt };
}
