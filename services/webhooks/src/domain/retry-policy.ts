/** How deliveries are retried and when a webhook is given up on (config; SPEC 6.5 leaves the numbers open). */
export interface RetryPolicy {
  /** Attempts per event, the first included. */
  readonly maxAttempts: number;
  /** Delay before the first retry; doubles for each further one. */
  readonly baseDelayMs: number;
  /** Upper bound of one delay. */
  readonly maxDelayMs: number;
  /** Events in a row that failed every attempt before the webhook turns FAILED. */
  readonly failureThreshold: number;
}

/** Defaults: 6 attempts, retries after ~20 s, 40 s, 80 s, 160 s and 320 s: about 10 minutes in all. */
export const DEFAULT_RETRY_POLICY: RetryPolicy = { maxAttempts: 6, baseDelayMs: 20_000, maxDelayMs: 3_600_000, failureThreshold: 10 };

/**
 * Delay after failed attempt number `attempt` (1-based): exponential, with
 * +-20 % jitter so that retries of many deliveries to one endpoint do not
 * arrive in lockstep. `random` is in [0, 1).
 */
export function retryDelayMs(attempt: number, policy: Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>, random: number = Math.random()): number {
  const exp = policy.baseDelayMs * 2 ** Math.max(0, Math.min(attempt - 1, 30));
  const capped = Math.min(exp, policy.maxDelayMs);
  return Math.max(1, Math.round(capped * (0.8 + 0.4 * random)));
}

export type DeliveryState = 'PENDING' | 'SUCCESS' | 'FAILED';

/** What one attempt produced. */
export interface AttemptResult {
  readonly ok: boolean;
  /** HTTP status, when a response came. */
  readonly status?: number | undefined;
  /** Start of the attempt to the end of reading the (truncated) response. */
  readonly durationMs: number;
  /** The response body, truncated; when a response came. */
  readonly responseText?: string | undefined;
  /** Why it failed; absent on success. */
  readonly error?: string | undefined;
}

export interface AttemptOutcome {
  readonly status: DeliveryState;
  readonly attempt: number;
  readonly nextAttemptAt: Date | null;
  /** The event has failed for good on its automatic schedule: counts towards the webhook's consecutive failures. */
  readonly eventFailed: boolean;
}

/**
 * The state of a delivery after an attempt. `scheduled` is false for a manual
 * retry of a finished delivery: that is one extra attempt, never rescheduled,
 * and its failure does not count the event as failed a second time.
 */
export function decideOutcome(input: {
  attemptsBefore: number;
  scheduled: boolean;
  result: Pick<AttemptResult, 'ok'>;
  policy: RetryPolicy;
  now: Date;
  random?: number;
}): AttemptOutcome {
  const attempt = input.attemptsBefore + 1;
  if (input.result.ok) return { status: 'SUCCESS', attempt, nextAttemptAt: null, eventFailed: false };
  if (!input.scheduled) return { status: 'FAILED', attempt, nextAttemptAt: null, eventFailed: false };
  if (attempt < input.policy.maxAttempts) {
    const delay = retryDelayMs(attempt, input.policy, input.random);
    return { status: 'PENDING', attempt, nextAttemptAt: new Date(input.now.getTime() + delay), eventFailed: false };
  }
  return { status: 'FAILED', attempt, nextAttemptAt: null, eventFailed: true };
}
