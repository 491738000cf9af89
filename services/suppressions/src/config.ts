import { baseServiceConfigSpec, loadConfig, type Env } from '@mailfleet/kit';

/** The suppressions service's configuration: the common fields (ports, Mongo, NATS, logging, shutdown). */
export function suppressionsConfigSpec() {
  return { ...baseServiceConfigSpec('suppressions') };
}

export function loadSuppressionsConfig(env: Env) {
  return loadConfig(suppressionsConfigSpec(), env);
}
export type SuppressionsConfig = ReturnType<typeof loadSuppressionsConfig>;
