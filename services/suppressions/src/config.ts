import { baseServiceConfigSpec, int, loadConfig, type Env } from '@mailfleet/kit';

/** The suppressions service's configuration: the common fields plus how long applied event ids are kept. */
export function suppressionsConfigSpec() {
  return {
    ...baseServiceConfigSpec('suppressions'),
    /**
     * How long an applied event id is remembered (redeliveries of it change nothing).
     * Longer than the event stream keeps events (7 days), so no redelivery outlives it.
     */
    processedEventRetentionMs: int('PROCESSED_EVENT_RETENTION_MS', 8 * 24 * 3600_000, 60_000),
    /** How often expired event ids are deleted. */
    sweepIntervalMs: int('PROCESSED_EVENT_SWEEP_INTERVAL_MS', 3600_000, 1_000),
  };
}

export function loadSuppressionsConfig(env: Env) {
  return loadConfig(suppressionsConfigSpec(), env);
}
export type SuppressionsConfig = ReturnType<typeof loadSuppressionsConfig>;
