import { baseServiceConfigSpec, bool, ConfigError, int, loadConfig, type Env } from '@mailfleet/kit';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from './domain/retry-policy.js';

/** The webhooks service's configuration: the common fields plus the SSRF guard, HTTP, retry and worker settings. */
export function webhooksConfigSpec() {
  return {
    ...baseServiceConfigSpec('webhooks'),
    /** Let webhooks reach loopback, private, link-local and metadata addresses (local runs and tests only). */
    allowPrivateNetworks: bool('WEBHOOK_ALLOW_PRIVATE_NETWORKS', false),
    /** Time limit of one delivery attempt: DNS, connect, TLS, request and response. */
    timeoutMs: int('WEBHOOK_TIMEOUT_MS', 10_000, 100, 120_000),
    /** Bytes of the endpoint's response kept on the delivery record. */
    responseTextLimit: int('WEBHOOK_RESPONSE_TEXT_LIMIT', 1_024, 0, 65_536),
    /** Attempts per event, the first included. */
    maxAttempts: int('WEBHOOK_MAX_ATTEMPTS', DEFAULT_RETRY_POLICY.maxAttempts, 1, 100),
    /** Delay before the first retry; doubles for each further one (+-20 % jitter). */
    retryBaseMs: int('WEBHOOK_RETRY_BASE_MS', DEFAULT_RETRY_POLICY.baseDelayMs, 10),
    /** Upper bound of one retry delay. */
    retryMaxMs: int('WEBHOOK_RETRY_MAX_MS', DEFAULT_RETRY_POLICY.maxDelayMs, 10),
    /** Events in a row that failed every attempt before the webhook turns FAILED. */
    failureThreshold: int('WEBHOOK_FAILURE_THRESHOLD', DEFAULT_RETRY_POLICY.failureThreshold, 1, 10_000),
    /**
     * Deliveries held at once by one replica: being posted, or their results being written (a webhook's next round
     * goes out while the last one's results are written, so this is a few rounds' worth).
     */
    concurrency: int('WEBHOOK_CONCURRENCY', 256, 1, 1_000),
    /**
     * Attempts in flight at once to one webhook in one replica: a slow endpoint holds at most this many slots. Also
     * the size of a round (claimed together, results written together), so it sets how far one busy webhook's
     * writes are batched.
     */
    perWebhookConcurrency: int('WEBHOOK_PER_WEBHOOK_CONCURRENCY', 16, 1, 100),
    /** How long a claimed delivery belongs to one replica; a crashed replica's claims lapse after it. Must exceed the timeout. */
    claimLeaseMs: int('WEBHOOK_CLAIM_LEASE_MS', 60_000, 1_000),
    /** How often the worker looks for due deliveries when nothing woke it (new events wake it at once). */
    pollIntervalMs: int('WEBHOOK_POLL_INTERVAL_MS', 1_000, 10),
    /**
     * Longest a replica keeps a team's list of ACTIVE webhooks in memory for the fan-out. Changes reach every
     * replica at once over NATS; this bounds a missed note.
     */
    subscriptionCacheTtlMs: int('WEBHOOK_SUBSCRIPTION_CACHE_TTL_MS', 30_000, 0, 3_600_000),
    /** Deliveries older than this are deleted by the sweeper. */
    deliveryRetentionDays: int('WEBHOOK_DELIVERY_RETENTION_DAYS', 30, 1),
    /** How often the sweeper runs. */
    sweepIntervalMs: int('WEBHOOK_SWEEP_INTERVAL_MS', 3_600_000, 1_000),
  };
}

export function loadWebhooksConfig(env: Env) {
  const config = loadConfig(webhooksConfigSpec(), env);
  const problems: string[] = [];
  if (config.claimLeaseMs <= config.timeoutMs + 1_000) {
    problems.push(`WEBHOOK_CLAIM_LEASE_MS (${config.claimLeaseMs}) must exceed WEBHOOK_TIMEOUT_MS (${config.timeoutMs}) by more than 1000 ms`);
  }
  if (config.retryMaxMs < config.retryBaseMs) problems.push('WEBHOOK_RETRY_MAX_MS must be at least WEBHOOK_RETRY_BASE_MS');
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}
export type WebhooksConfig = ReturnType<typeof loadWebhooksConfig>;

export function retryPolicyOf(config: WebhooksConfig): RetryPolicy {
  return { maxAttempts: config.maxAttempts, baseDelayMs: config.retryBaseMs, maxDelayMs: config.retryMaxMs, failureThreshold: config.failureThreshold };
}
