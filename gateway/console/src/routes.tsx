import { lazy, type ComponentType, type LazyExoticComponent } from 'react';

export interface PageRoute {
  /** Path under the app shell, without the leading slash ('' is the overview). */
  readonly path: string;
  /** Nav label; routes without one (details) are not in the nav. */
  readonly nav?: string;
  readonly page: LazyExoticComponent<ComponentType>;
}

// One line per page, each page its own lazily loaded chunk (keeps the first load small).
export const pageRoutes: readonly PageRoute[] = [
  { path: '', nav: 'Overview', page: lazy(() => import('./pages/overview/Overview')) },
  { path: 'emails', nav: 'Emails', page: lazy(() => import('./pages/emails/Emails')) },
  { path: 'emails/:id', page: lazy(() => import('./pages/emails/EmailDetail')) },
  { path: 'domains', nav: 'Domains', page: lazy(() => import('./pages/domains/Domains')) },
  { path: 'domains/:id', page: lazy(() => import('./pages/domains/DomainDetail')) },
  { path: 'contacts', nav: 'Contacts', page: lazy(() => import('./pages/contacts/Contacts')) },
  { path: 'contacts/:bookId', page: lazy(() => import('./pages/contacts/ContactBook')) },
  { path: 'templates', nav: 'Templates', page: lazy(() => import('./pages/templates/Templates')) },
  { path: 'templates/:id', page: lazy(() => import('./pages/templates/TemplateEditor')) },
  { path: 'campaigns', nav: 'Campaigns', page: lazy(() => import('./pages/campaigns/Campaigns')) },
  { path: 'campaigns/new', page: lazy(() => import('./pages/campaigns/CampaignCompose')) },
  { path: 'campaigns/:id', page: lazy(() => import('./pages/campaigns/CampaignDetail')) },
  { path: 'suppressions', nav: 'Suppressions', page: lazy(() => import('./pages/suppressions/Suppressions')) },
  { path: 'webhooks', nav: 'Webhooks', page: lazy(() => import('./pages/webhooks/Webhooks')) },
  { path: 'webhooks/:id', page: lazy(() => import('./pages/webhooks/WebhookDetail')) },
  { path: 'api-keys', nav: 'API keys', page: lazy(() => import('./pages/api-keys/ApiKeys')) },
  { path: 'settings', nav: 'Settings', page: lazy(() => import('./pages/settings/Settings')) },
  { path: 'dev/inbox', nav: 'Dev inbox', page: lazy(() => import('./pages/dev-inbox/DevInbox')) },
];

/** Pages outside the shell (no session needed). */
export const publicRoutes: readonly PageRoute[] = [
  { path: 'sign-in', page: lazy(() => import('./pages/sign-in/SignIn')) },
  { path: 'invite', page: lazy(() => import('./pages/sign-in/AcceptInvite')) },
];
