import { baseServiceConfigSpec, loadConfig, type Env } from '@mailfleet/kit';

/** The webhooks service's configuration: the common fields (ports, Mongo, NATS, logging, shutdown). */
export function webhooksConfigSpec() {
  return { ...baseServiceConfigSpec('webhooks') };
}

export function loadWebhooksConfig(env: Env) {
  return loadConfig(webhooksConfigSpec(), env);
}
export type WebhooksConfig = ReturnType<typeof loadWebhooksConfig>;
