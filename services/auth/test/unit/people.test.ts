import { describe, expect, it } from 'vitest';
import { loginWindow, LOGIN_WINDOW_MS } from '../../src/domain/login-attempts.js';
import { hashPassword, looksLikeEmail, normalizeEmail, passwordProblem, verifyPassword } from '../../src/domain/passwords.js';
import {
  generateSessionToken, hashSessionToken, looksLikeSessionToken, SESSION_ABSOLUTE_MS, SESSION_IDLE_MS, sessionExpiresAt, sessionLive, sessionNeedsTouch,
} from '../../src/domain/sessions.js';

// Cheap parameters keep the suite fast; the format and the check are the same as with the defaults.
const FAST = { N: 1024, r: 8, p: 1 };

describe('passwords', () => {
  it('hash with scrypt and a random salt, and verify only the right password', async () => {
    const a = await hashPassword('correct horse battery', FAST);
    const b = await hashPassword('correct horse battery', FAST);
    expect(a).toMatch(/^scrypt\$1024\$8\$1\$[\w-]+\$[\w-]+$/);
    expect(a).not.toBe(b);
    expect(a).not.toContain('correct');
    expect(await verifyPassword('correct horse battery', a)).toBe(true);
    expect(await verifyPassword('correct horse batterY', a)).toBe(false);
    expect(await verifyPassword('', a)).toBe(false);
  });

  it('uses the parameters stored with the hash, and refuses malformed hashes', async () => {
    const h = await hashPassword('0123456789', { N: 2048, r: 4, p: 1 });
    expect(await verifyPassword('0123456789', h)).toBe(true);
    expect(await verifyPassword('0123456789', 'plain$0123456789')).toBe(false);
    expect(await verifyPassword('0123456789', h.replace(/\$[\w-]+$/, '$AAAA'))).toBe(false);
  });

  it('enforces the length rule and normalises emails case-insensitively', () => {
    expect(passwordProblem('123456789')).toMatch(/at least 10/);
    expect(passwordProblem('1234567890')).toBeUndefined();
    expect(passwordProblem('x'.repeat(1025))).toMatch(/at most/);
    expect(normalizeEmail('  Ann@Example.COM ')).toBe('ann@example.com');
    expect(looksLikeEmail('ann@example.com')).toBe(true);
    expect(looksLikeEmail('ann@example')).toBe(false);
    expect(looksLikeEmail('not an email')).toBe(false);
  });
});

describe('sessions', () => {
  it('tokens are prefixed, random, and stored as their SHA-256', () => {
    const tokens = new Set(Array.from({ length: 500 }, () => generateSessionToken()));
    expect(tokens.size).toBe(500);
    const t = [...tokens][0]!;
    expect(looksLikeSessionToken(t)).toBe(true);
    expect(looksLikeSessionToken(`mf_${'a'.repeat(40)}`)).toBe(false);
    expect(hashSessionToken(t)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashSessionToken(t)).toBe(hashSessionToken(t));
    expect(hashSessionToken(t)).not.toContain(t.slice(4));
  });

  it('expire after 12 h idle or 7 days at most, whichever is first, and at once when revoked', () => {
    const created = new Date('2026-01-01T00:00:00Z');
    const fresh = { createdAt: created, lastSeenAt: created };
    expect(sessionExpiresAt(fresh).getTime()).toBe(created.getTime() + SESSION_IDLE_MS);
    expect(sessionLive(fresh, new Date(created.getTime() + SESSION_IDLE_MS - 1))).toBe(true);
    expect(sessionLive(fresh, new Date(created.getTime() + SESSION_IDLE_MS))).toBe(false);
    // Used an hour before the absolute end: the absolute end still wins.
    const late = { createdAt: created, lastSeenAt: new Date(created.getTime() + SESSION_ABSOLUTE_MS - 3_600_000) };
    expect(sessionExpiresAt(late).getTime()).toBe(created.getTime() + SESSION_ABSOLUTE_MS);
    expect(sessionLive(late, new Date(created.getTime() + SESSION_ABSOLUTE_MS))).toBe(false);
    expect(sessionLive({ ...fresh, revokedAt: created }, created)).toBe(false);
  });

  it('write their last use at most once a minute', () => {
    const seen = new Date('2026-01-01T00:00:00Z');
    expect(sessionNeedsTouch({ createdAt: seen, lastSeenAt: seen }, new Date(seen.getTime() + 59_999))).toBe(false);
    expect(sessionNeedsTouch({ createdAt: seen, lastSeenAt: seen }, new Date(seen.getTime() + 60_000))).toBe(true);
  });
});

describe('login attempt windows', () => {
  it('are fixed 15-minute windows with the seconds left as Retry-After', () => {
    const start = Date.UTC(2026, 0, 1, 10, 15);
    const w = loginWindow(new Date(start + 60_000));
    expect(w.start).toBe(start);
    expect(w.retryAfterSeconds).toBe((LOGIN_WINDOW_MS - 60_000) / 1000);
    expect(loginWindow(new Date(start + LOGIN_WINDOW_MS - 1)).retryAfterSeconds).toBe(1);
    expect(w.expiresAt.getTime()).toBeGreaterThan(start + LOGIN_WINDOW_MS);
  });
});
