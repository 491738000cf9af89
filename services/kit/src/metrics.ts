import { createServer, type Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface ServiceMetrics {
  readonly registry: Registry;
  readonly rpcTotal: Counter<'method' | 'code'>;
  readonly rpcDuration: Histogram<'method'>;
  readonly breakerState: Gauge<'upstream'>;
  readonly eventsPublished: Counter<'type'>;
  readonly eventsConsumed: Counter<'consumer' | 'outcome'>;
}

/** prom-client names must be [a-zA-Z_:][a-zA-Z0-9_:]*; service names may hold dashes. */
export function metricPrefix(service: string): string {
  return service.replace(/[^a-zA-Z0-9_]/g, '_');
}

/** How often the event-loop lag is sampled. */
const EVENT_LOOP_SAMPLE_MS = 100;

/** One registry per process: default metrics plus RPC rate/errors/duration, breaker state and event counts. */
export function createMetrics(service: string): ServiceMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  // The event-loop lag histogram samples with a timer: prom-client's default (10 ms) wakes every process of the
  // platform 100 times a second, busy or idle. A stall still delays the next sample taken every 100 ms.
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  const p = metricPrefix(service);
  return {
    registry,
    rpcTotal: new Counter({ name: `${p}_rpc_requests_total`, help: 'RPCs handled, by method and gRPC status code', labelNames: ['method', 'code'], registers: [registry] }),
    rpcDuration: new Histogram({
      name: `${p}_rpc_duration_seconds`, help: 'RPC handling time', labelNames: ['method'], registers: [registry],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    }),
    breakerState: new Gauge({ name: `${p}_breaker_state`, help: 'Circuit breaker per upstream: 0 closed, 1 half-open, 2 open', labelNames: ['upstream'], registers: [registry] }),
    eventsPublished: new Counter({ name: `${p}_events_published_total`, help: 'Events published to JetStream by the outbox relay', labelNames: ['type'], registers: [registry] }),
    eventsConsumed: new Counter({ name: `${p}_events_consumed_total`, help: 'Events handled by durable consumers, by outcome (ack, nak, term)', labelNames: ['consumer', 'outcome'], registers: [registry] }),
  };
}

/** `/metrics` for Prometheus and `/livez` for the liveness probe (process only), on their own port. */
export async function startMetricsServer(opts: { port: number; host?: string; registry: Registry }): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    if (req.url === '/metrics') {
      opts.registry.metrics().then(
        (body) => {
          res.writeHead(200, { 'content-type': opts.registry.contentType });
          res.end(body);
        },
        () => {
          res.writeHead(500);
          res.end();
        },
      );
      return;
    }
    if (req.url === '/livez') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '0.0.0.0', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : opts.port;
  return {
    port,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}
