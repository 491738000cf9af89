/** Endpoint families that share a per-minute budget (SPEC section 8). */
export type RateLimitFamily = 'SEND_EMAIL' | 'BATCH_EMAIL' | 'READ_EMAIL' | 'FEEDBACK_LIST' | 'CONTACT' | 'BULK_CONTACT' | 'DEFAULT';

export const RATE_LIMIT_FAMILIES: readonly RateLimitFamily[] = ['SEND_EMAIL', 'BATCH_EMAIL', 'READ_EMAIL', 'FEEDBACK_LIST', 'CONTACT', 'BULK_CONTACT', 'DEFAULT'];

/** Units per minute: requests, except BATCH_EMAIL which counts emails. */
export const DEFAULT_RATE_LIMITS: Readonly<Record<RateLimitFamily, number>> = {
  SEND_EMAIL: 100,
  BATCH_EMAIL: 1_000,
  READ_EMAIL: 100,
  FEEDBACK_LIST: 100,
  CONTACT: 500,
  BULK_CONTACT: 100,
  DEFAULT: 300,
};

export const RATE_WINDOW_MS = 60_000;

/** The fixed one-minute window a moment falls in. */
export function rateWindow(now: Date): { start: number; resetsAt: number; resetSeconds: number } {
  const start = Math.floor(now.getTime() / RATE_WINDOW_MS) * RATE_WINDOW_MS;
  const resetsAt = start + RATE_WINDOW_MS;
  return { start, resetsAt, resetSeconds: Math.max(1, Math.ceil((resetsAt - now.getTime()) / 1000)) };
}

/** The limit in force: a per-team override where the operator set one, else the default. */
export function limitFor(family: RateLimitFamily, overrides: Partial<Record<RateLimitFamily, number>> | undefined, defaults = DEFAULT_RATE_LIMITS): number {
  const o = overrides?.[family];
  return typeof o === 'number' && o > 0 ? o : defaults[family];
}
