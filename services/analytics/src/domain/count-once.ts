/**
 * Counting an email once per counter, exactly once, without transactions.
 *
 * Two documents take part: a *mark* per (team, email, counter), which says
 * which event owns the counting and whether it is finished, and the daily
 * *rollup* the counter lives in. Single-document updates are atomic; nothing
 * spans two documents, so the protocol is the classic two-phase one
 * (MongoDB's pre-transaction "two-phase commit" pattern):
 *
 * 1. claim: insert the mark `{pending, until: now + lease, rollupId}`; the
 *    unique `_id` lets exactly one event own it.
 * 2. apply: in ONE update of the rollup, `$inc` the counter and `$push` the
 *    mark's token onto the rollup's `pending` list, filtered on the token
 *    not being there already, so a repeat of this step changes nothing.
 * 3. finish: mark `pending: false` (compare-and-set on the owner's `until`).
 * 4. unpend: `$pullAll` the token from the rollup's `pending` list. The list
 *    therefore only ever holds the tokens of countings in flight: the rollup
 *    stays small however many emails it counts.
 *
 * A crash anywhere leads to a redelivery that finds the mark and resumes: a
 * pending mark of its own whose lease ran out is taken over and steps 2-4
 * repeated (2 is a no-op if it had happened); a finished mark only needs step
 * 4 again (idempotent). Another event for the same email and counter (a second
 * open, a second recipient's delivery) finds the mark and counts nothing.
 *
 * Why the lease: the token must never leave the pending list while someone
 * may still apply step 2 for it, or that late step 2 would count again. Only
 * the lease holder applies, and only while at least `marginMs` of its lease
 * is left; a takeover happens only once the lease is over. So a stale holder
 * would have to see its step-2 write delayed by more than the margin.
 */

export interface MarkState {
  readonly eventId: string;
  readonly rollupId: string;
  readonly pending: boolean;
  readonly until: Date;
}

export type ExistingMarkDecision =
  /** Counted already (by this event or another): only make sure the token left the rollup's pending list. */
  | { readonly action: 'unpend' }
  /** Another event is counting it right now: this one counts nothing. */
  | { readonly action: 'skip' }
  /** This same event is being handled elsewhere right now (a concurrent redelivery): try again later. */
  | { readonly action: 'retry' }
  /** The holder's lease ran out without finishing (it crashed): take the counting over. */
  | { readonly action: 'take-over' };

export function decideOnExistingMark(mark: MarkState, eventId: string, now: Date): ExistingMarkDecision {
  if (!mark.pending) return { action: 'unpend' };
  if (mark.until.getTime() <= now.getTime()) return { action: 'take-over' };
  return mark.eventId === eventId ? { action: 'retry' } : { action: 'skip' };
}

/** Whether a holder may still apply step 2: at least `marginMs` of its lease is left. */
export function mayApply(until: Date, now: Date, marginMs: number): boolean {
  return until.getTime() - now.getTime() >= marginMs;
}

export const DEFAULT_LEASE_MS = 60_000;
export const DEFAULT_MARGIN_MS = 30_000;
