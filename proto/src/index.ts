// Public entry of @mailfleet/proto: the generated gRPC contracts, one
// namespace per versioned proto package, and where the .proto sources live
// (the kit loads them with @grpc/proto-loader to serve server reflection).
import { fileURLToPath } from 'node:url';

export * as analyticsV1 from './gen/analytics/v1/analytics.js';
export * as authV1 from './gen/auth/v1/auth.js';
export * as campaignsV1 from './gen/campaigns/v1/campaigns.js';
export * as contactsV1 from './gen/contacts/v1/contacts.js';
export * as domainsV1 from './gen/domains/v1/domains.js';
export * as emailsV1 from './gen/emails/v1/emails.js';
export * as eventsV1 from './gen/events/v1/events.js';
export * as suppressionsV1 from './gen/suppressions/v1/suppressions.js';
export * as webhooksV1 from './gen/webhooks/v1/webhooks.js';

/**
 * Absolute path of the `proto/` directory (the buf module root, the include
 * directory for every import). Computed from this module's URL, so it is the
 * same whether this file runs from `src/` or from `dist/`: both sit directly
 * under `proto/`.
 */
export const PROTO_ROOT: string = fileURLToPath(new URL('..', import.meta.url)).replace(/[\\/]$/, '');

/** Path of each service's .proto file, relative to PROTO_ROOT, by service. */
export const PROTO_FILE_BY_SERVICE = {
  analytics: 'analytics/v1/analytics.proto',
  auth: 'auth/v1/auth.proto',
  campaigns: 'campaigns/v1/campaigns.proto',
  contacts: 'contacts/v1/contacts.proto',
  domains: 'domains/v1/domains.proto',
  emails: 'emails/v1/emails.proto',
  suppressions: 'suppressions/v1/suppressions.proto',
  webhooks: 'webhooks/v1/webhooks.proto',
} as const;

/** A service that has a gRPC API in this package. */
export type ServiceName = keyof typeof PROTO_FILE_BY_SERVICE;

/**
 * Paths of the service .proto files, relative to PROTO_ROOT; load them with
 * `protoLoader.loadSync(PROTO_FILES, { includeDirs: [PROTO_ROOT] })`.
 */
export const PROTO_FILES: readonly string[] = Object.values(PROTO_FILE_BY_SERVICE);

/** Path of the event envelope and event data .proto file, relative to PROTO_ROOT. */
export const EVENTS_PROTO_FILE = 'events/v1/events.proto';
