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

/** The counters an `email.*` event moves; undefined for events outside a campaign or that count nothing. */
export function counterEffectOf(event: { id: string; type: string; data: unknown }): CounterEffect | undefined {
  const data = (event.data ?? {}) as { id?: unknown; campaignId?: unknown; bounce?: { type?: unknown } | null };
  const campaignId = typeof data.campaignId === 'string' && data.campaignId ? data.campaignId : undefined;
  if (!campaignId) return undefined;
  const emailId = typeof data.id === 'string' && data.id ? data.id : undefined;
  switch (event.type) {
    case 'email.sent': return { campaignId, counters: ['sent'], onceKey: emailId ? `sent:${emailId}` : event.id };
    case 'email.delivered': return { campaignId, counters: ['delivered'], onceKey: emailId ? `delivered:${emailId}` : event.id };
    case 'email.opened': return { campaignId, counters: ['opened'], onceKey: emailId ? `opened:${emailId}` : event.id };
    case 'email.clicked': return { campaignId, counters: ['clicked'], onceKey: emailId ? `clicked:${emailId}` : event.id };
    case 'email.complained': return { campaignId, counters: ['complained'], onceKey: event.id };
    case 'email.bounced':
      return { campaignId, counters: data.bounce?.type === 'Permanent' ? ['bounced', 'hardBounced'] : ['bounced'], onceKey: event.id };
    default: return undefined;
  }
}
