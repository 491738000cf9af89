import { addressOfRecipient, MAX_SOURCE_LENGTH, type SuppressionReason } from './suppressions.js';

/** The event types the automatic path reads (subjects `mailfleet.<type>`). */
export const AUTO_EVENT_TYPES = ['email.bounced', 'email.complained', 'contact.unsubscribed'] as const;

/** What one event asks of the list: suppress these addresses with this reason and source. */
export interface AutoSuppression {
  readonly emails: readonly string[];
  readonly reason: SuppressionReason;
  readonly source: string | undefined;
  /** Recipients that held no well-formed address (logged, never suppressed). */
  readonly skipped: readonly unknown[];
}

/** The event is not for this list (soft bounce, other unsubscribe reason, other type): why, for the log. */
export interface Ignored {
  readonly ignored: string;
}

/** The event can never be applied (its data lacks what the contract promises). */
export class MalformedEventError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedEventError';
  }
}

type Data = Readonly<Record<string, unknown>>;

/** A trimmed non-blank string (cut to the stored source limit), else undefined. */
function nonEmptyString(v: unknown): string | undefined {
  return typeof v === 'string' && v.trim().length > 0 ? v.trim().slice(0, MAX_SOURCE_LENGTH) : undefined;
}

function recipients(data: Data, type: string): { emails: string[]; skipped: unknown[] } {
  const to = data.to;
  if (!Array.isArray(to)) throw new MalformedEventError(`${type}: data.to must be an array of addresses`);
  const emails: string[] = [];
  const skipped: unknown[] = [];
  for (const r of to as unknown[]) {
    const email = typeof r === 'string' ? addressOfRecipient(r) : undefined;
    if (email === undefined) skipped.push(r);
    else if (!emails.includes(email)) emails.push(email);
  }
  return { emails, skipped };
}

function emailId(data: Data, type: string): string {
  const id = nonEmptyString(data.id);
  if (!id) throw new MalformedEventError(`${type}: data.id (the email id) is required`);
  return id;
}

/**
 * Maps an event to the suppressions it causes (pure; the consumer applies them).
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
 */
export function planAutoSuppression(type: string, data: Data): AutoSuppression | Ignored {
  switch (type) {
    case 'email.bounced': {
      const bounce = data.bounce as Data | undefined;
      if (typeof bounce !== 'object' || bounce === null) throw new MalformedEventError('email.bounced: data.bounce is required');
      if (bounce.type !== 'Permanent') return { ignored: `bounce type ${String(bounce.type)} is not a hard bounce` };
      const source = emailId(data, type);
      return { ...recipients(data, type), reason: 'HARD_BOUNCE', source };
    }
    case 'email.complained': {
      const source = emailId(data, type);
      return { ...recipients(data, type), reason: 'COMPLAINT', source };
    }
    case 'contact.unsubscribed': {
      if (data.reason !== 'UNSUBSCRIBE') return { ignored: `contact unsubscribe reason ${String(data.reason)} does not suppress` };
      if (typeof data.email !== 'string') throw new MalformedEventError('contact.unsubscribed: data.email is required');
      const email = addressOfRecipient(data.email);
      const contactId = nonEmptyString(data.contactId);
      const source = nonEmptyString(data.source) ?? (contactId ? `contact:${contactId}` : undefined);
      return email === undefined
        ? { emails: [], skipped: [data.email], reason: 'UNSUBSCRIBE', source }
        : { emails: [email], skipped: [], reason: 'UNSUBSCRIBE', source };
    }
    default:
      return { ignored: `event type ${type} is not read by the suppression list` };
  }
}

export function isIgnored(p: AutoSuppression | Ignored): p is Ignored {
  return 'ignored' in p;
}
