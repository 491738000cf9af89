import type { ServiceInfra, ServiceParts } from '@mailfleet/kit';
import type { SuppressionsConfig } from './config.js';

/**
 * Binds the suppressions service's parts: its gRPC services, consumers and outbox
 * collections. Its RPCs land with the suppressions issue; until then the process
 * serves health, reflection and metrics only.
 */
export async function createSuppressionsServer(_deps: { config: SuppressionsConfig; infra: ServiceInfra }): Promise<ServiceParts> {
  return { services: [] };
}
