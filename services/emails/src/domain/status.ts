/**
 * Email statuses (SPEC 2.4 plus the states behind the other `email.*` event
 * types) and how an email's `latestStatus` follows its events.
 */
export const EMAIL_STATUSES = [
  'QUEUED', 'SENT', 'DELIVERED', 'BOUNCED', 'COMPLAINED', 'OPENED', 'CLICKED',
  'DELIVERY_DELAYED', 'REJECTED', 'RENDERING_FAILURE', 'FAILED', 'CANCELLED', 'SUPPRESSED',
] as const;
export type EmailStatus = (typeof EMAIL_STATUSES)[number];

export function isEmailStatus(s: string): s is EmailStatus {
  return (EMAIL_STATUSES as readonly string[]).includes(s);
}

/** `DELIVERY_DELAYED` -> `email.delivery_delayed`. */
export function eventTypeOf(status: EmailStatus): string {
  return `email.${status.toLowerCase()}`;
}

/**
 * Events arrive out of order (a delivery report can beat the write that
 * records the relay's acceptance; a pixel can be fetched before it), so the
 * shown status is the most advanced one seen, not simply the last: it never
 * goes back from DELIVERED to SENT, from CLICKED to OPENED. The outcomes of an
 * email that never left (failed, cancelled, suppressed...) rank above the
 * waiting states but below anything that shows the message went out: when
 * some recipients got it, that is what the status says.
 */
const RANK: Record<EmailStatus, number> = {
  QUEUED: 1,
  DELIVERY_DELAYED: 2,
  REJECTED: 3,
  RENDERING_FAILURE: 3,
  FAILED: 3,
  CANCELLED: 3,
  SUPPRESSED: 3,
  SENT: 4,
  DELIVERED: 5,
  OPENED: 6,
  CLICKED: 7,
  BOUNCED: 8,
  COMPLAINED: 9,
};

export function statusRank(s: EmailStatus): number {
  return RANK[s];
}

/** The status shown after `next` happened to an email showing `current`. */
export function advanceStatus(current: EmailStatus | undefined, next: EmailStatus): EmailStatus {
  if (!current) return next;
  return RANK[next] >= RANK[current] ? next : current;
}
