import { createHash } from 'node:crypto';
import { randomBase62 } from '@mailfleet/kit';

/** Session tokens are told apart from API keys (`mf_`) by their prefix. */
export const SESSION_PREFIX = 'mfs_';
const SESSION_PATTERN = /^mfs_[0-9A-Za-z]{43}$/;

export const SESSION_IDLE_MS = 12 * 3_600_000;
export const SESSION_ABSOLUTE_MS = 7 * 86_400_000;
/**
 * A session's last use is written at most this often: the idle expiry is 12 h,
 * so a minute's imprecision costs nothing and a busy console does not write on
 * every request.
 */
export const SESSION_TOUCH_EVERY_MS = 60_000;

export function generateSessionToken(): string {
  return `${SESSION_PREFIX}${randomBase62(43)}`; // ~256 bits
}

export function looksLikeSessionToken(token: string): boolean {
  return SESSION_PATTERN.test(token);
}

/** Plain SHA-256: the token carries ~256 bits, so a keyed or slow hash adds nothing. */
export function hashSessionToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export interface SessionTimes {
  readonly createdAt: Date;
  readonly lastSeenAt: Date;
  readonly revokedAt?: Date | undefined;
}

/** When the session ends unless used again: the earlier of the idle and the absolute expiry. */
export function sessionExpiresAt(s: SessionTimes): Date {
  return new Date(Math.min(s.createdAt.getTime() + SESSION_ABSOLUTE_MS, s.lastSeenAt.getTime() + SESSION_IDLE_MS));
}

export function sessionLive(s: SessionTimes, now: Date): boolean {
  return !s.revokedAt && now.getTime() < sessionExpiresAt(s).getTime();
}

/** Whether a use at `now` should be written (see SESSION_TOUCH_EVERY_MS). */
export function sessionNeedsTouch(s: SessionTimes, now: Date): boolean {
  return now.getTime() - s.lastSeenAt.getTime() >= SESSION_TOUCH_EVERY_MS;
}
