import { addressOfRecipient } from '@mailfleet/kit';
import { eventsV1 } from '@mailfleet/proto';
import { MAX_SOURCE_LENGTH, type SuppressionReason } from './suppressions.js';

/** The event types the automatic path reads (subjects `mailfleet.<type>`). */
export const AUTO_EVENT_TYPES = ['email.bounced', 'email.complained', 'contact.unsubscribed', 'contact.resubscribed'] as const;

/** What one event asks of the list: suppress these addresses with this reason and source. */
export interface AutoSuppression {
  readonly emails: readonly string[];
  readonly reason: SuppressionReason;
  readonly source: string | undefined;
  /** Recipients that held no well-formed address (logged, never suppressed). */
  readonly skipped: readonly unknown[];
}

/** A contact opted in again: its address's UNSUBSCRIBE entry (and only that reason) goes. */
export interface LiftUnsubscribe {
  readonly lift: string;
}

/** The event is not for this list (soft bounce, other unsubscribe reason, other type): why, for the log. */
export interface Ignored {
  readonly ignored: string;
}

export type AutoPlan = AutoSuppression | LiftUnsubscribe | Ignored;

/** The event can never be applied (its data lacks what the contract promises). */
export class MalformedEventError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedEventError';
  }
}

/** A trimmed non-blank string (cut to the stored source limit), else undefined. */
function nonEmptyString(v: string | undefined): string | undefined {
  return v !== undefined && v.trim().length > 0 ? v.trim().slice(0, MAX_SOURCE_LENGTH) : undefined;
}

function isRecord(data: unknown): data is Readonly<Record<string, unknown>> {
  return typeof data === 'object' && data !== null && !Array.isArray(data);
}

/**
 * Reads `data` through the typed contract (`proto/events/v1`). The generated
 * fromJSON fills absent fields with defaults, so what the contract promises
 * (a recipient list, an email id, a bounce) is checked on the raw JSON first.
 */
function typed<T>(type: string, data: unknown, fromJSON: (o: unknown) => T): T {
  if (!isRecord(data)) throw new MalformedEventError(`${type}: data must be an object`);
  try {
    return fromJSON(data);
  } catch (err) {
    throw new MalformedEventError(`${type}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function recipients(raw: unknown, type: string): { emails: string[]; skipped: unknown[] } {
  if (!Array.isArray(raw)) throw new MalformedEventError(`${type}: data.to must be an array of addresses`);
  const emails: string[] = [];
  const skipped: unknown[] = [];
  for (const r of raw as unknown[]) {
    const email = typeof r === 'string' ? addressOfRecipient(r) : undefined;
    if (email === undefined) skipped.push(r);
    else if (!emails.includes(email)) emails.push(email);
  }
  return { emails, skipped };
}

function emailEvent(type: string, data: unknown): { typed: eventsV1.EmailEventData; emails: string[]; skipped: unknown[]; source: string } {
  const t = typed(type, data, (o) => eventsV1.EmailEventData.fromJSON(o));
  const raw = data as Readonly<Record<string, unknown>>;
  const source = typeof raw.id === 'string' ? nonEmptyString(t.id) : undefined;
  if (!source) throw new MalformedEventError(`${type}: data.id (the email id) is required`);
  return { typed: t, ...recipients(raw.to, type), source };
}

/**
 * Maps an event to what it does to the list (pure; the consumer applies it).
 *
 *  - `email.bounced` with `bounce.type === 'Permanent'` -> HARD_BOUNCE for each
 *    address in `data.to`, source = email id. Transient and Undetermined bounces
 *    are ignored: the mailbox exists or may exist.
 *  - `email.complained` -> COMPLAINT for each address in `data.to`, source = email id.
 *  - `contact.unsubscribed` with `reason === 'UNSUBSCRIBE'` (the recipient opted
 *    out through a link or List-Unsubscribe) -> UNSUBSCRIBE for `data.email`,
 *    source = `data.source`, else `contact:<contactId>`. Other reasons are
 *    ignored: HARD_BOUNCE and COMPLAINT arrive as email events already, and
 *    MANUAL is the team editing a contact's per-book flag (see README).
 *  - `contact.resubscribed` (the team set `subscribed: true` on an
 *    unsubscribed contact; data is the contact) -> the address's UNSUBSCRIBE
 *    entry is lifted. HARD_BOUNCE, COMPLAINT and MANUAL entries stay.
 */
export function planAutoSuppression(type: string, data: unknown): AutoPlan {
  switch (type) {
    case 'email.bounced': {
      const raw = isRecord(data) ? data : {};
      if (!isRecord(raw.bounce)) throw new MalformedEventError('email.bounced: data.bounce is required');
      const e = emailEvent(type, data);
      if (e.typed.bounce?.type !== 'Permanent') return { ignored: `bounce type ${String(e.typed.bounce?.type)} is not a hard bounce` };
      return { emails: e.emails, skipped: e.skipped, reason: 'HARD_BOUNCE', source: e.source };
    }
    case 'email.complained': {
      const e = emailEvent(type, data);
      return { emails: e.emails, skipped: e.skipped, reason: 'COMPLAINT', source: e.source };
    }
    case 'contact.unsubscribed': {
      const u = typed(type, data, (o) => eventsV1.ContactUnsubscribedEventData.fromJSON(o));
      if (u.reason !== 'UNSUBSCRIBE') return { ignored: `contact unsubscribe reason ${u.reason || 'none'} does not suppress` };
      if (typeof (data as Record<string, unknown>).email !== 'string') throw new MalformedEventError('contact.unsubscribed: data.email is required');
      const email = addressOfRecipient(u.email);
      const contactId = nonEmptyString(u.contactId);
      const source = nonEmptyString(u.source) ?? (contactId ? `contact:${contactId}` : undefined);
      return email === undefined
        ? { emails: [], skipped: [u.email], reason: 'UNSUBSCRIBE', source }
        : { emails: [email], skipped: [], reason: 'UNSUBSCRIBE', source };
    }
    case 'contact.resubscribed': {
      const c = typed(type, data, (o) => eventsV1.ContactEventData.fromJSON(o));
      const email = addressOfRecipient(c.email);
      if (email === undefined) throw new MalformedEventError('contact.resubscribed: data.email must be an address');
      return { lift: email };
    }
    default:
      return { ignored: `event type ${type} is not read by the suppression list` };
  }
}

export function isIgnored(p: AutoPlan): p is Ignored {
  return 'ignored' in p;
}

export function isLift(p: AutoPlan): p is LiftUnsubscribe {
  return 'lift' in p;
}
