import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Histogram, type Registry } from 'prom-client';

/** Rate, errors and duration per route, on the gateway's registry (served on the metrics port only). */
export const metricsPlugin = fp(async (app: FastifyInstance, opts: { registry: Registry }) => {
  const requests = new Counter({
    name: 'gateway_http_requests_total', help: 'HTTP requests by route, method and status', labelNames: ['route', 'method', 'status'], registers: [opts.registry],
  });
  const duration = new Histogram({
    name: 'gateway_http_request_duration_seconds', help: 'HTTP request time by route', labelNames: ['route', 'method'], registers: [opts.registry],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  });
  app.addHook('onResponse', async (request, reply) => {
    // The route pattern, never the raw URL: ids must not explode label cardinality.
    const route = request.routeOptions.url ?? 'unmatched';
    requests.inc({ route, method: request.method, status: String(reply.statusCode) });
    duration.observe({ route, method: request.method }, reply.elapsedTime / 1000);
  });
}, { name: 'metrics' });
