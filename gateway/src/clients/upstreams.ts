import { createGrpcClient, type Logger, type ServiceMetrics, type UpstreamClient } from '@mailfleet/kit';
import {
  analyticsV1, authV1, campaignsV1, contactsV1, domainsV1, emailsV1, suppressionsV1, webhooksV1,
} from '@mailfleet/proto';
import type { GatewayConfig } from '../config.js';

/** One client per upstream service, each with its own deadline and breaker. */
export interface Upstreams {
  readonly auth: UpstreamClient<authV1.AuthServiceClient>;
  readonly domains: UpstreamClient<domainsV1.DomainsServiceClient>;
  readonly contacts: UpstreamClient<contactsV1.ContactsServiceClient>;
  readonly emails: UpstreamClient<emailsV1.EmailsServiceClient>;
  readonly campaigns: UpstreamClient<campaignsV1.CampaignsServiceClient>;
  readonly suppressions: UpstreamClient<suppressionsV1.SuppressionsServiceClient>;
  readonly webhooks: UpstreamClient<webhooksV1.WebhooksServiceClient>;
  readonly analytics: UpstreamClient<analyticsV1.AnalyticsServiceClient>;
}

export function createUpstreams(config: GatewayConfig, logger: Logger, metrics: ServiceMetrics): Upstreams {
  const common = { logger, metrics, deadlineMs: config.upstreamDeadlineMs };
  return {
    auth: createGrpcClient({ ...common, name: 'auth', address: config.authAddr, ctor: authV1.AuthServiceClient }),
    domains: createGrpcClient({ ...common, name: 'domains', address: config.domainsAddr, ctor: domainsV1.DomainsServiceClient }),
    contacts: createGrpcClient({ ...common, name: 'contacts', address: config.contactsAddr, ctor: contactsV1.ContactsServiceClient }),
    emails: createGrpcClient({ ...common, name: 'emails', address: config.emailsAddr, ctor: emailsV1.EmailsServiceClient }),
    campaigns: createGrpcClient({ ...common, name: 'campaigns', address: config.campaignsAddr, ctor: campaignsV1.CampaignsServiceClient }),
    suppressions: createGrpcClient({ ...common, name: 'suppressions', address: config.suppressionsAddr, ctor: suppressionsV1.SuppressionsServiceClient }),
    webhooks: createGrpcClient({ ...common, name: 'webhooks', address: config.webhooksAddr, ctor: webhooksV1.WebhooksServiceClient }),
    analytics: createGrpcClient({ ...common, name: 'analytics', address: config.analyticsAddr, ctor: analyticsV1.AnalyticsServiceClient }),
  };
}

export function closeUpstreams(u: Upstreams): void {
  for (const c of Object.values(u) as UpstreamClient<unknown>[]) c.close();
}
