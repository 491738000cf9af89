import { Metadata, credentials, status, type CallOptions, type ChannelOptions, type ClientUnaryCall, type ServiceError } from '@grpc/grpc-js';
import { createBreaker, type Breaker, type BreakerOptions } from '../breaker.js';
import { currentRequestContext, REQUEST_ID_METADATA_KEY, type Logger } from '../logger.js';
import type { ServiceMetrics } from '../metrics.js';

type Callback<Res> = (err: ServiceError | null, res: Res) => void;

/** The promise form of a ts-proto grpc-js client: every unary method takes a request and returns the response. */
export type PromiseClient<C> = {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- matches any request/response type of a generated unary method
  [K in keyof C as C[K] extends (req: any, md: Metadata, opts: Partial<CallOptions>, cb: Callback<any>) => ClientUnaryCall ? K : never]:
    C[K] extends (req: infer Req, md: Metadata, opts: Partial<CallOptions>, cb: Callback<infer Res>) => ClientUnaryCall
      ? (req: Req, opts?: { deadlineMs?: number }) => Promise<Res>
      : never;
};

interface GrpcClientBase {
  close(): void;
  waitForReady(deadline: Date | number, callback: (error?: Error) => void): void;
}

export interface UpstreamClient<C> {
  readonly name: string;
  readonly call: PromiseClient<C>;
  readonly breaker: Breaker;
  readonly raw: C;
  close(): void;
}

/** Error an open breaker produces: shaped like a gRPC UNAVAILABLE so one mapper handles it. */
export class BreakerOpenError extends Error implements Partial<ServiceError> {
  readonly code = status.UNAVAILABLE;
  readonly details: string;
  readonly metadata = new Metadata();
  constructor(upstream: string) {
    super(`${upstream} is unavailable (circuit open)`);
    this.details = this.message;
  }
}

/**
 * Builds a client for one upstream: every call carries a deadline and the
 * current request id, and goes through that upstream's breaker.
 */
export function createGrpcClient<C extends GrpcClientBase>(opts: {
  name: string;
  address: string;
  ctor: new (address: string, creds: ReturnType<typeof credentials.createInsecure>, options?: Partial<ChannelOptions>) => C;
  logger: Logger;
  metrics?: ServiceMetrics;
  deadlineMs?: number;
  breaker?: BreakerOptions;
}): UpstreamClient<C> {
  const raw = new opts.ctor(opts.address, credentials.createInsecure(), {
    'grpc.keepalive_time_ms': 30_000,
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
    'grpc.max_send_message_length': 64 * 1024 * 1024,
  });
  const breaker = createBreaker({ name: opts.name, logger: opts.logger, stateGauge: opts.metrics?.breakerState, options: opts.breaker });
  const defaultDeadline = opts.deadlineMs ?? 5_000;
  const cache = new Map<string, unknown>();

  const call = new Proxy({} as PromiseClient<C>, {
    get(_target, prop) {
      if (typeof prop !== 'string') return undefined;
      const cached = cache.get(prop);
      if (cached) return cached;
      const method = (raw as unknown as Record<string, unknown>)[prop];
      if (typeof method !== 'function') return undefined;
      const fn = async (req: unknown, callOpts?: { deadlineMs?: number }) => {
        try {
          return await breaker.fire(() => new Promise((resolve, reject) => {
            const md = new Metadata();
            const ctx = currentRequestContext();
            if (ctx) md.set(REQUEST_ID_METADATA_KEY, ctx.requestId);
            const deadline = Date.now() + (callOpts?.deadlineMs ?? defaultDeadline);
            (method as (r: unknown, m: Metadata, o: Partial<CallOptions>, cb: Callback<unknown>) => ClientUnaryCall)
              .call(raw, req, md, { deadline }, (err, res) => (err ? reject(err) : resolve(res)));
          }));
        } catch (err) {
          if (breaker.opened && !(err instanceof Error && 'code' in err)) throw new BreakerOpenError(opts.name);
          if (err instanceof Error && (err as { code?: string }).code === 'EOPENBREAKER') throw new BreakerOpenError(opts.name);
          throw err;
        }
      };
      cache.set(prop, fn);
      return fn;
    },
  });

  return { name: opts.name, call, breaker, raw, close: () => { breaker.shutdown(); raw.close(); } };
}
