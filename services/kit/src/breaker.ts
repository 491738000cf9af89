import CircuitBreaker from 'opossum';
import type { Gauge } from 'prom-client';
import { CLIENT_ERROR_CODES, isServiceError } from './errors.js';
import type { Logger } from './logger.js';

export interface BreakerOptions {
  /** Failure percentage within the rolling window that opens the breaker. */
  errorThresholdPercentage?: number;
  /** How long the breaker stays open before a trial call (ms). */
  resetTimeoutMs?: number;
  /** Calls needed in the window before the percentage counts. */
  volumeThreshold?: number;
  rollingCountTimeoutMs?: number;
}

export type Breaker = CircuitBreaker<unknown[], unknown>;

/**
 * One breaker per upstream. Errors that describe the request (NOT_FOUND,
 * INVALID_ARGUMENT, ...) are filtered so that callers' mistakes never trip
 * it; only unavailability, deadlines and internal faults do. Deadlines are the
 * caller's job (gRPC deadline per call), so opossum's own timeout is off.
 */
export function createBreaker(opts: {
  name: string;
  logger: Logger;
  stateGauge?: Gauge<'upstream'>;
  options?: BreakerOptions;
}): Breaker {
  const o = opts.options ?? {};
  const breaker = new CircuitBreaker(async (...args: unknown[]) => {
    const fn = args[0] as () => Promise<unknown>;
    return fn();
  }, {
    name: opts.name,
    timeout: false,
    errorThresholdPercentage: o.errorThresholdPercentage ?? 50,
    resetTimeout: o.resetTimeoutMs ?? 5_000,
    volumeThreshold: o.volumeThreshold ?? 10,
    rollingCountTimeout: o.rollingCountTimeoutMs ?? 10_000,
    errorFilter: (err: unknown) => isClientError(err),
  });
  const gauge = opts.stateGauge;
  gauge?.set({ upstream: opts.name }, 0);
  breaker.on('open', () => {
    gauge?.set({ upstream: opts.name }, 2);
    opts.logger.warn({ upstream: opts.name }, 'circuit breaker opened');
  });
  breaker.on('halfOpen', () => gauge?.set({ upstream: opts.name }, 1));
  breaker.on('close', () => {
    gauge?.set({ upstream: opts.name }, 0);
    opts.logger.info({ upstream: opts.name }, 'circuit breaker closed');
  });
  return breaker;
}

export function isClientError(err: unknown): boolean {
  if (isServiceError(err)) return CLIENT_ERROR_CODES.has(err.code);
  return typeof err === 'object' && err !== null && 'clientError' in err && (err as { clientError: unknown }).clientError === true;
}

/** Runs fn through the breaker; an open breaker rejects at once with an UNAVAILABLE-shaped error. */
export async function throughBreaker<T>(breaker: Breaker, fn: () => Promise<T>): Promise<T> {
  return (await breaker.fire(fn)) as T;
}
