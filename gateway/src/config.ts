import { fileURLToPath } from 'node:url';
import { address, bool, ConfigError, int, loadConfig, oneOf, port, str, type ConfigOf, type Env } from '@mailfleet/kit';

export function gatewayConfigSpec() {
  return {
    port: port('PORT', 3000),
    host: str('HOST', '127.0.0.1'),
    metricsPort: port('METRICS_PORT', 9100),
    logLevel: oneOf('LOG_LEVEL', ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const, 'info'),
    environment: str('NODE_ENV', 'development'),
    /** Set by `npm start` in local mode (embedded SMTP sink and DNS); GET /v1/version then says `local`. */
    localMode: bool('MAILFLEET_LOCAL_MODE', false),
    /** Deadline of each upstream call. */
    upstreamDeadlineMs: int('UPSTREAM_DEADLINE_MS', 5_000, 100),
    shutdownTimeoutMs: int('SHUTDOWN_TIMEOUT_MS', 25_000, 1_000),
    /** Pause between failing readiness and closing, so the load balancer stops routing first (Kubernetes). */
    shutdownDelayMs: int('SHUTDOWN_DELAY_MS', 0, 0),
    natsUrl: str('NATS_URL', 'nats://127.0.0.1:4222'),
    /** How long a resolved API key is trusted before auth is asked again (revocations clear it at once). */
    authCacheTtlMs: int('AUTH_CACHE_TTL_MS', 30_000, 0),
    /**
     * The cache's bound while revocations cannot be heard (listener down, NATS cut off): how long a
     * revoked key may still work on such a replica.
     */
    authCacheUnheardTtlMs: int('AUTH_CACHE_UNHEARD_TTL_MS', 1_000, 0),
    /** How often each replica folds its locally counted requests into auth's shared rate-limit windows. */
    rateLimitSyncMs: int('RATE_LIMIT_SYNC_MS', 1_000, 50),
    /** How often coalesced key last-use times are sent to auth. */
    keyTouchIntervalMs: int('KEY_TOUCH_INTERVAL_MS', 10_000, 100),
    /** Trust X-Forwarded-* from the ingress in front of the gateway. */
    trustProxy: bool('TRUST_PROXY', false),
    /** The built web console served at `/` (default: the console package's dist next to this one). */
    consoleDir: str('CONSOLE_DIR', fileURLToPath(new URL('../console/dist', import.meta.url))),
    /**
     * The address people open the console at (e.g. https://mail.example.com). When set, its origin is the only
     * one the Origin rule accepts and an https URL makes the session cookie Secure; when empty the request's own
     * scheme://host is used (local mode, where the same gateway is reached as 127.0.0.1 and as localhost).
     */
    publicUrl: str('PUBLIC_URL', ''),
    /**
     * The embedded SMTP sink's mail dir, set by the local runner (`npm start`) when it runs the sink: the
     * console's dev inbox (/v1/dev/inbox) reads it. Empty (every other deployment): those routes are 404.
     */
    devInboxDir: str('MAILFLEET_DEV_INBOX_DIR', ''),
    /** Local mode's data dir (the local DNS server's state, for the dev inbox's DKIM check). */
    dataDir: str('MAILFLEET_DATA_DIR', ''),
    authAddr: address('AUTH_GRPC_ADDR', '127.0.0.1:50051'),
    domainsAddr: address('DOMAINS_GRPC_ADDR', '127.0.0.1:50052'),
    contactsAddr: address('CONTACTS_GRPC_ADDR', '127.0.0.1:50053'),
    emailsAddr: address('EMAILS_GRPC_ADDR', '127.0.0.1:50054'),
    campaignsAddr: address('CAMPAIGNS_GRPC_ADDR', '127.0.0.1:50055'),
    suppressionsAddr: address('SUPPRESSIONS_GRPC_ADDR', '127.0.0.1:50056'),
    webhooksAddr: address('WEBHOOKS_GRPC_ADDR', '127.0.0.1:50057'),
    analyticsAddr: address('ANALYTICS_GRPC_ADDR', '127.0.0.1:50058'),
  };
}
export type GatewayConfig = ConfigOf<ReturnType<typeof gatewayConfigSpec>>;

export function loadGatewayConfig(env: Env): GatewayConfig {
  const config = loadConfig(gatewayConfigSpec(), env);
  if (config.publicUrl && !/^https?:\/\/[^/?#\s]+/i.test(config.publicUrl)) {
    throw new ConfigError([`PUBLIC_URL must be an http(s) URL, got ${JSON.stringify(config.publicUrl)}`]);
  }
  return config;
}
