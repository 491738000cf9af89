import { describe, expect, it, vi } from 'vitest';
import { awayFromUtcMidnight } from '../../src/day-boundary.js';

const midnight = Date.parse('2026-11-22T00:00:00.000Z');

describe('awayFromUtcMidnight', () => {
  it('waits nothing in the middle of the day, and the rest of the margin just after midnight', async () => {
    expect(await awayFromUtcMidnight({ needMs: 60_000, afterMs: 60_000 }, () => midnight + 6 * 3600_000)).toBe(0);
    vi.useFakeTimers();
    try {
      const waiting = awayFromUtcMidnight({ needMs: 60_000, afterMs: 60_000 }, () => midnight + 20_000);
      await vi.advanceTimersByTimeAsync(40_000);
      expect(await waiting).toBe(40_000);
    } finally {
      vi.useRealTimers();
    }
  });

  it('just before midnight waits past it, plus the margin after', async () => {
    vi.useFakeTimers();
    try {
      const waiting = awayFromUtcMidnight({ needMs: 120_000, afterMs: 10_000 }, () => midnight - 90_000);
      await vi.advanceTimersByTimeAsync(100_000);
      expect(await waiting).toBe(100_000);
    } finally {
      vi.useRealTimers();
    }
  });
});
