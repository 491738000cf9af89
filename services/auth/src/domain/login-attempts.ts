/**
 * Failed sign-ins are counted in fixed 15-minute windows, per email (guessing
 * one person's password) and per client IP (trying many emails). Past either
 * limit no password is checked until the window ends.
 */
export const LOGIN_WINDOW_MS = 15 * 60_000;
export const LOGIN_LIMITS = { perEmail: 10, perIp: 50 } as const;

export interface LoginWindow {
  /** Start of the window, in ms (part of the counter's key). */
  readonly start: number;
  /** Seconds until the window ends (Retry-After); at least 1. */
  readonly retryAfterSeconds: number;
  /** When the counter may be swept. */
  readonly expiresAt: Date;
}

export function loginWindow(now: Date): LoginWindow {
  const t = now.getTime();
  const start = t - (t % LOGIN_WINDOW_MS);
  const end = start + LOGIN_WINDOW_MS;
  return { start, retryAfterSeconds: Math.max(1, Math.ceil((end - t) / 1000)), expiresAt: new Date(end + 60_000) };
}
