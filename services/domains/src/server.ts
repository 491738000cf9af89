import type { ServiceInfra, ServiceParts } from '@mailfleet/kit';
import type { DomainsConfig } from './config.js';

/**
 * Binds the domains service's parts: its gRPC services, consumers and outbox
 * collections. Its RPCs land with the domains issue; until then the process
 * serves health, reflection and metrics only.
 */
export async function createDomainsServer(_deps: { config: DomainsConfig; infra: ServiceInfra }): Promise<ServiceParts> {
  return { services: [] };
}
