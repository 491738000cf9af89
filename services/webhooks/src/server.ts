import type { ServiceInfra, ServiceParts } from '@mailfleet/kit';
import type { WebhooksConfig } from './config.js';

/**
 * Binds the webhooks service's parts: its gRPC services, consumers and outbox
 * collections. Its RPCs land with the webhooks issue; until then the process
 * serves health, reflection and metrics only.
 */
export async function createWebhooksServer(_deps: { config: WebhooksConfig; infra: ServiceInfra }): Promise<ServiceParts> {
  return { services: [] };
}
