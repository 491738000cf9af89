import { baseServiceConfigSpec, loadConfig, type Env } from '@mailfleet/kit';

/** The campaigns service's configuration: the common fields (ports, Mongo, NATS, logging, shutdown). */
export function campaignsConfigSpec() {
  return { ...baseServiceConfigSpec('campaigns') };
}

export function loadCampaignsConfig(env: Env) {
  return loadConfig(campaignsConfigSpec(), env);
}
export type CampaignsConfig = ReturnType<typeof loadCampaignsConfig>;
