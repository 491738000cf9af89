import type { ServiceInfra, ServiceParts } from '@mailfleet/kit';
import type { AnalyticsConfig } from './config.js';

/**
 * Binds the analytics service's parts: its gRPC services, consumers and outbox
 * collections. Its RPCs land with the analytics issue; until then the process
 * serves health, reflection and metrics only.
 */
export async function createAnalyticsServer(_deps: { config: AnalyticsConfig; infra: ServiceInfra }): Promise<ServiceParts> {
  return { services: [] };
}
