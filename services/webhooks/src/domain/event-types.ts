import { InvalidArgumentError } from '@mailfleet/kit';

/** The public event types of SPEC 6.2 that a webhook may subscribe to (`webhook.test` excluded). */
export const PUBLIC_EVENT_TYPES = [
  'email.queued', 'email.sent', 'email.delivery_delayed', 'email.delivered', 'email.bounced', 'email.rejected',
  'email.rendering_failure', 'email.complained', 'email.failed', 'email.cancelled', 'email.suppressed', 'email.opened',
  'email.clicked',
  'contact.created', 'contact.updated', 'contact.deleted',
  'domain.created', 'domain.verified', 'domain.updated', 'domain.deleted',
] as const;
export type PublicEventType = (typeof PUBLIC_EVENT_TYPES)[number];

/** Delivered only through the test endpoint; never subscribable. */
export const TEST_EVENT_TYPE = 'webhook.test';

/** Subjects the fan-out consumer reads; internal types on them (contact.unsubscribed...) are skipped by isPublicEventType. */
export const FANOUT_SUBJECTS = ['mailfleet.email.>', 'mailfleet.contact.>', 'mailfleet.domain.>'] as const;

const PUBLIC = new Set<string>(PUBLIC_EVENT_TYPES);

export function isPublicEventType(type: string): type is PublicEventType {
  return PUBLIC.has(type);
}

/**
 * Checks a subscription list: at least one type, every one public. Duplicates
 * are dropped (first occurrence kept), so the stored list is a set in the
 * caller's order.
 */
export function validateEventTypes(types: readonly string[]): PublicEventType[] {
  if (types.length === 0) throw new InvalidArgumentError('eventTypes must list at least one event type');
  const out: PublicEventType[] = [];
  for (const t of types) {
    if (t === TEST_EVENT_TYPE) {
      throw new InvalidArgumentError(`${TEST_EVENT_TYPE} cannot be subscribed to; it is sent only by POST /v1/webhooks/{id}/test`);
    }
    if (!isPublicEventType(t)) {
      throw new InvalidArgumentError(`Unknown event type ${JSON.stringify(t)}; valid types: ${PUBLIC_EVENT_TYPES.join(', ')}`);
    }
    if (!out.includes(t)) out.push(t);
  }
  return out;
}
