import { describe, expect, it } from 'vitest';
import { parseQuotaDay, quotaGrant, quotaRoom } from '../../src/domain/admission.js';

const state = (dailyLimit: number, monthlyLimit: number, dayCount = 0, monthCount = 0) => ({ dailyLimit, monthlyLimit, dayCount, monthCount });

describe('quota reservation', () => {
  it('grants the block asked for when it fits, capped at a tenth of each limit beyond what the send needs', () => {
    expect(quotaGrant(state(50_000, -1), 1, 101)).toBe(101);
    expect(quotaGrant(state(100, 3_000), 1, 101)).toBe(11);
    expect(quotaGrant(state(1_000, 200), 5, 500)).toBe(25);
  });

  it('keeps small quotas exact: no block beyond the send', () => {
    expect(quotaGrant(state(2, 100), 1, 101)).toBe(1);
    expect(quotaGrant(state(9, -1), 3, 50)).toBe(3);
  });

  it('grants no more than the day and the month have left, and nothing when the minimum does not fit', () => {
    expect(quotaGrant(state(100, 3_000, 95), 1, 101)).toBe(5);
    expect(quotaGrant(state(100, 3_000, 0, 2_998), 1, 101)).toBe(2);
    expect(quotaGrant(state(100, 3_000, 98), 3, 103)).toBe(0);
    expect(quotaGrant(state(100, 3_000, 0, 3_000), 1, 1)).toBe(0);
    expect(quotaGrant(state(0, -1), 1, 1)).toBe(0);
    expect(quotaGrant(state(100, -1), 0, 10)).toBe(0);
  });

  it('reports the room left, unlimited months as infinite', () => {
    expect(quotaRoom(state(100, -1, 40, 999))).toEqual({ day: 60, month: Number.POSITIVE_INFINITY });
    expect(quotaRoom(state(100, 50, 120, 60))).toEqual({ day: 0, month: 0 });
  });

  it('parses quota days', () => {
    expect(parseQuotaDay('2026-11-23')).toEqual({ day: '2026-11-23', month: '2026-11' });
    expect(parseQuotaDay('2026-11')).toBeUndefined();
    expect(parseQuotaDay('2026-13-45')).toBeUndefined();
    expect(parseQuotaDay('x:day:2026-11-23')).toBeUndefined();
  });
});
