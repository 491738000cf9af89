import { PoisonEventError, type EventEnvelope } from '@mailfleet/kit';
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
 * not (undefined). An event without a recipient list can never be handled:
 * PoisonEventError.
 */
export function unsubscribePlanFor(event: EventEnvelope): UnsubscribePlan | undefined {
  const data = event.data as { id?: unknown; to?: unknown; bounce?: { type?: unknown } | null };
  let reason: UnsubscribeReason;
  if (event.type === 'email.bounced') {
    if (data.bounce?.type !== 'Permanent') return undefined;
    reason = 'HARD_BOUNCE';
  } else if (event.type === 'email.complained') {
    reason = 'COMPLAINT';
  } else {
    return undefined;
  }
  const to = typeof data.to === 'string' ? [data.to] : data.to;
  if (!Array.isArray(to) || to.some((t) => typeof t !== 'string')) throw new PoisonEventError(`${event.type} without a data.to list`);
  const emails = [...new Set((to as string[]).map(recipientAddress).filter((e): e is string => e !== undefined))];
  return { teamId: event.teamId, emails, reason, source: typeof data.id === 'string' && data.id ? data.id : null };
}
