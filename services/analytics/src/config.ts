import { baseServiceConfigSpec, int, loadConfig, type Env } from '@mailfleet/kit';

/** The analytics service's configuration: the common fields plus retention of the feed and the count marks. */
export function analyticsConfigSpec() {
  return {
    ...baseServiceConfigSpec('analytics'),
    /** Days the activity/events feed keeps an event; 0 keeps them forever. Totals never depend on it (they live in the rollups). */
    feedRetentionDays: int('FEED_RETENTION_DAYS', 90, 0),
    /**
     * Days a finished count mark is kept; 0 keeps them forever. An event about an email whose marks are gone
     * counts again (for example a first open after this long); the stream itself keeps events 7 days.
     */
    markRetentionDays: int('COUNT_MARK_RETENTION_DAYS', 180, 0),
    /** How often the sweeper deletes expired feed events and count marks. */
    sweepIntervalMs: int('SWEEP_INTERVAL_MS', 3_600_000, 1_000),
  };
}

export function loadAnalyticsConfig(env: Env) {
  return loadConfig(analyticsConfigSpec(), env);
}
export type AnalyticsConfig = ReturnType<typeof loadAnalyticsConfig>;
