/** SPEC 6.2: the event types a webhook can subscribe to (webhook.test only comes from the test button). */
export const EVENT_GROUPS: readonly { group: string; types: readonly string[] }[] = [
  {
    group: 'Email',
    types: [
      'email.queued', 'email.sent', 'email.delivery_delayed', 'email.delivered', 'email.bounced', 'email.rejected', 'email.rendering_failure',
      'email.complained', 'email.failed', 'email.cancelled', 'email.suppressed', 'email.opened', 'email.clicked',
    ],
  },
  { group: 'Contact', types: ['contact.created', 'contact.updated', 'contact.deleted'] },
  { group: 'Domain', types: ['domain.created', 'domain.verified', 'domain.updated', 'domain.deleted'] },
];
