import { baseServiceConfigSpec, loadConfig, type Env } from '@mailfleet/kit';

/** The domains service's configuration: the common fields (ports, Mongo, NATS, logging, shutdown). */
export function domainsConfigSpec() {
  return { ...baseServiceConfigSpec('domains') };
}

export function loadDomainsConfig(env: Env) {
  return loadConfig(domainsConfigSpec(), env);
}
export type DomainsConfig = ReturnType<typeof loadDomainsConfig>;
