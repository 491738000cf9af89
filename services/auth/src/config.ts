import { baseServiceConfigSpec, int, loadConfig, secret, type Env } from '@mailfleet/kit';

/** The auth service's configuration: the common fields plus its secret and limit defaults. */
export function authConfigSpec() {
  return {
    ...baseServiceConfigSpec('auth'),
    /** Server secret of the keyed hash of API tokens; rotating it invalidates every key. */
    apiKeyHashSecret: secret('API_KEY_HASH_SECRET', 32),
    /** Per-minute budget of endpoints without a family of their own in SPEC section 8. */
    defaultRateLimit: int('RATE_LIMIT_DEFAULT_PER_MINUTE', 300, 1),
    /** How often expired rate-limit windows and quota counters are deleted. */
    sweepIntervalMs: int('COUNTER_SWEEP_INTERVAL_MS', 60_000, 1_000),
  };
}

export function loadAuthConfig(env: Env) {
  return loadConfig(authConfigSpec(), env);
}
export type AuthConfig = ReturnType<typeof loadAuthConfig>;
