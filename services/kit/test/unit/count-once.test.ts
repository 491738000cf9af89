import { describe, expect, it } from 'vitest';
import { decideOnExistingMark, mayApply } from '../../src/count-once.js';

describe('count-once decisions', () => {
  const now = new Date('2026-05-10T10:00:00Z');
  const mark = (over: Partial<{ eventId: string; pending: boolean; until: Date }>) => ({
    eventId: 'evt_a', target: 'r', pending: true, until: new Date(now.getTime() + 10_000), ...over,
  });

  it('a finished counting only needs its token unpended, whichever event asks', () => {
    expect(decideOnExistingMark(mark({ pending: false }), 'evt_a', now)).toEqual({ action: 'unpend' });
    expect(decideOnExistingMark(mark({ pending: false }), 'evt_b', now)).toEqual({ action: 'unpend' });
  });

  it('a live claim: another event skips, the same event (a concurrent delivery) retries later', () => {
    expect(decideOnExistingMark(mark({}), 'evt_b', now)).toEqual({ action: 'skip' });
    expect(decideOnExistingMark(mark({}), 'evt_a', now)).toEqual({ action: 'retry' });
  });

  it('a claim whose lease ran out (its holder crashed) is taken over', () => {
    expect(decideOnExistingMark(mark({ until: now }), 'evt_a', now)).toEqual({ action: 'take-over' });
    expect(decideOnExistingMark(mark({ until: new Date(now.getTime() - 1) }), 'evt_b', now)).toEqual({ action: 'take-over' });
  });

  it('a mark without the protocol\'s fields (a plain "done" key from before it) reads as finished', () => {
    expect(decideOnExistingMark({ eventId: 'evt_a' }, 'evt_b', now)).toEqual({ action: 'unpend' });
  });

  it('applies only while the margin of the lease is left', () => {
    expect(mayApply(new Date(now.getTime() + 30_000), now, 30_000)).toBe(true);
    expect(mayApply(new Date(now.getTime() + 29_999), now, 30_000)).toBe(false);
  });
});
