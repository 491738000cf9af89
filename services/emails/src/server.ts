import type { ServiceInfra, ServiceParts } from '@mailfleet/kit';
import type { EmailsConfig } from './config.js';

/**
 * Binds the emails service's parts: its gRPC services, consumers and outbox
 * collections. Its RPCs land with the emails issue; until then the process
 * serves health, reflection and metrics only.
 */
export async function createEmailsServer(_deps: { config: EmailsConfig; infra: ServiceInfra }): Promise<ServiceParts> {
  return { services: [] };
}
