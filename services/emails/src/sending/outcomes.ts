import type { AttemptResult, RecipientRefusal } from '../domain/delivery.js';
import type { BounceDetails } from '../domain/event-data.js';
import type { EmailStatus } from '../domain/status.js';
import type { EmailRecord, Mutation } from '../repositories/emails.repository.js';

/**
 * Pure: the change an attempt's result makes to the email that was sent.
 * Recipients the relay took become accepted (SENT), recipients it refused
 * with a 5xx are bounced there and then (BOUNCED, Permanent), recipients it
 * deferred and whole-attempt failures are retried with backoff
 * (DELIVERY_DELAYED) until the attempts run out (FAILED). A 5xx on the
 * message itself (MAIL FROM, DATA) is REJECTED: the content or sender was
 * refused, which says nothing about the recipients' addresses.
 */
export interface OutcomeContext {
  /** The number of the attempt that produced the result (from the queue entry). */
  readonly attempt: number;
  readonly now: Date;
  readonly maxAttempts: number;
  readonly retryDelayMs: (failedAttempts: number) => number;
  readonly classify: (refusal: RecipientRefusal) => BounceDetails;
}

type EventSpec = NonNullable<Mutation['events']>[number];

function without(list: readonly string[], remove: Iterable<string>): string[] {
  const r = new Set(remove);
  return list.filter((x) => !r.has(x));
}

/**
 * Still to be decided. Who may decide is settled by the send queue's lease:
 * only the worker holding the email's entry sends it, and changes take the
 * entry first.
 */
export function isPending(e: EmailRecord): boolean {
  return e.sendState === 'PENDING';
}

export function outcomeMutation(e: EmailRecord, result: AttemptResult, ctx: OutcomeContext): Mutation | null {
  if (!isPending(e)) return null;
  const events: EventSpec[] = [];
  let pending = [...e.recipients.pending];
  const accepted = [...e.recipients.accepted];
  const bounced = [...e.recipients.bounced];
  const failed = [...e.recipients.failed];
  const set: Record<string, unknown> = {};
  let retryable: string[] = [];
  let retryReason = '';

  if (result.kind === 'accepted' || result.kind === 'recipients-refused') {
    if (result.kind === 'accepted') {
      const took = result.accepted.filter((a) => pending.includes(a));
      pending = without(pending, took);
      accepted.push(...took.filter((a) => !accepted.includes(a)));
      // A delivery report may already have recorded these as taken (it can beat this write).
      if (took.length > 0) events.push({ status: 'SENT', extras: { details: { response: result.response } } });
      if (!e.sentAt && took.length > 0) set.sentAt = ctx.now;
    }
    for (const r of result.refused) {
      if (!pending.includes(r.recipient)) continue;
      pending = without(pending, [r.recipient]);
      if (!bounced.includes(r.recipient)) bounced.push(r.recipient);
      events.push({ status: 'BOUNCED', extras: { to: [r.recipient], bounce: ctx.classify(r), details: { response: r.response } } });
      if (!set.bouncedAt) {
        set.bouncedAt = ctx.now;
        set.bouncedEmail = r.recipient;
      }
    }
    retryable = result.deferred.map((d) => d.recipient).filter((r) => pending.includes(r));
    retryReason = result.deferred.map((d) => d.response).join('; ');
    // Anything the relay neither took nor refused stays pending too (never silently dropped).
    retryable = [...new Set([...retryable, ...pending])];
  } else if (result.kind === 'rejected') {
    events.push({ status: 'REJECTED', extras: { details: { reason: result.message, responseCode: result.responseCode } } });
    failed.push(...pending);
    pending = [];
  } else {
    retryable = pending;
    retryReason = result.message;
  }

  if (retryable.length > 0) {
    if (ctx.attempt >= ctx.maxAttempts) {
      events.push({ status: 'FAILED', extras: { to: retryable, details: { reason: `Gave up after ${ctx.attempt} attempts: ${retryReason}`, attempts: ctx.attempt } } });
      failed.push(...retryable);
      pending = without(pending, retryable);
    } else {
      const next = new Date(ctx.now.getTime() + ctx.retryDelayMs(ctx.attempt));
      events.push({ status: 'DELIVERY_DELAYED', extras: { to: retryable, details: { reason: retryReason, attempt: ctx.attempt, nextAttemptAt: next.toISOString() } } });
      set.nextAttemptAt = next;
    }
  }

  const done = pending.length === 0;
  return {
    set: {
      ...set,
      sendState: done ? 'DONE' : 'PENDING',
      'recipients.pending': pending,
      'recipients.accepted': accepted,
      'recipients.bounced': bounced,
      'recipients.failed': failed,
      attempts: ctx.attempt,
    },
    unset: done ? ['nextAttemptAt'] : [],
    events,
  };
}

/** Why a claimed queue entry does not lead to a send now. */
export type NotSendable = 'done' | 'not-due';

export function whyNotSendable(e: EmailRecord, now: Date): NotSendable | undefined {
  if (e.sendState !== 'PENDING' || e.recipients.pending.length === 0) return 'done';
  if (e.nextAttemptAt && e.nextAttemptAt.getTime() > now.getTime()) return 'not-due';
  return undefined;
}

/** The email cannot be sent at all (its domain is gone or unverified, its message cannot be built). */
export function failMutation(e: EmailRecord, reason: string, status: Extract<EmailStatus, 'FAILED' | 'REJECTED'> = 'FAILED'): Mutation | null {
  if (e.sendState !== 'PENDING') return null;
  return {
    set: { sendState: 'DONE', 'recipients.pending': [], 'recipients.failed': [...e.recipients.failed, ...e.recipients.pending] },
    unset: ['nextAttemptAt'],
    events: [{ status, extras: { to: e.recipients.pending.length > 0 ? e.recipients.pending : undefined, details: { reason } } }],
  };
}

/** Recipients found suppressed just before sending. */
export function suppressMutation(e: EmailRecord, suppressed: ReadonlySet<string>, now: Date): Mutation | null {
  if (!isPending(e)) return null;
  const hit = e.recipients.pending.filter((r) => suppressed.has(r));
  // Nothing to change: no write (the check is repeated on a later attempt, which is cheap).
  if (hit.length === 0) return null;
  const pending = without(e.recipients.pending, hit);
  const done = pending.length === 0;
  return {
    set: {
      suppressionCheckedAt: now,
      'recipients.pending': pending,
      'recipients.suppressed': [...e.recipients.suppressed, ...hit],
      ...(done ? { sendState: 'DONE' } : {}),
    },
    unset: done ? ['nextAttemptAt'] : [],
    events: [{ status: 'SUPPRESSED', extras: { to: hit, details: { reason: 'The address is on the suppression list (bounced, complained, unsubscribed or added by hand)' } } }],
  };
}
