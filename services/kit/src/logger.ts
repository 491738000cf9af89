import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

/** Keys whose values never reach a log line, wherever they appear. */
export const REDACTED_PATHS = [
  'token', '*.token', 'secret', '*.secret', 'password', '*.password', 'privateKey', '*.privateKey',
  'authorization', '*.authorization', 'req.headers.authorization', 'headers.authorization',
  'apiKey', '*.apiKey', 'dkimPrivateKey', '*.dkimPrivateKey',
];

export function createLogger(opts: { service: string; level?: string; destination?: pino.DestinationStream }): Logger {
  const options: LoggerOptions = {
    name: opts.service,
    level: opts.level ?? 'info',
    base: { service: opts.service },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}

export interface RequestContext {
  readonly requestId: string;
  readonly log: Logger;
}

const storage = new AsyncLocalStorage<RequestContext>();

/** Runs fn with a request context; outbound gRPC calls made inside carry its request id. */
export function runWithRequestContext<T>(ctx: RequestContext, fn: () => T): T {
  return storage.run(ctx, fn);
}

export function currentRequestContext(): RequestContext | undefined {
  return storage.getStore();
}

export function newRequestId(): string {
  return randomUUID();
}

export const REQUEST_ID_METADATA_KEY = 'x-request-id';

/** Accepts a caller-supplied request id only when it is short and printable. */
export function sanitizeRequestId(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  return /^[\w.:-]{1,128}$/.test(value) ? value : undefined;
}
