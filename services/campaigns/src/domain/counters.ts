import { eventsV1 } from '@mailfleet/proto';
import type { CounterName } from './campaign.js';

export const COUNTER_EVENT_TYPES = ['email.sent', 'email.delivered', 'email.opened', 'email.clicked', 'email.bounced', 'email.complained'] as const;

/** What one email event does to its campaign's counters. */
export interface CounterEffect {
  readonly campaignId: string;
  readonly counters: readonly CounterName[];
  /**
   * The key that makes the effect happen once: the event id, or for opens
   * and clicks `<kind>:<email id>` (counted once per email).
   */
  readonly onceKey: string;
}

/**
 * The counters an `email.*` event moves (empty for events outside a campaign
 * or that count nothing). A bounce also counts the email as sent, once: mail
 * the receiving server refused outright (550 at RCPT) never has an
 * `email.sent` of its own, and a sent-then-bounced email shares the key.
 */
export function counterEffectsOf(event: { id: string; type: string; data: unknown }): CounterEffect[] {
  if (!(COUNTER_EVENT_TYPES as readonly string[]).includes(event.type)) return [];
  const data = readEmailData(event.data);
  if (!data) return [];
  const campaignId = nonBlank(data.campaignId);
  if (!campaignId) return [];
  const emailId = nonBlank(data.id);
  const oncePerEmail = (counter: CounterName): CounterEffect => ({ campaignId, counters: [counter], onceKey: emailId ? `${counter}:${emailId}` : event.id });
  switch (event.type) {
    case 'email.sent': return [oncePerEmail('sent')];
    case 'email.delivered': return [oncePerEmail('delivered')];
    case 'email.opened': return [oncePerEmail('opened')];
    case 'email.clicked': return [oncePerEmail('clicked')];
    case 'email.complained': return [{ campaignId, counters: ['complained'], onceKey: event.id }];
    case 'email.bounced':
      return [
        { campaignId, counters: data.bounce?.type === 'Permanent' ? ['bounced', 'hardBounced'] : ['bounced'], onceKey: event.id },
        ...(emailId ? [oncePerEmail('sent')] : []),
      ];
    default: return [];
  }
}

const nonBlank = (s: string | undefined): string | undefined => (s !== undefined && s.trim() !== '' ? s : undefined);

/** The payload through the typed contract (`proto/events/v1`); undefined when it is not an object at all. */
function readEmailData(data: unknown): eventsV1.EmailEventData | undefined {
  if (typeof data !== 'object' || data === null) return undefined;
  try {
    return eventsV1.EmailEventData.fromJSON(data);
  } catch {
    return undefined;
  }
}
