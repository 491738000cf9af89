import { baseServiceConfigSpec, loadConfig, type Env } from '@mailfleet/kit';

/** The analytics service's configuration: the common fields (ports, Mongo, NATS, logging, shutdown). */
export function analyticsConfigSpec() {
  return { ...baseServiceConfigSpec('analytics') };
}

export function loadAnalyticsConfig(env: Env) {
  return loadConfig(analyticsConfigSpec(), env);
}
export type AnalyticsConfig = ReturnType<typeof loadAnalyticsConfig>;
