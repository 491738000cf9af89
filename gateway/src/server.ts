import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  ConfigError, connectNats, createLifecycle, createLogger, createMetrics, retryUntil, startMetricsServer,
} from '@mailfleet/kit';
import { buildApp } from './app.js';
import { createAuthCache } from './clients/auth-cache.js';
import { createAuthAuthenticator, createAuthFold } from './clients/authenticator.js';
import { createDevInbox } from './clients/dev-inbox.js';
import { listenForKeyRevocations } from './clients/key-revocations.js';
import { createKeyTouchBuffer } from './clients/key-touches.js';
import { createRateLimiter } from './clients/rate-limiter.js';
import { createSessionAuthenticator } from './clients/sessions.js';
import { closeUpstreams, createUpstreams } from './clients/upstreams.js';
import { loadGatewayConfig } from './config.js';
import { v1Areas } from './routes/v1/index.js';

// Process entry: the only place that reads process.env, opens connections and listens.
let config;
try {
  config = loadGatewayConfig(process.env);
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`gateway: ${err.message}\n`);
    process.exit(2);
  }
  throw err;
}

const logger = createLogger({ service: 'gateway', level: config.logLevel });
const metrics = createMetrics('gateway');
const lifecycle = createLifecycle({ logger, timeoutMs: config.shutdownTimeoutMs });
lifecycle.installSignalHandlers();

let draining = false;
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
const upstreams = createUpstreams(config, logger, metrics);
const metricsServer = await startMetricsServer({ port: config.metricsPort, registry: metrics.registry });
const nats = await retryUntil('nats', () => connectNats({ url: config.natsUrl, name: 'gateway', logger }), { logger });

const cache = createAuthCache(createAuthAuthenticator(upstreams), { ttlMs: config.authCacheTtlMs, unheardTtlMs: config.authCacheUnheardTtlMs });
const revocations = listenForKeyRevocations({ nats, cache, logger });
const touches = createKeyTouchBuffer({
  send: (batch) => upstreams.auth.call.touchKeys({ touches: batch }),
  logger,
  intervalMs: config.keyTouchIntervalMs,
});

const limiter = createRateLimiter({ syncIntervalMs: config.rateLimitSyncMs, logger, fold: createAuthFold(upstreams) });

const app = await buildApp({
  logger,
  registry: metrics.registry,
  authenticate: cache.authenticate,
  authenticateSession: createSessionAuthenticator(upstreams),
  publicUrl: config.publicUrl || undefined,
  onAuthenticated: (p) => touches.record(p),
  rateLimitCheck: (principal, family, cost) => limiter.check(principal, family, cost),
  areas: v1Areas({
    upstreams, onKeyDeleted: (keyId) => cache.revokeKey(keyId), publicUrl: config.publicUrl || undefined,
    ...(config.devInboxDir ? { devInbox: createDevInbox({ mailDir: config.devInboxDir, dataDir: config.dataDir || path.dirname(config.devInboxDir) }) } : {}),
  }),
  info: { version: pkg.version, environment: config.localMode ? 'local' : config.environment, startedAt: Date.now(), draining: () => draining },
  trustProxy: config.trustProxy,
  consoleDir: config.consoleDir,
});

// Order: fail health for SHUTDOWN_DELAY_MS so the load balancer stops routing here, stop taking requests and finish in-flight ones, flush last-use times and rate-limit counts, stop listening, close channels.
lifecycle.add({
  name: 'drain',
  run: async () => {
    draining = true;
    if (config.shutdownDelayMs > 0) await new Promise((r) => setTimeout(r, config.shutdownDelayMs));
  },
});
lifecycle.add({ name: 'close http', run: () => app.close() });
lifecycle.add({ name: 'flush key touches', run: () => touches.stop() });
lifecycle.add({ name: 'fold rate-limit counts', run: () => limiter.stop() });
lifecycle.add({ name: 'stop revocation listener', run: () => revocations.stop() });
lifecycle.add({ name: 'drain nats', run: () => nats.drain() });
lifecycle.add({ name: 'close upstreams', run: () => closeUpstreams(upstreams) });
lifecycle.add({ name: 'close metrics', run: () => metricsServer.close() });

await app.listen({ port: config.port, host: config.host });
logger.info({ port: config.port, metricsPort: metricsServer.port }, 'gateway listening');
