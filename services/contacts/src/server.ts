import type { ServiceInfra, ServiceParts } from '@mailfleet/kit';
import type { ContactsConfig } from './config.js';

/**
 * Binds the contacts service's parts: its gRPC services, consumers and outbox
 * collections. Its RPCs land with the contacts issue; until then the process
 * serves health, reflection and metrics only.
 */
export async function createContactsServer(_deps: { config: ContactsConfig; infra: ServiceInfra }): Promise<ServiceParts> {
  return { services: [] };
}
