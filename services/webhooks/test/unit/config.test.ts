import { ConfigError } from '@mailfleet/kit';
import { describe, expect, it } from 'vitest';
import { loadWebhooksConfig, retryPolicyOf } from '../../src/config.js';
import { handOffMaxAgeOf, roundSizeOf } from '../../src/server.js';

describe('config', () => {
  it('defaults: private networks refused, 10 s attempts, 6 attempts, FAILED after 10 failed events', () => {
    const c = loadWebhooksConfig({});
    expect(c).toMatchObject({ allowPrivateNetworks: false, timeoutMs: 10_000, maxAttempts: 6, failureThreshold: 10, responseTextLimit: 1_024 });
    expect(retryPolicyOf(c)).toEqual({ maxAttempts: 6, baseDelayMs: 20_000, maxDelayMs: 3_600_000, failureThreshold: 10 });
  });

  it('reads the test-clock variables', () => {
    const c = loadWebhooksConfig({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_BASE_MS: '200', WEBHOOK_MAX_ATTEMPTS: '4', WEBHOOK_FAILURE_THRESHOLD: '2' });
    expect(retryPolicyOf(c)).toMatchObject({ maxAttempts: 4, baseDelayMs: 200, failureThreshold: 2 });
    expect(c.allowPrivateNetworks).toBe(true);
  });

  it('reports every problem at once, including a lease too short for an attempt', () => {
    let err: unknown;
    try {
      loadWebhooksConfig({ WEBHOOK_TIMEOUT_MS: '20000', WEBHOOK_CLAIM_LEASE_MS: '15000' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems.join('\n')).toMatch(/WEBHOOK_CLAIM_LEASE_MS/);
    expect(() => loadWebhooksConfig({ WEBHOOK_MAX_ATTEMPTS: '0', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'maybe' })).toThrow(/WEBHOOK_MAX_ATTEMPTS[\s\S]*WEBHOOK_ALLOW_PRIVATE_NETWORKS|WEBHOOK_ALLOW_PRIVATE_NETWORKS[\s\S]*WEBHOOK_MAX_ATTEMPTS/);
  });

  it('a webhook\'s rounds: up to four times its concurrency, as far as the lease covers a time-out per wave of posts', () => {
    expect(roundSizeOf(loadWebhooksConfig({}))).toBe(64);
    expect(roundSizeOf(loadWebhooksConfig({ WEBHOOK_TIMEOUT_MS: '20000' }))).toBe(32);
    expect(roundSizeOf(loadWebhooksConfig({ WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_CLAIM_LEASE_MS: '8000', WEBHOOK_PER_WEBHOOK_CONCURRENCY: '2' }))).toBe(2);
    expect(roundSizeOf(loadWebhooksConfig({ WEBHOOK_TIMEOUT_MS: '2000', WEBHOOK_CLAIM_LEASE_MS: '4000', WEBHOOK_PER_WEBHOOK_CONCURRENCY: '2' }))).toBe(2);
  });

  it('deliveries handed over by the fan-out wait at most what the lease leaves beside a whole round and 5 s', () => {
    // 60 s lease - 5 s - 4 waves of 10 s time-outs.
    expect(handOffMaxAgeOf(loadWebhooksConfig({}))).toBe(15_000);
    expect(handOffMaxAgeOf(loadWebhooksConfig({ WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_CLAIM_LEASE_MS: '10000' }))).toBe(1_000);
    // No room left: nothing is handed over (the e2e clock, the crash test's first case).
    expect(handOffMaxAgeOf(loadWebhooksConfig({ WEBHOOK_TIMEOUT_MS: '2000', WEBHOOK_CLAIM_LEASE_MS: '4000' }))).toBe(0);
    expect(handOffMaxAgeOf(loadWebhooksConfig({ WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_CLAIM_LEASE_MS: '5000' }))).toBe(0);
  });
});
