import type { EventEnvelope } from '@mailfleet/kit';
import { eventsV1 } from '@mailfleet/proto';
import type { EmailKind, Metric } from './counts.js';
import { utcDay, type Day } from './days.js';

/** An event that can never be applied (it lacks what every event of its type must carry). */
export class MalformedEventError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedEventError';
  }
}

/** Email statuses (SPEC 2.4 plus the states behind the other `email.*` types); `email.<status lower case>` is the event type. */
export const EMAIL_STATUSES = [
  'QUEUED', 'SENT', 'DELIVERED', 'BOUNCED', 'COMPLAINED', 'OPENED', 'CLICKED',
  'DELIVERY_DELAYED', 'REJECTED', 'RENDERING_FAILURE', 'FAILED', 'CANCELLED', 'SUPPRESSED',
] as const;
export type EmailStatus = (typeof EMAIL_STATUSES)[number];

export function isEmailStatus(s: string): s is EmailStatus {
  return (EMAIL_STATUSES as readonly string[]).includes(s);
}

/** The summary of an email shown with an activity item (SPEC 2.5). */
export interface EmailSummary {
  readonly id: string;
  readonly to: readonly string[];
  readonly subject: string;
  readonly from: string;
}

/** What analytics keeps of one `email.*` event. */
export interface EmailFact {
  readonly eventId: string;
  readonly teamId: string;
  readonly emailId: string;
  readonly status: EmailStatus;
  /** Sending domain id; '' when the event names none. */
  readonly domainId: string;
  readonly kind: EmailKind;
  /** When it happened (`data.occurredAt`, else the envelope's createdAt). */
  readonly occurredAt: Date;
  /** When the event was created (the feed's `createdAt`, as the emails service shows its events). */
  readonly createdAt: Date;
  /** UTC day of occurredAt: the rollup the counters go to. */
  readonly day: Day;
  /** Counters this event can advance (each at most once per email). */
  readonly metrics: readonly Metric[];
  readonly summary: EmailSummary;
  /** The whole public payload, kept as the event's free-form `data`. */
  readonly data: Readonly<Record<string, unknown>>;
}

function dateOf(v: unknown): Date | undefined {
  if (typeof v !== 'string' && !(v instanceof Date)) return undefined;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

/** `email.delivery_delayed` -> DELIVERY_DELAYED; undefined for a type that is not an email status. */
export function statusOfType(type: string): EmailStatus | undefined {
  if (!type.startsWith('email.')) return undefined;
  const s = type.slice('email.'.length).toUpperCase();
  return isEmailStatus(s) ? s : undefined;
}

/** Counters an event of this status can advance. A bounce is hard when `bounce.type` is `Permanent`. */
export function metricsOf(status: EmailStatus, data: { readonly bounce?: { readonly type?: string } | undefined }): Metric[] {
  switch (status) {
    case 'SENT':
      return ['sent'];
    case 'DELIVERED':
      return ['delivered'];
    case 'OPENED':
      return ['opened'];
    case 'CLICKED':
      return ['clicked'];
    case 'COMPLAINED':
      return ['complained'];
    case 'BOUNCED':
      // A bounce also counts the email as sent (once per email, like every counter): mail refused outright
      // (550 at RCPT) never has an email.sent of its own, and without this it would be bounced but not sent.
      return data.bounce?.type === 'Permanent' ? ['sent', 'bounced', 'hardBounced'] : ['sent', 'bounced'];
    default:
      return [];
  }
}

/** The payload through the typed contract (`proto/events/v1`, EmailEventData); what it cannot read is malformed. */
function typedEmailData(type: string, data: Readonly<Record<string, unknown>>): eventsV1.EmailEventData {
  try {
    return eventsV1.EmailEventData.fromJSON(data);
  } catch (err) {
    throw new MalformedEventError(`${type}: data does not fit EmailEventData (${(err as Error).message})`);
  }
}

const validDate = (d: Date | undefined): Date | undefined => (d && !Number.isNaN(d.getTime()) ? d : undefined);
const nonBlank = (s: string | undefined): string | undefined => (s !== undefined && s.trim() !== '' ? s : undefined);

function summaryFrom(emailId: string, data: Readonly<Record<string, unknown>>, typed: eventsV1.EmailEventData): EmailSummary {
  // One recipient given as a bare string is still shown (older producers wrote it so).
  return { id: emailId, to: typeof data.to === 'string' ? (data.to ? [data.to] : []) : typed.to, subject: typed.subject, from: typed.from };
}

/**
 * The email summary of a stored payload, as readEmailEvent gave it when the event came: the feed keeps only the
 * payload, so its documents are smaller to scan. A payload that no longer reads gives what it can (empty fields).
 */
export function emailSummaryOf(data: Readonly<Record<string, unknown>>): EmailSummary {
  let typed: eventsV1.EmailEventData;
  try {
    typed = eventsV1.EmailEventData.fromJSON(data);
  } catch {
    typed = eventsV1.EmailEventData.fromJSON({});
  }
  return summaryFrom(typed.id, data, typed);
}

/**
 * Reads an `email.*` event (SPEC 6.3 payload) through the typed contract.
 * Undefined for a type that is not an email status (nothing to keep). Throws
 * MalformedEventError when the event lacks its team, its email id or a valid
 * creation time.
 */
export function readEmailEvent(event: EventEnvelope): EmailFact | undefined {
  const status = statusOfType(event.type);
  if (!status) return undefined;
  if (!event.teamId) throw new MalformedEventError(`${event.type}: teamId is required`);
  const data = event.data;
  const typed = typedEmailData(event.type, data);
  const emailId = nonBlank(typed.id);
  if (!emailId) throw new MalformedEventError(`${event.type}: data.id (the email id) is required`);
  const createdAt = dateOf(event.createdAt);
  if (!createdAt) throw new MalformedEventError(`${event.type}: createdAt is not a valid timestamp`);
  // Only a timestamp given as text is trusted (a number or object would read as 1970).
  const occurredAt = (typeof data.occurredAt === 'string' ? validDate(typed.occurredAt) : undefined) ?? createdAt;
  return {
    eventId: event.id,
    teamId: event.teamId,
    emailId,
    status,
    domainId: nonBlank(typed.domainId) ?? '',
    kind: nonBlank(typed.campaignId) ? 'campaign' : 'transactional',
    occurredAt,
    createdAt,
    day: utcDay(occurredAt),
    metrics: metricsOf(status, typed),
    summary: summaryFrom(emailId, data, typed),
    data,
  };
}

/** What analytics keeps of a domain: its name, for filters by name and the per-domain breakdown. */
export interface DomainFact {
  readonly teamId: string;
  readonly id: string;
  readonly name: string;
  readonly deleted: boolean;
  /** The event's createdAt: a projection takes only newer facts (events may arrive out of order). */
  readonly at: Date;
}

export const DOMAIN_EVENT_TYPES = ['domain.created', 'domain.verified', 'domain.updated', 'domain.deleted'] as const;

/** Reads a `domain.*` event; undefined for another type. Throws MalformedEventError when team, id, name or createdAt is missing. */
export function readDomainEvent(event: EventEnvelope): DomainFact | undefined {
  if (!(DOMAIN_EVENT_TYPES as readonly string[]).includes(event.type)) return undefined;
  if (!event.teamId) throw new MalformedEventError(`${event.type}: teamId is required`);
  let typed: eventsV1.DomainEventData;
  try {
    typed = eventsV1.DomainEventData.fromJSON(event.data);
  } catch (err) {
    throw new MalformedEventError(`${event.type}: data does not fit DomainEventData (${(err as Error).message})`);
  }
  const id = nonBlank(typed.id);
  if (!id) throw new MalformedEventError(`${event.type}: data.id is required`);
  if (typeof event.data.name !== 'string' || typed.name === '') throw new MalformedEventError(`${event.type}: data.name is required`);
  const at = dateOf(event.createdAt);
  if (!at) throw new MalformedEventError(`${event.type}: createdAt is not a valid timestamp`);
  return { teamId: event.teamId, id, name: typed.name.toLowerCase(), deleted: event.type === 'domain.deleted', at };
}
