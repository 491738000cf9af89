import type { FastifyInstance } from 'fastify';
import type { DevInbox } from '../../clients/dev-inbox.js';
import type { Upstreams } from '../../clients/upstreams.js';
import { analyticsRoutes } from './analytics/analytics.routes.js';
import { apiKeysRoutes } from './api-keys/api-keys.routes.js';
import { campaignsRoutes } from './campaigns/campaigns.routes.js';
import { contactsRoutes } from './contacts/contacts.routes.js';
import { devRoutes } from './dev/dev.routes.js';
import { domainsRoutes } from './domains/domains.routes.js';
import { emailsRoutes } from './emails/emails.routes.js';
import { invitesRoutes } from './invites/invites.routes.js';
import { sessionRoutes } from './session/session.routes.js';
import { settingsRoutes } from './settings/settings.routes.js';
import { suppressionsRoutes } from './suppressions/suppressions.routes.js';
import { teamsRoutes } from './teams/teams.routes.js';
import { templatesRoutes } from './templates/templates.routes.js';
import { trackingRoutes } from './tracking/tracking.routes.js';
import { usersRoutes } from './users/users.routes.js';
import { webhooksRoutes } from './webhooks/webhooks.routes.js';

export interface V1Deps {
  readonly upstreams: Upstreams;
  /** A key deleted through this replica leaves its cache at once (others hear key.revoked). */
  readonly onKeyDeleted: (keyId: string) => void;
  /** PUBLIC_URL (empty: the request's own origin); decides the session cookie's Secure flag. */
  readonly publicUrl?: string;
  /** Local mode's dev inbox; absent when the platform runs no SMTP sink of its own. */
  readonly devInbox?: DevInbox;
}

/** Every /v1 area, mounted by app.ts under /v1 and /api/v1. */
export function v1Areas(deps: V1Deps): ((app: FastifyInstance) => Promise<void>)[] {
  return [sessionRoutes(deps), usersRoutes(deps), invitesRoutes(deps), devRoutes(deps), apiKeysRoutes(deps), analyticsRoutes(deps), teamsRoutes(deps), settingsRoutes(deps), domainsRoutes(deps), suppressionsRoutes(deps), emailsRoutes(deps), templatesRoutes(deps), trackingRoutes(deps), contactsRoutes(deps), webhooksRoutes(deps), campaignsRoutes(deps)];
}
