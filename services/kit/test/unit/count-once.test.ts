import { describe, expect, it } from 'vitest';
import { decideOnExistingMark, decideTakeOver, mayApply, tokenOf } from '../../src/count-once.js';

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

describe('batched count-once decisions', () => {
  it('a batch mark\'s token is its batch id; a single mark\'s its own id', () => {
    expect(tokenOf({ eventId: 'evt_a', batchId: 'cb_1', pending: true }, 'm1')).toBe('cb_1');
    expect(tokenOf({ eventId: 'evt_a', pending: true }, 'm1')).toBe('m1');
  });

  it('taking over: the old token on the target means applied (settle), its absence means claim again', () => {
    expect(decideTakeOver('cb_1', ['cb_0', 'cb_1'])).toBe('settle');
    expect(decideTakeOver('cb_1', ['cb_0'])).toBe('reclaim');
    expect(decideTakeOver('cb_1', [])).toBe('reclaim');
    // No target yet: nothing was ever applied to it.
    expect(decideTakeOver('cb_1', undefined)).toBe('reclaim');
  });
});
