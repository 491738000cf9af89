import { address, baseServiceConfigSpec, ConfigError, int, loadConfig, port, secret, str, url, type Env } from '@mailfleet/kit';

/**
 * The emails service's configuration: the common fields, the upstreams it
 * asks (domains for the sending identity, suppressions, auth for quotas), the
 * SMTP relay, the inbound listener for delivery reports, tracking, and the
 * timings of the send queue.
 */
export function emailsConfigSpec() {
  return {
    ...baseServiceConfigSpec('emails'),
    authAddr: address('AUTH_GRPC_ADDR', '127.0.0.1:50051'),
    domainsAddr: address('DOMAINS_GRPC_ADDR', '127.0.0.1:50052'),
    suppressionsAddr: address('SUPPRESSIONS_GRPC_ADDR', '127.0.0.1:50056'),
    /** Deadline of each call to another service. */
    upstreamDeadlineMs: int('UPSTREAM_DEADLINE_MS', 3_000, 100),

    /** The relay every message is handed to (the local platform's SMTP sink by default). */
    smtpUrl: url('SMTP_URL', ['smtp', 'smtps'], 'smtp://127.0.0.1:2525'),
    /** Pooled connections per process. */
    smtpPoolSize: int('SMTP_POOL_SIZE', 5, 1, 100),
    /** Connect, greeting and socket-inactivity timeout of one delivery attempt. */
    smtpTimeoutMs: int('SMTP_TIMEOUT_MS', 20_000, 500),

    /** Signs tracking links and VERP addresses; `npm start` generates one. */
    trackingSigningKey: secret('TRACKING_SIGNING_KEY', 32),
    /** Base of the open-pixel and click links (the gateway serves them). */
    publicUrl: url('PUBLIC_URL', ['http', 'https'], 'http://127.0.0.1:3000'),
    /** Domain of the per-email envelope senders (`bounces+<id>-<sig>@BOUNCE_DOMAIN`). */
    bounceDomain: str('BOUNCE_DOMAIN', 'bounces.mailfleet.local'),
    /** Listener for delivery status notifications and feedback reports sent to the bounce addresses. */
    inboundSmtpPort: port('INBOUND_SMTP_PORT', 2526),
    inboundSmtpHost: str('INBOUND_SMTP_HOST', '0.0.0.0'),

    /** Total decoded size of one email's attachments. */
    maxAttachmentsBytes: int('MAX_ATTACHMENTS_BYTES', 10 * 1024 * 1024, 1),

    /** Emails of a claimed batch handed to the relay at once (the pool's connections take them in turn). */
    sendConcurrency: int('SEND_CONCURRENCY', 16, 1, 256),
    /** Queue entries one claim takes: they are read, sent and recorded in bulk. */
    sendBatchSize: int('SEND_BATCH_SIZE', 100, 1, 1000),
    /**
     * How long the relay's first answer waits for others to share its bulk write. Also the longest an
     * accepted message goes unrecorded beyond the write itself (a crash then may send it twice), so small.
     */
    sendOutcomeLingerMs: int('SEND_OUTCOME_LINGER_MS', 20, 0, 1_000),
    /** How long the first accepted send waits for others to share its inserts (queue, contents, emails). */
    acceptLingerMs: int('ACCEPT_LINGER_MS', 2, 0, 1_000),
    /** How long the first delivery report waits for others to share its read and bulk write (the 250 follows the write). */
    reportLingerMs: int('REPORT_LINGER_MS', 50, 0, 5_000),
    /** How often an idle worker looks for due emails (a local accept wakes it at once). */
    sendPollMs: int('SEND_POLL_INTERVAL_MS', 500, 10),
    /**
     * How often a worker kept busy by emails its own accepts handed over still scans the queue (schedules come
     * due, retries, entries that found the hand-off full, other workers' expired leases).
     */
    sendBusyPollMs: int('SEND_BUSY_POLL_INTERVAL_MS', 5_000, 10),
    /** Accepted emails waiting in a process's hand-off to its own worker at most (0: every email is claimed from the queue). */
    sendHandoffMax: int('SEND_HANDOFF_MAX', 400, 0, 100_000),
    /**
     * How long a claimed email stays with its worker. It must outlast an attempt
     * (a few SMTP timeouts); after a crash the email is retried once it expires,
     * unless a delivery report proved in the meantime that the relay took it.
     */
    sendLeaseMs: int('SEND_LEASE_MS', 90_000, 1_000),
    /** Delivery attempts before `email.failed`. */
    sendMaxAttempts: int('SEND_MAX_ATTEMPTS', 8, 1, 100),
    /** Backoff after the first failed attempt; doubles per attempt up to SEND_RETRY_MAX_MS. */
    retryBaseMs: int('SEND_RETRY_BASE_MS', 60_000, 10),
    retryMaxMs: int('SEND_RETRY_MAX_MS', 3_600_000, 10),

    /** How long a domain's sending identity is cached (domain.updated/deleted drop it at once). */
    identityCacheTtlMs: int('IDENTITY_CACHE_TTL_MS', 30_000, 0),
    /** Lifetime of an idempotency entry (SPEC 8: 24 hours). */
    idempotencyTtlMs: int('IDEMPOTENCY_TTL_MS', 24 * 3_600_000, 1_000),
    /** A claim still PROCESSING after this long belongs to a crashed request and may be taken over. */
    idempotencyTakeoverMs: int('IDEMPOTENCY_PROCESSING_TIMEOUT_MS', 60_000, 1_000),
    /**
     * Interval of the outbox relay's pass over the whole emails collection: the safety net for events a
     * crashed process wrote but did not publish (each process publishes its own writes at once).
     */
    outboxScanIntervalMs: int('OUTBOX_SCAN_INTERVAL_MS', 60_000, 100),
    /** How often expired idempotency entries are deleted. */
    sweepIntervalMs: int('SWEEP_INTERVAL_MS', 60_000, 1_000),
  };
}

export function loadEmailsConfig(env: Env) {
  const config = loadConfig(emailsConfigSpec(), env);
  // An attempt (connect, greeting, the transaction) must end well inside the lease, or a second worker could take the email mid-send.
  if (config.sendLeaseMs <= 3 * config.smtpTimeoutMs) {
    throw new ConfigError([`SEND_LEASE_MS (${config.sendLeaseMs}) must be longer than 3 x SMTP_TIMEOUT_MS (${config.smtpTimeoutMs})`]);
  }
  return config;
}
export type EmailsConfig = ReturnType<typeof loadEmailsConfig>;
