import type { Collection, Document } from 'mongodb';
import { bool, int, oneOf, port, str, url, type Env, type ConfigOf } from './config.js';
import { createGrpcServer, type GrpcServerHandle, type ServiceBinding } from './grpc/server.js';
import { createLifecycle, retryUntil, type Lifecycle } from './lifecycle.js';
import { createLogger, type Logger } from './logger.js';
import { createMetrics, startMetricsServer, type ServiceMetrics } from './metrics.js';
import { connectMongo, type MongoHandle } from './mongo.js';
import { connectNats, type NatsHandle } from './nats/connection.js';
import type { DurableConsumer } from './nats/consumer.js';
import { ensureEventStream } from './nats/events.js';
import { createOutboxRelay, type OutboxRelay } from './nats/outbox.js';

export const SERVICE_NAMES = ['auth', 'domains', 'contacts', 'emails', 'campaigns', 'suppressions', 'webhooks', 'analytics'] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

/** Default ports of the local platform: gRPC 50051.., metrics 9101.. in SERVICE_NAMES order. */
export function defaultPorts(name: ServiceName): { grpc: number; metrics: number } {
  const i = SERVICE_NAMES.indexOf(name);
  return { grpc: 50051 + i, metrics: 9101 + i };
}

/** Configuration every service reads; a service adds its own fields beside these. */
export function baseServiceConfigSpec(name: ServiceName) {
  const ports = defaultPorts(name);
  return {
    grpcPort: port('GRPC_PORT', ports.grpc),
    grpcHost: str('GRPC_HOST', '0.0.0.0'),
    metricsPort: port('METRICS_PORT', ports.metrics),
    mongoUrl: url('MONGO_URL', ['mongodb', 'mongodb+srv'], 'mongodb://127.0.0.1:27017'),
    mongoDb: str('MONGO_DB', `mailfleet_${name}`),
    natsUrl: str('NATS_URL', 'nats://127.0.0.1:4222'),
    natsStreamReplicas: int('NATS_STREAM_REPLICAS', 1, 1, 5),
    logLevel: oneOf('LOG_LEVEL', ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const, 'info'),
    shutdownTimeoutMs: int('SHUTDOWN_TIMEOUT_MS', 25_000, 1_000),
    /** Time between NOT_SERVING and closing, so load balancers stop routing first (Kubernetes). */
    shutdownDelayMs: int('SHUTDOWN_DELAY_MS', 0, 0),
    grpcReflection: bool('GRPC_REFLECTION', true),
    /**
     * The outbox relay's safety-net pass over its collections. Writes kick a pass straight away; this
     * one finds what a process that died before its kick left (a whole-collection scan on FerretDB).
     */
    outboxScanIntervalMs: int('OUTBOX_SCAN_INTERVAL_MS', 30_000, 100),
  };
}
export type BaseServiceConfig = ConfigOf<ReturnType<typeof baseServiceConfigSpec>>;

export interface ServiceInfra {
  readonly logger: Logger;
  readonly metrics: ServiceMetrics;
  readonly mongo: MongoHandle;
  readonly nats: NatsHandle;
  readonly lifecycle: Lifecycle;
}

export interface ServiceParts {
  readonly services: readonly ServiceBinding[];
  readonly consumers?: readonly DurableConsumer[];
  /** Collections whose documents carry an outbox; the relay publishes from them. */
  readonly outboxCollections?: readonly Collection<Document>[];
  /** Extra readiness checks beyond Mongo and NATS. */
  readonly readiness?: readonly (() => Promise<void>)[];
  /** Background workers stopped after consumers, before NATS is drained. */
  readonly workers?: readonly { name: string; stop: () => Promise<void> }[];
  /** Called with the relay once it exists, so write paths can kick it. */
  readonly onRelay?: (relay: OutboxRelay) => void;
}

export interface RunningService {
  readonly infra: ServiceInfra;
  readonly grpc: GrpcServerHandle;
  readonly relay: OutboxRelay;
  readonly metricsPort: number;
  shutdown(reason?: string): Promise<void>;
}

/**
 * The common composition for a service process: metrics, Mongo and NATS
 * (waited for, not crashed on), the event stream, the service's own parts,
 * the outbox relay, consumers and the gRPC server with health and reflection.
 * Shutdown order: NOT_SERVING, (delay), stop consumers and workers, finish
 * in-flight RPCs, last outbox pass, drain NATS, close Mongo, metrics.
 */
export async function startService(opts: {
  name: ServiceName;
  config: BaseServiceConfig;
  env: Env;
  build: (infra: ServiceInfra) => Promise<ServiceParts>;
  reflection?: { protoRoot: string; files: readonly string[] };
  logger?: Logger;
  /** Install SIGTERM/SIGINT handlers that run the ordered shutdown and exit (process entry points). */
  handleSignals?: boolean;
}): Promise<RunningService> {
  const { config } = opts;
  const logger = opts.logger ?? createLogger({ service: opts.name, level: config.logLevel });
  const metrics = createMetrics(opts.name);
  const lifecycle = createLifecycle({ logger, timeoutMs: config.shutdownTimeoutMs });
  const abort = new AbortController();
  lifecycle.add({ name: 'abort start-up', run: () => abort.abort() });
  if (opts.handleSignals) lifecycle.installSignalHandlers();

  const metricsServer = await startMetricsServer({ port: config.metricsPort, registry: metrics.registry });
  const mongo = await retryUntil('mongo', () => connectMongo({ url: config.mongoUrl, dbName: config.mongoDb, appName: opts.name }), { logger, signal: abort.signal });
  const nats = await retryUntil('nats', () => connectNats({ url: config.natsUrl, name: opts.name, logger }), { logger, signal: abort.signal });
  await retryUntil('event stream', () => ensureEventStream(nats.jsm, { replicas: config.natsStreamReplicas }), { logger, signal: abort.signal });

  const infra: ServiceInfra = { logger, metrics, mongo, nats, lifecycle };
  const parts = await opts.build(infra);
  const relay = createOutboxRelay({ nats, collections: parts.outboxCollections ?? [], logger, metrics, intervalMs: config.outboxScanIntervalMs });
  parts.onRelay?.(relay);

  const grpc = await createGrpcServer({
    services: parts.services,
    port: config.grpcPort,
    host: config.grpcHost,
    logger,
    readiness: [() => mongo.ping(), () => nats.ping(), ...(parts.readiness ?? [])],
    reflection: config.grpcReflection ? opts.reflection : undefined,
  });

  lifecycle.add({ name: 'not serving', run: () => grpc.markNotServing() });
  if (config.shutdownDelayMs > 0) lifecycle.add({ name: 'delay', run: () => new Promise((r) => setTimeout(r, config.shutdownDelayMs)) });
  lifecycle.add({ name: 'stop consumers', run: async () => { await Promise.all((parts.consumers ?? []).map((c) => c.stop())); } });
  for (const w of parts.workers ?? []) lifecycle.add({ name: `stop ${w.name}`, run: () => w.stop() });
  lifecycle.add({ name: 'grpc tryShutdown', run: () => grpc.shutdown(Math.max(1_000, config.shutdownTimeoutMs - 5_000)) });
  lifecycle.add({ name: 'outbox final pass', run: async () => { await relay.stop(); await relay.drainOnce().catch((err: unknown) => logger.warn({ err }, 'final outbox pass failed; events stay in the outbox for the next start')); } });
  lifecycle.add({ name: 'drain nats', run: () => nats.drain() });
  lifecycle.add({ name: 'close mongo', run: () => mongo.close() });
  lifecycle.add({ name: 'close metrics', run: () => metricsServer.close() });

  for (const c of parts.consumers ?? []) await c.start();
  relay.start();
  await grpc.refreshHealth();
  logger.info({ grpcPort: grpc.port, metricsPort: metricsServer.port }, `${opts.name} started`);

  return { infra, grpc, relay, metricsPort: metricsServer.port, shutdown: (reason = 'shutdown') => lifecycle.shutdown(reason) };
}
