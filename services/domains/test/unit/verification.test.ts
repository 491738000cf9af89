import { describe, expect, it } from 'vitest';
import type { RecordCheck, RecordKind, RecordOutcome } from '../../src/domain/records.js';
import { backoffMs, decideOutcome, type VerificationState, type VerificationTimings } from '../../src/domain/verification.js';

const timings: VerificationTimings = {
  retryAttempts: 3, retryBaseMs: 1_000, retryMaxMs: 3_000, tempRetryBaseMs: 500, tempRetryMaxMs: 2_000,
  tempFailureMaxMs: 60_000, recheckIntervalMs: 100_000,
};
const now = new Date('2026-01-01T00:00:00.000Z');
const fresh: VerificationState = { status: 'PENDING', attempt: 0, tempFailures: 0, tempSince: null, dmarcAdded: false };
const half = () => 0.5;

function checks(outcomes: Partial<Record<RecordKind, RecordOutcome>>): RecordCheck[] {
  const all: Record<RecordKind, RecordOutcome> = { verification: 'match', spf: 'match', dkim: 'match', mx: 'match', dmarc: 'match', ...outcomes };
  return (Object.entries(all) as [RecordKind, RecordOutcome][]).map(([kind, outcome]) => ({
    kind, outcome, detail: outcome === 'match' ? '' : `${kind} is ${outcome}`,
  }));
}
const after = (ms: number) => new Date(now.getTime() + ms);

describe('backoffMs', () => {
  it('doubles from the base up to the max', () => {
    expect([1, 2, 3, 4, 50].map((n) => backoffMs(n, 100, 500))).toEqual([100, 200, 400, 500, 500]);
    expect(backoffMs(0, 100, 500)).toBe(100);
  });
});

describe('decideOutcome', () => {
  it('is SUCCESS when verification, SPF and DKIM match, whatever MX and DMARC say', () => {
    const o = decideOutcome(fresh, checks({ mx: 'missing', dmarc: 'missing' }), now, timings, half);
    expect(o).toMatchObject({
      status: 'SUCCESS', isVerifying: false, dkimStatus: 'Success', spfDetails: 'Success', dmarcAdded: false,
      errorMessage: null, verificationError: null, attempt: 0, tempFailures: 0, tempSince: null, nextCheckAt: after(100_000),
    });
    expect(o.recordStatuses).toEqual({ verification: 'SUCCESS', spf: 'SUCCESS', dkim: 'SUCCESS', mx: 'FAILED', dmarc: 'FAILED' });
    expect(decideOutcome(fresh, checks({}), now, timings, half).dmarcAdded).toBe(true);
  });

  it('spreads re-checks of verified domains by +-10%', () => {
    expect(decideOutcome(fresh, checks({}), now, timings, () => 0).nextCheckAt).toEqual(after(90_000));
    expect(decideOutcome(fresh, checks({}), now, timings, () => 1).nextCheckAt).toEqual(after(110_000));
  });

  it('retries a wrong or absent record with backoff, then FAILED naming the record', () => {
    let state: VerificationState = fresh;
    const seen: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const o = decideOutcome(state, checks({ dkim: 'mismatch' }), now, timings);
      seen.push([o.status, o.isVerifying, o.attempt, o.nextCheckAt, o.dkimStatus, o.recordStatuses.dkim, o.errorMessage]);
      state = { ...state, status: o.status, attempt: o.attempt, tempFailures: o.tempFailures, tempSince: o.tempSince };
    }
    expect(seen).toEqual([
      ['PENDING', true, 1, after(1_000), 'Failed', 'FAILED', null],
      ['PENDING', true, 2, after(2_000), 'Failed', 'FAILED', null],
      ['FAILED', false, 3, null, 'Failed', 'FAILED', 'dkim is mismatch (after 3 checks)'],
    ]);
  });

  it('FAILED at once with a budget of one, listing every problem', () => {
    const o = decideOutcome(fresh, checks({ dkim: 'mismatch', spf: 'missing' }), now, { ...timings, retryAttempts: 1 });
    expect(o.status).toBe('FAILED');
    expect(o.errorMessage).toBe('spf is missing (and 1 more problem)');
    expect(o.verificationError).toBe('spf is missing; dkim is mismatch');
  });

  it('is TEMPORARY_FAILURE on SERVFAIL or timeout and retries on its own with backoff', () => {
    const o1 = decideOutcome(fresh, checks({ verification: 'temporary', spf: 'temporary', dkim: 'temporary', dmarc: 'temporary' }), now, timings);
    expect(o1).toMatchObject({
      status: 'TEMPORARY_FAILURE', isVerifying: true, dkimStatus: 'TemporaryFailure', spfDetails: 'TemporaryFailure',
      tempFailures: 1, tempSince: now, attempt: 0, nextCheckAt: after(500), errorMessage: 'verification is temporary (and 2 more problems)',
    });
    expect(o1.recordStatuses.dkim).toBe('TEMPORARY_FAILURE');
    const o2 = decideOutcome({ ...fresh, status: o1.status, tempFailures: 1, tempSince: now }, checks({ dkim: 'temporary' }), now, timings);
    expect(o2).toMatchObject({ status: 'TEMPORARY_FAILURE', tempFailures: 2, nextCheckAt: after(1_000), tempSince: now });
    // DNS answers again: SUCCESS, counters reset.
    const o3 = decideOutcome({ ...fresh, status: 'TEMPORARY_FAILURE', tempFailures: 2, tempSince: now }, checks({}), now, timings);
    expect(o3).toMatchObject({ status: 'SUCCESS', tempFailures: 0, tempSince: null });
  });

  it('keeps dmarcAdded when the DMARC lookup fails temporarily', () => {
    expect(decideOutcome({ ...fresh, dmarcAdded: true }, checks({ dmarc: 'temporary' }), now, timings).dmarcAdded).toBe(true);
  });

  it('gives up on endless temporary failures after the window', () => {
    const since = new Date(now.getTime() - 60_000);
    const o = decideOutcome({ ...fresh, status: 'TEMPORARY_FAILURE', tempFailures: 9, tempSince: since }, checks({ spf: 'temporary' }), now, timings);
    expect(o.status).toBe('FAILED');
    expect(o.nextCheckAt).toBeNull();
    expect(o.errorMessage).toContain('kept failing temporarily');
  });

  it('a wrong record together with DNS trouble counts against the budget, shown as TEMPORARY_FAILURE', () => {
    const o = decideOutcome(fresh, checks({ dkim: 'mismatch', spf: 'temporary' }), now, timings);
    expect(o).toMatchObject({ status: 'TEMPORARY_FAILURE', attempt: 1, tempFailures: 1, nextCheckAt: after(500) });
  });

  it('a verified domain stays SUCCESS through DNS trouble, and through a removed record until the budget is spent', () => {
    const verified: VerificationState = { status: 'SUCCESS', attempt: 0, tempFailures: 0, tempSince: null, dmarcAdded: true };
    const t = decideOutcome(verified, checks({ spf: 'temporary' }), now, timings);
    expect(t).toMatchObject({ status: 'SUCCESS', isVerifying: false, errorMessage: null, nextCheckAt: after(500) });
    expect(t.verificationError).toBe('spf is temporary');

    const r1 = decideOutcome(verified, checks({ verification: 'missing' }), now, timings);
    expect(r1).toMatchObject({ status: 'SUCCESS', isVerifying: false, attempt: 1, verificationError: 'verification is missing', nextCheckAt: after(1_000) });
    expect(r1.recordStatuses.verification).toBe('FAILED');
    const r3 = decideOutcome({ ...verified, attempt: 2 }, checks({ verification: 'missing' }), now, timings);
    expect(r3).toMatchObject({ status: 'FAILED', errorMessage: 'verification is missing (after 3 checks)' });
  });
});
