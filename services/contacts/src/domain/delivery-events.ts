import { PoisonEventError, type EventEnvelope } from '@mailfleet/kit';
import { eventsV1 } from '@mailfleet/proto';
import type { UnsubscribeReason } from './contact.js';
import { recipientAddress } from './email.js';

/** What a delivery event asks of the contacts service: unsubscribe these addresses in every book of the team. */
export interface UnsubscribePlan {
  readonly teamId: string;
  readonly emails: readonly string[];
  readonly reason: UnsubscribeReason;
  /** The email id (SPEC 6.3 `data.id`). */
  readonly source: string | null;
}

export const DELIVERY_SUBJECTS = ['mailfleet.email.bounced', 'mailfleet.email.complained'] as const;

/**
 * A hard bounce (`email.bounced` with `bounce.type` `Permanent`) or a
 * complaint unsubscribes the recipients; a soft or undetermined bounce does
 * not (undefined). The payload is read through the typed contract
 * (`proto/events/v1` EmailEventData). An event without a recipient list can
 * never be handled: PoisonEventError.
 */
export function unsubscribePlanFor(event: EventEnvelope): UnsubscribePlan | undefined {
  if (event.type !== 'email.bounced' && event.type !== 'email.complained') return undefined;
  const raw = event.data;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new PoisonEventError(`${event.type} without a data object`);
  const to = (raw as { to?: unknown }).to;
  // The generated decoder turns any value into a string; the contract promises a list of addresses.
  const list = typeof to === 'string' ? [to] : to;
  if (!Array.isArray(list) || list.some((t) => typeof t !== 'string')) throw new PoisonEventError(`${event.type} without a data.to list`);
  let data: eventsV1.EmailEventData;
  try {
    data = eventsV1.EmailEventData.fromJSON({ ...raw, to: list });
  } catch (err) {
    throw new PoisonEventError(`${event.type}: ${err instanceof Error ? err.message : String(err)}`);
  }
  let reason: UnsubscribeReason;
  if (event.type === 'email.bounced') {
    if (data.bounce?.type !== 'Permanent') return undefined;
    reason = 'HARD_BOUNCE';
  } else {
    reason = 'COMPLAINT';
  }
  const emails = [...new Set(data.to.map(recipientAddress).filter((e): e is string => e !== undefined))];
  return { teamId: event.teamId, emails, reason, source: data.id || null };
}
