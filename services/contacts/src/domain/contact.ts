import { InvalidArgumentError } from '@mailfleet/kit';
import { normaliseEmail } from './email.js';

/**
 * Contacts as the service reasons about them, and every state change as a
 * pure function from the current contact to the next one plus the events the
 * change publishes. The repository writes `next` and its events in one
 * document write (the outbox), conditional on the version it read.
 */
export const UNSUBSCRIBE_REASONS = ['UNSUBSCRIBE', 'HARD_BOUNCE', 'COMPLAINT', 'MANUAL'] as const;
export type UnsubscribeReason = (typeof UNSUBSCRIBE_REASONS)[number];

export type Properties = Readonly<Record<string, string>>;

/** Why and when a contact stopped receiving email; set exactly while `subscribed` is false. */
export interface UnsubscribeInfo {
  readonly reason: UnsubscribeReason;
  /** Free text from the caller (shown in the unsubscribes list); null means the reason name. */
  readonly note: string | null;
  /** What caused it: a campaign id, an email id; null when unknown. */
  readonly source: string | null;
  readonly at: Date;
}

export interface Contact {
  readonly id: string;
  readonly teamId: string;
  readonly contactBookId: string;
  /** Normalised (trimmed, lower case). */
  readonly email: string;
  readonly firstName: string | null;
  readonly lastName: string | null;
  readonly subscribed: boolean;
  readonly properties: Properties;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  readonly unsubscribe: UnsubscribeInfo | null;
  /** Incremented by every write; writes are conditional on the version read. */
  readonly version: number;
}

/** The fields a caller may set; absent means "leave as is" (on create: the default). */
export interface ContactChange {
  readonly firstName?: string | null;
  readonly lastName?: string | null;
  readonly subscribed?: boolean;
  readonly properties?: Properties;
}

export interface ContactInput extends ContactChange {
  /** Normalised. */
  readonly email: string;
}

export const CONTACT_EVENT = {
  created: 'contact.created',
  updated: 'contact.updated',
  deleted: 'contact.deleted',
  /** Internal (never a webhook type): the suppressions service suppresses the address. */
  unsubscribed: 'contact.unsubscribed',
  /**
   * Internal (never a webhook type): an unsubscribed contact was set
   * `subscribed: true` by the team; data is the contact (ContactEventData).
   * The suppressions service lifts the address's UNSUBSCRIBE entry.
   */
  resubscribed: 'contact.resubscribed',
} as const;
export type ContactEventType = (typeof CONTACT_EVENT)[keyof typeof CONTACT_EVENT];

export interface PendingEvent {
  readonly type: ContactEventType;
  readonly data: Record<string, unknown>;
}

/** The result of a change: the next state and what to publish. No events means nothing changed (no write). */
export interface Transition {
  readonly next: Contact;
  readonly events: readonly PendingEvent[];
}

export const LIMITS = {
  nameLength: 256,
  properties: 200,
  propertyKeyLength: 256,
  propertyValueLength: 8192,
  noteLength: 500,
  sourceLength: 256,
} as const;

/** A per-field problem: a code for bulk item errors, a message for everyone. */
export interface FieldProblem {
  readonly code: 'INVALID_EMAIL' | 'INVALID_NAME' | 'INVALID_PROPERTIES';
  readonly message: string;
}

export type Checked<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly problem: FieldProblem };

/** "" and null both mean "no name"; names are kept as given otherwise. */
export function checkName(value: string | null | undefined, field: 'firstName' | 'lastName'): Checked<string | null | undefined> {
  if (value === undefined) return { ok: true, value: undefined };
  if (value === null || value === '') return { ok: true, value: null };
  if (value.length > LIMITS.nameLength) {
    return { ok: false, problem: { code: 'INVALID_NAME', message: `${field} must be at most ${LIMITS.nameLength} characters` } };
  }
  return { ok: true, value };
}

export function checkProperties(props: Readonly<Record<string, unknown>> | undefined): Checked<Properties | undefined> {
  if (props === undefined) return { ok: true, value: undefined };
  const bad = (message: string): Checked<Properties | undefined> => ({ ok: false, problem: { code: 'INVALID_PROPERTIES', message } });
  const entries = Object.entries(props);
  if (entries.length > LIMITS.properties) return bad(`properties may hold at most ${LIMITS.properties} entries`);
  for (const [k, v] of entries) {
    if (typeof v !== 'string') return bad(`properties.${k} must be a string`);
    if (k.length === 0 || k.length > LIMITS.propertyKeyLength) return bad(`property names must be 1 to ${LIMITS.propertyKeyLength} characters`);
    // eslint-disable-next-line no-control-regex -- exactly what is refused: BSON cannot hold a NUL in a key
    if (/[\u0000-\u001f]/.test(k)) return bad('property names must not contain control characters');
    if (v.length > LIMITS.propertyValueLength) return bad(`properties.${k} must be at most ${LIMITS.propertyValueLength} characters`);
  }
  return { ok: true, value: Object.fromEntries(entries) as Properties };
}

export function checkChange(change: ContactChange): Checked<ContactChange> {
  const firstName = checkName(change.firstName, 'firstName');
  if (!firstName.ok) return firstName;
  const lastName = checkName(change.lastName, 'lastName');
  if (!lastName.ok) return lastName;
  const properties = checkProperties(change.properties);
  if (!properties.ok) return properties;
  return {
    ok: true,
    value: {
      ...(firstName.value !== undefined ? { firstName: firstName.value } : {}),
      ...(lastName.value !== undefined ? { lastName: lastName.value } : {}),
      ...(change.subscribed !== undefined ? { subscribed: change.subscribed } : {}),
      ...(properties.value !== undefined ? { properties: properties.value } : {}),
    },
  };
}

export function checkInput(input: ContactChange & { email: string }): Checked<ContactInput> {
  const email = normaliseEmail(input.email);
  if (!email) {
    return { ok: false, problem: { code: 'INVALID_EMAIL', message: input.email.trim() ? `Invalid email address: ${input.email}` : 'email is required' } };
  }
  const change = checkChange(input);
  if (!change.ok) return change;
  return { ok: true, value: { ...change.value, email } };
}

/** The checked value, or an INVALID_ARGUMENT carrying the problem (single-contact RPCs). */
export function orThrow<T>(c: Checked<T>): T {
  if (!c.ok) throw new InvalidArgumentError(c.problem.message, { details: { code: c.problem.code } });
  return c.value;
}

/** A caller's free-text reason names a reason code when it spells one (any case, spaces or dashes for underscores). */
export function resolveReason(code: UnsubscribeReason | undefined, note: string): UnsubscribeReason {
  if (code) return code;
  const spelled = note.trim().toUpperCase().replace(/[\s-]+/g, '_');
  return (UNSUBSCRIBE_REASONS as readonly string[]).includes(spelled) ? (spelled as UnsubscribeReason) : 'UNSUBSCRIBE';
}

/** Trims the optional note and source; empty means absent. */
export function unsubscribeDetails(reason: UnsubscribeReason, note: string | undefined, source: string | undefined): { reason: UnsubscribeReason; note: string | null; source: string | null } {
  const n = note?.trim() ?? '';
  const s = source?.trim() ?? '';
  if (n.length > LIMITS.noteLength) throw new InvalidArgumentError(`reason must be at most ${LIMITS.noteLength} characters`);
  if (s.length > LIMITS.sourceLength) throw new InvalidArgumentError(`source must be at most ${LIMITS.sourceLength} characters`);
  return { reason, note: n && n.toUpperCase() !== reason ? n : null, source: s || null };
}

/** SPEC 2.9 / 6.3: the public Contact object, as `contact.*` events carry it. */
export function contactEventData(c: Contact): Record<string, unknown> {
  return {
    id: c.id,
    email: c.email,
    firstName: c.firstName,
    lastName: c.lastName,
    subscribed: c.subscribed,
    properties: { ...c.properties },
    contactBookId: c.contactBookId,
    createdAt: c.createdAt.toISOString(),
    updatedAt: c.updatedAt.toISOString(),
  };
}

/** The agreed internal payload: `{contactId, contactBookId, email, reason, source}`. */
export function unsubscribedEventData(c: Contact): Record<string, unknown> {
  return {
    contactId: c.id,
    contactBookId: c.contactBookId,
    email: c.email.toLowerCase(),
    reason: c.unsubscribe?.reason ?? 'MANUAL',
    source: c.unsubscribe?.source ?? null,
  };
}

function samePropertiesAs(a: Properties, b: Properties): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

function eventsFor(kind: 'created' | 'updated', next: Contact, becameUnsubscribed: boolean, becameSubscribed = false): PendingEvent[] {
  const events: PendingEvent[] = [{ type: CONTACT_EVENT[kind], data: contactEventData(next) }];
  if (becameUnsubscribed) events.push({ type: CONTACT_EVENT.unsubscribed, data: unsubscribedEventData(next) });
  if (becameSubscribed) events.push({ type: CONTACT_EVENT.resubscribed, data: contactEventData(next) });
  return events;
}

/**
 * A new contact. Created with `subscribed: false` it is an opt-out from the
 * start (an imported unsubscribe list, say): `contact.unsubscribed` with
 * reason MANUAL goes out beside `contact.created`, so that the address is
 * suppressed like any other opt-out.
 */
export function createContact(p: { id: string; teamId: string; contactBookId: string; input: ContactInput; now: Date }): Transition {
  const subscribed = p.input.subscribed ?? true;
  const next: Contact = {
    id: p.id,
    teamId: p.teamId,
    contactBookId: p.contactBookId,
    email: p.input.email,
    firstName: p.input.firstName ?? null,
    lastName: p.input.lastName ?? null,
    subscribed,
    properties: p.input.properties ?? {},
    createdAt: p.now,
    updatedAt: p.now,
    unsubscribe: subscribed ? null : { reason: 'MANUAL', note: null, source: null, at: p.now },
    version: 1,
  };
  return { next, events: eventsFor('created', next, !subscribed) };
}

/**
 * A change by the team (PATCH, PUT, bulk upsert): only the given fields
 * change. Setting `subscribed: false` is an opt-out like any other
 * (reason MANUAL, `contact.unsubscribed` published); `subscribed: true`
 * re-subscribes, clears the unsubscribe record and publishes
 * `contact.resubscribed`, so an UNSUBSCRIBE suppression of the address is
 * lifted (the team opting the address in again is the one way back). A
 * change that changes nothing writes and publishes nothing.
 */
export function updateContact(current: Contact, change: ContactChange, now: Date): Transition {
  const subscribed = change.subscribed ?? current.subscribed;
  const candidate = {
    firstName: change.firstName === undefined ? current.firstName : change.firstName,
    lastName: change.lastName === undefined ? current.lastName : change.lastName,
    properties: change.properties ?? current.properties,
  };
  const unchanged = candidate.firstName === current.firstName && candidate.lastName === current.lastName
    && subscribed === current.subscribed && samePropertiesAs(candidate.properties, current.properties);
  if (unchanged) return { next: current, events: [] };
  const becameUnsubscribed = current.subscribed && !subscribed;
  const next: Contact = {
    ...current,
    ...candidate,
    subscribed,
    unsubscribe: subscribed ? null : becameUnsubscribed ? { reason: 'MANUAL', note: null, source: null, at: now } : current.unsubscribe,
    updatedAt: now,
    version: current.version + 1,
  };
  return { next, events: eventsFor('updated', next, becameUnsubscribed, !current.subscribed && subscribed) };
}

/** Unsubscribe RPCs and bounce/complaint events: idempotent, nothing happens to a contact already unsubscribed. */
export function unsubscribeContact(current: Contact, details: { reason: UnsubscribeReason; note: string | null; source: string | null }, now: Date): Transition {
  if (!current.subscribed) return { next: current, events: [] };
  const next: Contact = {
    ...current,
    subscribed: false,
    unsubscribe: { ...details, at: now },
    updatedAt: now,
    version: current.version + 1,
  };
  return { next, events: eventsFor('updated', next, true) };
}

/** `contact.deleted` carries the contact as it was. */
export function deletionEvents(current: Contact): PendingEvent[] {
  return [{ type: CONTACT_EVENT.deleted, data: contactEventData(current) }];
}
