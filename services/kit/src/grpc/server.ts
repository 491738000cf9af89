import {
  Server, ServerCredentials, status,
  type handleUnaryCall, type ServerUnaryCall, type sendUnaryData, type ServiceDefinition, type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation, protoPath as healthProtoPath } from 'grpc-health-check';
import { toGrpcError } from '../errors.js';
import {
  newRequestId, REQUEST_ID_METADATA_KEY, runWithRequestContext, sanitizeRequestId,
  type Logger, type RequestContext,
} from '../logger.js';
import type { ServiceMetrics } from '../metrics.js';
import { releaseHeldPort } from './held-port.js';

export interface CallContext extends RequestContext {
  /** Milliseconds left before the caller's deadline (Infinity when none was set). */
  readonly remainingMs: () => number;
}

/** What a service writes: promise-returning handlers, one per unary RPC of the generated server interface. */
export type UnaryHandlers<S> = {
  // `string extends K` drops the index signature generated servers inherit from UntypedServiceImplementation.
  [K in keyof S as string extends K ? never : K]: S[K] extends handleUnaryCall<infer Req, infer Res> ? (req: Req, ctx: CallContext) => Promise<Res> : never;
};

export interface ServiceBinding {
  readonly name: string;
  readonly definition: ServiceDefinition;
  readonly implementation: UntypedServiceImplementation;
}

/**
 * Binds promise handlers to a generated service definition. Every call runs
 * in a request context (request id from metadata, or a new one), is timed and
 * counted, and any error thrown goes through the one domain-error mapper.
 */
export function bindService<S>(opts: {
  name: string;
  definition: ServiceDefinition;
  handlers: UnaryHandlers<S>;
  logger: Logger;
  metrics?: ServiceMetrics;
}): ServiceBinding {
  const implementation: UntypedServiceImplementation = {};
  for (const [method, def] of Object.entries(opts.definition)) {
    const handler = (opts.handlers as Record<string, ((req: unknown, ctx: CallContext) => Promise<unknown>) | undefined>)[method];
    if (typeof handler !== 'function') throw new Error(`${opts.name}: no handler for ${method}`);
    if (def.requestStream || def.responseStream) throw new Error(`${opts.name}.${method}: only unary RPCs are bound by bindService`);
    const fullName = def.path.replace(/^\//, '');
    implementation[method] = ((call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
      const requestId = sanitizeRequestId(call.metadata.get(REQUEST_ID_METADATA_KEY)[0]) ?? newRequestId();
      const log = opts.logger.child({ requestId, rpc: fullName });
      const deadline = call.getDeadline();
      const deadlineMs = deadline instanceof Date ? deadline.getTime() : Number(deadline);
      const ctx: CallContext = {
        requestId,
        log,
        remainingMs: () => (Number.isFinite(deadlineMs) && deadlineMs > 0 ? deadlineMs - Date.now() : Infinity),
      };
      const stopTimer = opts.metrics?.rpcDuration.startTimer({ method: fullName });
      runWithRequestContext(ctx, () => handler(call.request, ctx)).then(
        (res) => {
          stopTimer?.();
          opts.metrics?.rpcTotal.inc({ method: fullName, code: 'OK' });
          callback(null, res);
        },
        (err: unknown) => {
          stopTimer?.();
          const mapped = toGrpcError(err);
          opts.metrics?.rpcTotal.inc({ method: fullName, code: status[mapped.code] ?? String(mapped.code) });
          if (mapped.internal) log.error({ err }, 'rpc failed');
          else log.debug({ code: status[mapped.code], message: mapped.details }, 'rpc rejected');
          callback({ code: mapped.code, details: mapped.details, metadata: mapped.metadata }, null);
        },
      );
    }) as handleUnaryCall<unknown, unknown>;
  }
  return { name: opts.name, definition: opts.definition, implementation };
}

export type ReadinessCheck = () => Promise<void>;

export interface GrpcServerHandle {
  readonly server: Server;
  readonly port: number;
  /** Runs the readiness checks now and sets the health status from their result. */
  refreshHealth(): Promise<boolean>;
  /** Marks every service NOT_SERVING (first step of shutdown). */
  markNotServing(): void;
  /** Graceful: stops accepting calls and waits for in-flight ones; forces after timeoutMs. */
  shutdown(timeoutMs: number): Promise<void>;
}

/**
 * A gRPC server with grpc.health.v1 and server reflection. Health is
 * NOT_SERVING until every readiness check (Mongo ping, NATS connected, ...)
 * passes, and is re-evaluated periodically so a lost dependency shows.
 */
export async function createGrpcServer(opts: {
  services: readonly ServiceBinding[];
  port: number;
  host?: string;
  logger: Logger;
  readiness: readonly ReadinessCheck[];
  /** .proto files served through reflection. */
  reflection?: { protoRoot: string; files: readonly string[] };
  healthIntervalMs?: number;
  maxConnectionAgeMs?: number;
}): Promise<GrpcServerHandle> {
  const server = new Server({
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
    // Clients behind a Kubernetes Service keep one connection (pick_first); ending connections
    // after a while makes them reconnect and spread over new replicas after a scale-up.
    'grpc.max_connection_age_ms': opts.maxConnectionAgeMs ?? 5 * 60_000,
    'grpc.max_connection_age_grace_ms': 30_000,
  });
  for (const s of opts.services) server.addService(s.definition, s.implementation);

  const serviceNames = opts.services.map((s) => Object.values(s.definition)[0]?.path.split('/')[1] ?? s.name);
  const initial: Record<string, 'NOT_SERVING'> = { '': 'NOT_SERVING' };
  for (const n of serviceNames) initial[n] = 'NOT_SERVING';
  const health = new HealthImplementation(initial);
  health.addToServer(server);

  if (opts.reflection) {
    const loadOpts = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };
    const pkg: protoLoader.PackageDefinition = {
      ...protoLoader.loadSync([...opts.reflection.files], { ...loadOpts, includeDirs: [opts.reflection.protoRoot] }),
      ...protoLoader.loadSync(healthProtoPath, loadOpts),
    };
    // Advertise only what this process serves: a .proto may define a service not bound (yet).
    const served = new Set([...serviceNames, 'grpc.health.v1.Health']);
    for (const [name, def] of Object.entries(pkg)) {
      const isService = typeof def === 'object' && def !== null && !('format' in def);
      if (isService && !served.has(name)) delete pkg[name];
    }
    new ReflectionService(pkg).addToServer(server);
  }

  releaseHeldPort();
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${opts.host ?? '0.0.0.0'}:${opts.port}`, ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound)));
  });

  let shuttingDown = false;
  const setAll = (s: 'SERVING' | 'NOT_SERVING') => {
    health.setStatus('', s);
    for (const n of serviceNames) health.setStatus(n, s);
  };
  let lastReady = false;
  const refreshHealth = async (): Promise<boolean> => {
    if (shuttingDown) return false;
    const results = await Promise.allSettled(opts.readiness.map((check) => check()));
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    const ready = failed.length === 0;
    if (shuttingDown) return false;
    if (ready !== lastReady) {
      if (ready) opts.logger.info('dependencies reachable: SERVING');
      else opts.logger.warn({ reasons: failed.map((f) => String((f.reason as Error)?.message ?? f.reason)) }, 'dependency check failed: NOT_SERVING');
    }
    lastReady = ready;
    setAll(ready ? 'SERVING' : 'NOT_SERVING');
    return ready;
  };
  const timer = setInterval(() => void refreshHealth(), opts.healthIntervalMs ?? 5_000);
  timer.unref();

  return {
    server,
    port,
    refreshHealth,
    markNotServing() {
      shuttingDown = true;
      clearInterval(timer);
      setAll('NOT_SERVING');
    },
    async shutdown(timeoutMs: number) {
      shuttingDown = true;
      clearInterval(timer);
      setAll('NOT_SERVING');
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          opts.logger.warn('in-flight RPCs did not finish in time; forcing shutdown');
          server.forceShutdown();
          resolve();
        }, timeoutMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
    },
  };
}
