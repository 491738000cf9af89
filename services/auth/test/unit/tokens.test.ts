import { describe, expect, it } from 'vitest';
import { generateToken, hashesEqual, hashToken, looksLikeToken, partialToken } from '../../src/domain/tokens.js';
import { quotaPeriods, slugify } from '../../src/domain/plans.js';
import { limitFor, rateWindow } from '../../src/domain/rate-limits.js';

describe('API key tokens', () => {
  it('have a recognisable prefix and high entropy', () => {
    const tokens = new Set(Array.from({ length: 1000 }, () => generateToken()));
    expect(tokens.size).toBe(1000);
    for (const t of tokens) expect(looksLikeToken(t)).toBe(true);
    expect(generateToken()).toMatch(/^mf_[0-9A-Za-z]{40}$/);
    expect(looksLikeToken('mf_short')).toBe(false);
    expect(looksLikeToken(`us_${'a'.repeat(40)}`)).toBe(false);
  });

  it('hash with a keyed HMAC: same secret same hash, other secret other hash', () => {
    const t = generateToken();
    const h = hashToken('s'.repeat(32), t);
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    expect(hashToken('s'.repeat(32), t)).toBe(h);
    expect(hashToken('x'.repeat(32), t)).not.toBe(h);
    expect(h).not.toContain(t.slice(3, 10));
    expect(hashesEqual(h, hashToken('s'.repeat(32), t))).toBe(true);
    expect(hashesEqual(h, hashToken('s'.repeat(32), generateToken()))).toBe(false);
    expect(hashesEqual(h, '')).toBe(false);
  });

  it('partialToken is prefix + four, an ellipsis and the last four', () => {
    expect(partialToken('mf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789wxyz')).toBe('mf_AbCd...wxyz');
  });
});

describe('plans and windows', () => {
  it('slugs names', () => {
    expect(slugify('Acme Mail, Inc.')).toBe('acme-mail-inc');
    expect(slugify('Ünïcode Téam')).toBe('unicode-team');
    expect(slugify('!!!')).toBe('team');
  });
  it('quota periods are UTC day and month', () => {
    const p = quotaPeriods(new Date('2026-01-31T23:59:59.000Z'));
    expect(p).toMatchObject({ day: '2026-01-31', month: '2026-01' });
    expect(p.dayEndsAt.toISOString()).toBe('2026-02-01T00:00:00.000Z');
    expect(p.monthEndsAt.toISOString()).toBe('2026-02-01T00:00:00.000Z');
  });
  it('rate windows are fixed minutes', () => {
    const w = rateWindow(new Date('2026-01-01T00:00:45.500Z'));
    expect(new Date(w.start).toISOString()).toBe('2026-01-01T00:00:00.000Z');
    expect(w.resetSeconds).toBe(15);
    expect(limitFor('SEND_EMAIL', undefined)).toBe(100);
    expect(limitFor('SEND_EMAIL', { SEND_EMAIL: 5 })).toBe(5);
    expect(limitFor('CONTACT', { SEND_EMAIL: 5 })).toBe(500);
  });
});
