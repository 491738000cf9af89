import type { ServiceInfra, ServiceParts } from '@mailfleet/kit';
import type { CampaignsConfig } from './config.js';

/**
 * Binds the campaigns service's parts: its gRPC services, consumers and outbox
 * collections. Its RPCs land with the campaigns issue; until then the process
 * serves health, reflection and metrics only.
 */
export async function createCampaignsServer(_deps: { config: CampaignsConfig; infra: ServiceInfra }): Promise<ServiceParts> {
  return { services: [] };
}
