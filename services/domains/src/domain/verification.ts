import { REQUIRED_KINDS, type RecordCheck, type RecordKind, type RecordStatus } from './records.js';

/** Domain status (SPEC 3.1). */
export type DomainStatus = 'NOT_STARTED' | 'PENDING' | 'SUCCESS' | 'FAILED' | 'TEMPORARY_FAILURE';

/** dkimStatus and spfDetails values (SPEC 2.8 shows `Success`; the rest follow the same form). */
export type CheckStatus = 'Pending' | 'Success' | 'Failed' | 'TemporaryFailure';

export interface VerificationTimings {
  /** Checks that find a required record wrong or absent before FAILED. */
  readonly retryAttempts: number;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  readonly tempRetryBaseMs: number;
  readonly tempRetryMaxMs: number;
  /** Longest an unverified domain stays in TEMPORARY_FAILURE before FAILED. */
  readonly tempFailureMaxMs: number;
  readonly recheckIntervalMs: number;
}

/** What a check needs to know of the domain before it. */
export interface VerificationState {
  readonly status: DomainStatus;
  /** Checks in a row that found a required record wrong or absent. */
  readonly attempt: number;
  /** Checks in a row that could not conclude (SERVFAIL, timeout). */
  readonly tempFailures: number;
  /** Start of the current run of temporary failures. */
  readonly tempSince: Date | null;
  readonly dmarcAdded: boolean;
}

export interface VerificationOutcome {
  readonly status: DomainStatus;
  readonly isVerifying: boolean;
  readonly dkimStatus: CheckStatus;
  readonly spfDetails: CheckStatus;
  readonly dmarcAdded: boolean;
  readonly errorMessage: string | null;
  readonly verificationError: string | null;
  readonly recordStatuses: Partial<Record<RecordKind, RecordStatus>>;
  readonly attempt: number;
  readonly tempFailures: number;
  readonly tempSince: Date | null;
  /** When to check again; null stops checking until the next PUT verify. */
  readonly nextCheckAt: Date | null;
}

/** Delay before retry number n (1-based): base, 2 base, 4 base ... capped at max. */
export function backoffMs(n: number, baseMs: number, maxMs: number): number {
  const exp = Math.min(Math.max(n, 1) - 1, 40);
  return Math.min(baseMs * 2 ** exp, Math.max(maxMs, baseMs));
}

function recordStatusOf(c: RecordCheck): RecordStatus {
  if (c.outcome === 'match') return 'SUCCESS';
  if (c.outcome === 'temporary') return 'TEMPORARY_FAILURE';
  return 'FAILED';
}

function checkStatusOf(c: RecordCheck | undefined): CheckStatus {
  if (!c) return 'Pending';
  if (c.outcome === 'match') return 'Success';
  if (c.outcome === 'temporary') return 'TemporaryFailure';
  return 'Failed';
}

function summary(details: readonly string[]): string {
  if (details.length <= 1) return details[0] ?? '';
  return `${details[0]} (and ${details.length - 1} more problem${details.length > 2 ? 's' : ''})`;
}

/**
 * The verdict of one check. The domain is SUCCESS when the verification,
 * SPF and DKIM records all match (MX and DMARC are reported, not required).
 * A wrong or absent required record is retried with backoff and makes the
 * domain FAILED once the retry budget is spent; a lookup that cannot
 * conclude (SERVFAIL, timeout) makes it TEMPORARY_FAILURE and is retried on
 * its own, without a client call. A verified domain is re-checked
 * periodically: a removed record shows at once in its record status and
 * verificationError and demotes the domain to FAILED when still wrong after
 * the retry budget; DNS trouble alone never demotes a verified domain (a
 * resolver outage must not stop sending).
 */
export function decideOutcome(
  state: VerificationState,
  checks: readonly RecordCheck[],
  now: Date,
  timings: VerificationTimings,
  random: () => number = Math.random,
): VerificationOutcome {
  const byKind = new Map(checks.map((c) => [c.kind, c]));
  const required = REQUIRED_KINDS.map((k) => byKind.get(k) ?? { kind: k, outcome: 'temporary' as const, detail: `${k} record was not checked` });
  const negatives = required.filter((c) => c.outcome === 'mismatch' || c.outcome === 'missing');
  const temps = required.filter((c) => c.outcome === 'temporary');
  const dmarc = byKind.get('dmarc');
  const base = {
    dkimStatus: checkStatusOf(byKind.get('dkim')),
    spfDetails: checkStatusOf(byKind.get('spf')),
    dmarcAdded: dmarc === undefined || dmarc.outcome === 'temporary' ? state.dmarcAdded : dmarc.outcome === 'match',
    recordStatuses: Object.fromEntries(checks.map((c) => [c.kind, recordStatusOf(c)])) as Partial<Record<RecordKind, RecordStatus>>,
  };
  const at = (ms: number) => new Date(now.getTime() + ms);
  const wasVerified = state.status === 'SUCCESS';

  if (negatives.length === 0 && temps.length === 0) {
    const jittered = Math.round(timings.recheckIntervalMs * (0.9 + 0.2 * random()));
    return {
      ...base, status: 'SUCCESS', isVerifying: false, errorMessage: null, verificationError: null,
      attempt: 0, tempFailures: 0, tempSince: null, nextCheckAt: at(jittered),
    };
  }

  const problems = [...negatives, ...temps].map((c) => c.detail);
  const tempFailures = temps.length > 0 ? state.tempFailures + 1 : 0;
  const tempSince = temps.length > 0 ? (state.tempSince ?? now) : null;

  if (negatives.length > 0) {
    const attempt = state.attempt + 1;
    if (attempt >= timings.retryAttempts) {
      const tries = attempt === 1 ? '' : ` (after ${attempt} checks)`;
      return {
        ...base, status: 'FAILED', isVerifying: false,
        errorMessage: `${summary(negatives.map((c) => c.detail))}${tries}`, verificationError: problems.join('; '),
        attempt, tempFailures, tempSince, nextCheckAt: null,
      };
    }
    const status: DomainStatus = wasVerified ? 'SUCCESS' : temps.length > 0 ? 'TEMPORARY_FAILURE' : 'PENDING';
    const delay = temps.length > 0
      ? Math.min(backoffMs(attempt, timings.retryBaseMs, timings.retryMaxMs), backoffMs(tempFailures, timings.tempRetryBaseMs, timings.tempRetryMaxMs))
      : backoffMs(attempt, timings.retryBaseMs, timings.retryMaxMs);
    return {
      ...base, status, isVerifying: status !== 'SUCCESS',
      errorMessage: status === 'TEMPORARY_FAILURE' ? summary(temps.map((c) => c.detail)) : null,
      verificationError: problems.join('; '),
      attempt, tempFailures, tempSince, nextCheckAt: at(delay),
    };
  }

  // Only temporary failures: nothing is known about the records.
  const delay = backoffMs(tempFailures, timings.tempRetryBaseMs, timings.tempRetryMaxMs);
  if (wasVerified) {
    return {
      ...base, status: 'SUCCESS', isVerifying: false, errorMessage: null, verificationError: problems.join('; '),
      attempt: state.attempt, tempFailures, tempSince, nextCheckAt: at(delay),
    };
  }
  if (tempSince && now.getTime() - tempSince.getTime() >= timings.tempFailureMaxMs) {
    const hours = Math.round((now.getTime() - tempSince.getTime()) / 3_600_000);
    return {
      ...base, status: 'FAILED', isVerifying: false,
      errorMessage: `DNS lookups kept failing temporarily for ${hours >= 1 ? `${hours} h` : 'the whole retry window'}: ${summary(temps.map((c) => c.detail.replace(/; retrying automatically$/, '')))}`,
      verificationError: problems.join('; '),
      attempt: state.attempt, tempFailures, tempSince, nextCheckAt: null,
    };
  }
  return {
    ...base, status: 'TEMPORARY_FAILURE', isVerifying: true, errorMessage: summary(temps.map((c) => c.detail)),
    verificationError: problems.join('; '), attempt: state.attempt, tempFailures, tempSince, nextCheckAt: at(delay),
  };
}
