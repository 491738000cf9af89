import {
  createEvent, ensureOutboxIndex, findByIds, insertManyIgnoringDuplicates, NOT_DELETED, outboxEntries, withOutbox, type EventEnvelope, type OutboxDoc, type OutboxEntry,
} from '@mailfleet/kit';
import { Binary, type Collection, type Db, type Document, type Filter, type UpdateFilter } from 'mongodb';
import { emailEventData, type EmailFacts, type EventExtras } from '../domain/event-data.js';
import { advanceStatus, eventTypeOf, type EmailStatus } from '../domain/status.js';
import { createRecentEmails, type RecentEmails } from './recent-emails.js';

/** One stored status change (SPEC 2.5); its id is the id of the `email.*` event published for it. */
export interface StoredEvent {
  readonly id: string;
  readonly status: EmailStatus;
  readonly data: Record<string, unknown>;
  readonly createdAt: Date;
}

/** Where each envelope recipient stands. */
export interface RecipientSets {
  /** Still to be handed to the relay. */
  readonly pending: readonly string[];
  /** Taken by the relay. */
  readonly accepted: readonly string[];
  /** Refused for good (5xx at RCPT). */
  readonly bounced: readonly string[];
  /** Not sent: suppressed or unsubscribed. */
  readonly suppressed: readonly string[];
  /** Given up after retries, or dropped with the email (failed, cancelled, rejected). */
  readonly failed: readonly string[];
}

export type SendState = 'PENDING' | 'DONE';

/** Who sends what to whom: the fields a stored email and a new one share. */
export interface EmailAddressing {
  readonly id: string;
  readonly teamId: string;
  readonly domainId: string;
  readonly from: string;
  readonly fromAddress: string;
  readonly to: readonly string[];
  readonly toAddresses: readonly string[];
  readonly cc: readonly string[];
  readonly bcc: readonly string[];
  readonly replyTo: readonly string[];
  readonly subject: string;
}

export interface EmailRecord extends EmailAddressing {
  /** Bodies and custom headers live in their own document: present only on reads that ask for them. */
  readonly content?: EmailContent | undefined;
  readonly hasAttachments: boolean;
  readonly templateId?: string | undefined;
  readonly campaignId?: string | undefined;
  readonly contactId?: string | undefined;
  readonly metadata?: Readonly<Record<string, unknown>> | undefined;
  /** `<id@sending-domain>`. */
  readonly messageId: string;
  readonly inReplyTo?: string | undefined;
  readonly references: readonly string[];
  readonly scheduledAt?: Date | undefined;
  readonly latestStatus: EmailStatus;
  readonly events: readonly StoredEvent[];
  readonly sendState: SendState;
  readonly recipients: RecipientSets;
  readonly attempts: number;
  readonly nextAttemptAt?: Date | undefined;
  readonly suppressionCheckedAt: Date;
  readonly sentAt?: Date | undefined;
  readonly reportKeys: readonly string[];
  readonly trackingEventCount: number;
  /** Events written and not yet removed after publishing. */
  readonly outbox: readonly OutboxEntry[];
  readonly version: number;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

interface EmailDoc extends OutboxDoc {
  _id: string;
  teamId: string;
  domainId: string;
  from: string;
  fromAddress: string;
  to: string[];
  toAddresses: string[];
  cc: string[];
  bcc: string[];
  replyTo: string[];
  subject: string;
  hasAttachments: boolean;
  templateId?: string;
  campaignId?: string;
  contactId?: string;
  /** JSON text: free-form keys must not become field names. */
  metadataJson?: string;
  messageId: string;
  inReplyTo?: string;
  references: string[];
  scheduledAt?: Date;
  latestStatus: EmailStatus;
  /** Each a StoredEventDoc, or (written before the compact form) the event as an object. */
  events: (StoredEventDoc | LegacyStoredEvent)[];
  sendState: SendState;
  recipients: { pending: string[]; accepted: string[]; bounced: string[]; suppressed: string[]; failed: string[] };
  attempts: number;
  /** Set while PENDING: when the email is due (its schedule, or its next retry). The send queue mirrors it. */
  nextAttemptAt?: Date;
  suppressionCheckedAt: Date;
  sentAt?: Date;
  bouncedAt?: Date;
  bouncedEmail?: string;
  complainedAt?: Date;
  complainedEmail?: string;
  /** Hashes of the delivery reports already applied (a report delivered twice counts once). */
  reportKeys: string[];
  trackingEventCount: number;
  /** Bumped by every change: writes are compare-and-set on it. */
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * A stored event as the email document holds it: one JSON string `{id, status, data, at}` (`at` in epoch ms).
 * Every status change rewrites the whole document on FerretDB, which also stores a type schema beside each
 * field: an array of objects carries a schema per element, several times the size of the event itself, an
 * array of strings one word per element. The event data is JSON already (strings, numbers, arrays).
 */
type StoredEventDoc = string;

/** How stored events were written before the compact form: still read. */
interface LegacyStoredEvent {
  id: string;
  status: EmailStatus;
  data: Record<string, unknown>;
  createdAt: Date;
}

export function encodeStoredEvent(e: StoredEvent): StoredEventDoc {
  return JSON.stringify({ id: e.id, status: e.status, data: e.data, at: e.createdAt.getTime() });
}

export function decodeStoredEvent(e: StoredEventDoc | LegacyStoredEvent): StoredEvent {
  if (typeof e !== 'string') return { id: e.id, status: e.status, data: e.data, createdAt: e.createdAt };
  const o = JSON.parse(e) as { id: string; status: EmailStatus; data?: Record<string, unknown>; at: number };
  return { id: o.id, status: o.status, data: o.data ?? {}, createdAt: new Date(o.at) };
}

/** The rendered bodies and custom headers: written once, read to send and to show; kept out of the email document, which every status change rewrites. */
export interface EmailContent {
  readonly html?: string | undefined;
  readonly text?: string | undefined;
  readonly headers: readonly (readonly [string, string])[];
}

interface ContentDoc {
  _id: string;
  teamId: string;
  html?: string;
  text?: string;
  /** Name/value pairs, not an object: header names may hold dots, which field names must not (and FerretDB takes no nested arrays). */
  headers: { name: string; value: string }[];
}

function toContent(d: ContentDoc | null | undefined): EmailContent {
  return { html: d?.html, text: d?.text, headers: (d?.headers ?? []).map((h) => [h.name, h.value] as const) };
}

interface AttachmentsDoc {
  _id: string;
  teamId: string;
  items: { filename: string; content: Binary }[];
}

/** A new email as the accept path builds it. */
export interface NewEmail extends EmailAddressing {
  readonly html?: string | undefined;
  readonly text?: string | undefined;
  readonly headers: readonly (readonly [string, string])[];
  readonly attachments: readonly { readonly filename: string; readonly content: Buffer }[];
  readonly templateId?: string | undefined;
  readonly campaignId?: string | undefined;
  readonly contactId?: string | undefined;
  readonly metadata?: Readonly<Record<string, unknown>> | undefined;
  readonly messageId: string;
  readonly inReplyTo?: string | undefined;
  readonly references: readonly string[];
  readonly scheduledAt?: Date | undefined;
  /** Recipients to send to; empty when nothing will be sent. */
  readonly pending: readonly string[];
  readonly suppressed: readonly string[];
  /** Recipients dropped with the email (rendering failure). */
  readonly failed?: readonly string[] | undefined;
  /** The events of the accept, in order (for example SUPPRESSED then QUEUED). */
  readonly events: readonly { status: EmailStatus; extras?: EventExtras }[];
  readonly createdAt: Date;
}

/** A change computed from the current state; null means nothing to do. */
export interface Mutation {
  readonly set?: Readonly<Record<string, unknown>>;
  readonly unset?: readonly string[];
  readonly events?: readonly { status: EmailStatus; extras?: EventExtras; occurredAt?: Date; store?: boolean }[];
  readonly addReportKey?: string;
  readonly incTracking?: boolean;
}

export interface MutateResult {
  readonly applied: boolean;
  readonly record: EmailRecord;
  readonly events: readonly EventEnvelope[];
}

/** A compare-and-set update computed from a known state, before it is written. */
interface PlannedWrite {
  readonly filter: Filter<EmailDoc>;
  readonly update: UpdateFilter<EmailDoc>;
  readonly record: EmailRecord;
  readonly events: readonly EventEnvelope[];
  readonly outbox: readonly OutboxEntry[];
  /** Ids of the published entries this write takes out of the outbox. */
  readonly dropped: readonly string[];
  readonly marker: { readonly eventId: string } | { readonly reportKey: string } | undefined;
}

export interface ListFilter {
  readonly startDate?: Date | undefined;
  readonly endDate?: Date | undefined;
  readonly domainIds?: readonly string[] | undefined;
}

export interface FeedbackItem {
  readonly emailId: string;
  readonly email: string;
  readonly subject: string;
  readonly status: EmailStatus;
  readonly createdAt: Date;
}

export interface EmailsRepository {
  readonly collection: Collection<Document>;
  ensureIndexes(): Promise<void>;
  /**
   * Inserts emails with their accept events; ids already present are left as they are (a takeover repeats an
   * insert). Their attachments and contents are written first, at the same time as `after` (the caller's own
   * write that must also land before the emails: the queue entries); the emails only once all of them have.
   */
  insertMany(emails: readonly NewEmail[], opts?: { after?: Promise<unknown> }): Promise<void>;
  /** `domainId` (a domain-restricted key's domain) makes an email of another domain missing, as another team's is. */
  get(teamId: string, id: string, domainId?: string): Promise<EmailRecord | undefined>;
  /** By id alone: for tracking links and delivery reports, which name the email but not the team. */
  getById(id: string): Promise<EmailRecord | undefined>;
  messageIdOf(teamId: string, id: string, domainId?: string): Promise<{ messageId: string; references: readonly string[] } | undefined>;
  list(teamId: string, filter: ListFilter, page: number, limit: number): Promise<{ items: EmailRecord[]; count: number }>;
  listFeedback(teamId: string, kind: 'bounce' | 'complaint', page: number, limit: number, domainId?: string): Promise<{ items: FeedbackItem[]; count: number }>;
  /** Compare-and-set on the version: re-reads and recomputes on a conflict. */
  mutate(id: string, fn: (e: EmailRecord) => Mutation | null, opts?: { initial?: EmailRecord; now?: () => Date; teamId?: string }): Promise<MutateResult | undefined>;
  /**
   * `mutate` for many emails in one bulk write (each still a compare-and-set on its version); only when
   * some lost to another writer, a read of the batch and another round for those. Undefined for an
   * email that is gone.
   */
  mutateMany(items: readonly { initial: EmailRecord; fn: (e: EmailRecord) => Mutation | null }[], opts?: { now?: () => Date }): Promise<(MutateResult | undefined)[]>;
  /**
   * Many emails by id (missing ones are left out): one read on MongoDB, one lookup per id on FerretDB (see
   * byIds). With `recent`, an email this process wrote lately is taken as it wrote it, without a read: only
   * for a caller whose writes are compare-and-sets (a stale record loses and is read then).
   */
  getManyById(ids: readonly string[], opts?: { recent?: boolean }): Promise<EmailRecord[]>;
  /**
   * The emails as this process's accept inserted them (or as its later writes left them), with their content
   * when it is still remembered (given out once): no read. Only for emails the caller knows unchanged since the
   * accept (an untouched queue entry); the others are missing from the answer and must be read.
   */
  takeAccepted(ids: readonly string[]): Promise<Map<string, { record: EmailRecord; content?: EmailContent | undefined }>>;
  /**
   * The accept is about to write these emails (queue entries first, then the emails): until the returned
   * function is called, `takeAccepted` and `getManyById` of them wait for it instead of reading too early.
   */
  writing(ids: readonly string[]): () => void;
  /** The outbox publisher removed these entries from the email (without changing its version). */
  outboxRemoved(id: string, entryIds: readonly string[]): void;
  /** The contents of many emails, read as `getManyById` reads. */
  contentsOf(ids: readonly string[]): Promise<Map<string, EmailContent>>;
  contentOf(id: string): Promise<EmailContent>;
  attachmentsOf(id: string): Promise<{ filename: string; content: Buffer }[]>;
  deleteAttachments(id: string): Promise<void>;
  /** Ids of emails of a domain that are waiting to be sent. */
  pendingOfDomain(teamId: string, domainId: string): Promise<string[]>;
  pendingOfCampaign(teamId: string, campaignId: string): Promise<string[]>;
  /** Tombstones every email of a campaign (the relay purges them once their events are out). */
  tombstoneCampaign(teamId: string, campaignId: string, now: Date): Promise<number>;
}

function toRecord(d: EmailDoc): EmailRecord {
  let metadata: Record<string, unknown> | undefined;
  if (d.metadataJson) {
    try {
      metadata = JSON.parse(d.metadataJson) as Record<string, unknown>;
    } catch {
      metadata = undefined;
    }
  }
  return {
    id: d._id, teamId: d.teamId, domainId: d.domainId, from: d.from, fromAddress: d.fromAddress, to: d.to, toAddresses: d.toAddresses,
    cc: d.cc, bcc: d.bcc, replyTo: d.replyTo, subject: d.subject,
    hasAttachments: d.hasAttachments, templateId: d.templateId, campaignId: d.campaignId, contactId: d.contactId, metadata,
    messageId: d.messageId, inReplyTo: d.inReplyTo, references: d.references ?? [], scheduledAt: d.scheduledAt,
    latestStatus: d.latestStatus, events: (d.events ?? []).map(decodeStoredEvent),
    sendState: d.sendState, recipients: d.recipients, attempts: d.attempts, nextAttemptAt: d.nextAttemptAt,
    suppressionCheckedAt: d.suppressionCheckedAt, sentAt: d.sentAt, reportKeys: d.reportKeys ?? [],
    trackingEventCount: d.trackingEventCount ?? 0, outbox: d.outbox ?? [], version: d.version, createdAt: d.createdAt, updatedAt: d.updatedAt,
  };
}

/**
 * Whether this process will soon write the email again from the record it just wrote: while the email waits to
 * be sent (the send starts from it), and once sent, until its delivery report (which comes within seconds).
 * Past that, the next write (an open, a click, a complaint, a late report) is rare and reads the email, so the
 * record is not kept: a campaign's delivered emails would otherwise stay in memory until `recent` is full.
 */
export function expectsWriteSoon(r: Pick<EmailRecord, 'sendState' | 'latestStatus'>): boolean {
  return r.sendState === 'PENDING' || r.latestStatus === 'SENT';
}

export function factsOf(e: Pick<EmailRecord, 'id' | 'from' | 'toAddresses' | 'subject' | 'domainId' | 'campaignId' | 'contactId' | 'templateId' | 'metadata'>): EmailFacts {
  return {
    id: e.id, from: e.from, toAddresses: e.toAddresses, subject: e.subject, domainId: e.domainId,
    campaignId: e.campaignId, contactId: e.contactId, templateId: e.templateId, metadata: e.metadata,
  };
}

/** The fields a list or detail read needs (no outbox, no queue bookkeeping). */
const LIST_PROJECTION = { outbox: 0, events: 0, reportKeys: 0 } as const;

export interface EmailsRepositoryHooks {
  /** These emails were just written with events to publish. */
  onEvents?: (emailIds: readonly string[]) => void;
  /** This email was just written with events, and its outbox is now exactly `outbox`. */
  onWritten?: (emailId: string, outbox: readonly OutboxEntry[]) => void;
  /** Whether this process already published an outbox entry (a write then drops it instead of a separate removal). */
  isPublished?: (eventId: string) => boolean;
  /** A write landed that took these published entries out of the email's outbox. */
  onDropped?: (emailId: string, entryIds: readonly string[]) => void;
}

export function createEmailsRepository(db: Db, hooks: EmailsRepositoryHooks = {}, recent: RecentEmails = createRecentEmails()): EmailsRepository {
  const col: Collection<EmailDoc> = db.collection<EmailDoc>('emails');
  const attachments: Collection<AttachmentsDoc> = db.collection<AttachmentsDoc>('email_attachments');
  const contents: Collection<ContentDoc> = db.collection<ContentDoc>('email_contents');
  /** Writes of this process under way, by email id: a use of `recent` waits for them (a newer record is coming). */
  const inFlight = new Map<string, Promise<void>>();
  function writing(ids: readonly string[]): () => void {
    let release!: () => void;
    const p = new Promise<void>((resolve) => { release = resolve; });
    for (const id of ids) inFlight.set(id, p);
    return () => {
      for (const id of ids) if (inFlight.get(id) === p) inFlight.delete(id);
      release();
    };
  }
  async function settled(ids: readonly string[]): Promise<void> {
    const waits = [...new Set(ids.map((id) => inFlight.get(id)).filter((p): p is Promise<void> => p !== undefined))];
    if (waits.length > 0) await Promise.all(waits);
  }
  /** The newer of a record and the one this process wrote last (versions only grow). */
  function newest(r: EmailRecord): EmailRecord {
    const known = recent.get(r.id);
    return known && known.version > r.version ? known : r;
  }

  function buildEvents(teamId: string, facts: EmailFacts, specs: readonly { status: EmailStatus; extras?: EventExtras; occurredAt?: Date }[], now: Date) {
    return specs.map((s) => {
      const at = s.occurredAt ?? now;
      return createEvent(eventTypeOf(s.status), teamId, emailEventData(facts, s.status, at, s.extras), now);
    });
  }

  async function byIds<D extends { _id: string }>(c: Collection<D>, ids: readonly string[], extra: Record<string, unknown> = {}): Promise<D[]> {
    return (await findByIds(c as unknown as Collection<Document>, ids, extra)) as unknown as D[];
  }

  /**
   * The compare-and-set write of a mutation on `current`, computed without I/O: the update carries the
   * status, the stored events and their outbox entries in one document write.
   */
  function buildWrite(current: EmailRecord, m: Mutation, now: Date): PlannedWrite {
    const specs = m.events ?? [];
    const events = buildEvents(current.teamId, factsOf(current), specs, now);
    let latest = current.latestStatus;
    for (const s of specs) latest = advanceStatus(latest, s.status);
    const stored = events
      .map((ev, i) => ({ ev, spec: specs[i]! }))
      .filter(({ spec }) => spec.store !== false)
      .map(({ ev, spec }) => ({ id: ev.id, status: spec.status, data: storedEventData(spec.extras), createdAt: spec.occurredAt ?? now }));
    const set: Record<string, unknown> = { ...(m.set ?? {}), latestStatus: latest, updatedAt: now };
    const update: Record<string, unknown> = { $set: set, $inc: { version: 1, ...(m.incTracking ? { trackingEventCount: 1 } : {}) } };
    if (m.unset && m.unset.length > 0) update.$unset = Object.fromEntries(m.unset.map((k) => [k, '']));
    const push: Record<string, unknown> = {};
    if (stored.length > 0) push.events = { $each: stored.map(encodeStoredEvent) };
    if (m.addReportKey) push.reportKeys = m.addReportKey;
    if (Object.keys(push).length > 0) update.$push = push;
    // Entries this process already published leave with this write: no separate removal (a rewrite of
    // the whole document on FerretDB) for them. Entries it does not know of are kept.
    const done = hooks.isPublished ? current.outbox.filter((e) => hooks.isPublished!(e.id)) : [];
    let outbox: OutboxEntry[];
    let write: UpdateFilter<EmailDoc>;
    let sameOutbox: Record<string, unknown> = {};
    if (done.length > 0) {
      // The outbox is set whole here, from `current`: only when the stored one still has as many entries. At
      // the same version it can only have lost some (the publisher's and the relay's removals do not change the
      // version), and one removed and then forgotten by the publisher must not come back with this write.
      sameOutbox = { outbox: { $size: current.outbox.length } };
      outbox = [...current.outbox.filter((e) => !done.includes(e)), ...outboxEntries(events)];
      set.outbox = outbox;
      write = update as UpdateFilter<EmailDoc>;
    } else {
      outbox = [...current.outbox, ...outboxEntries(events)];
      write = withOutbox(update as UpdateFilter<EmailDoc>, events);
    }
    const record = { ...applyLocally(current, { set, unset: m.unset ?? [], stored, reportKey: m.addReportKey, incTracking: m.incTracking === true }), outbox };
    // What shows, on a later read, that this very write landed: an event id it stored or the report key it added.
    const marker = stored[0] ? { eventId: stored[0].id } : m.addReportKey ? { reportKey: m.addReportKey } : undefined;
    return {
      filter: { _id: current.id, version: current.version, ...sameOutbox, ...NOT_DELETED } as Filter<EmailDoc>, update: write, record, events, outbox,
      dropped: done.map((e) => e.id), marker,
    };
  }

  function written(w: PlannedWrite): MutateResult {
    if (expectsWriteSoon(w.record)) recent.put(w.record);
    else recent.forget(w.record.id);
    if (w.dropped.length > 0) hooks.onDropped?.(w.record.id, w.dropped);
    if (w.events.length > 0) hooks.onWritten?.(w.record.id, w.outbox);
    return { applied: true, record: w.record, events: w.events };
  }

  function landed(d: EmailDoc, w: PlannedWrite): boolean {
    if (!w.marker) return false;
    if ('eventId' in w.marker) {
      const id = w.marker.eventId;
      return (d.events ?? []).some((e) => decodeStoredEvent(e).id === id);
    }
    return (d.reportKeys ?? []).includes(w.marker.reportKey);
  }

  async function mutateManyFrom(
    items: readonly { initial: EmailRecord; fn: (e: EmailRecord) => Mutation | null }[],
    current: (EmailRecord | undefined)[],
    results: (MutateResult | undefined)[],
    clock: () => Date,
  ): Promise<(MutateResult | undefined)[]> {
    let open = items.map((_, i) => i);
    for (let round = 0; round < 20 && open.length > 0; round++) {
      const plans: { index: number; write: PlannedWrite }[] = [];
      for (const i of open) {
        const rec = current[i]!;
        const m = items[i]!.fn(rec);
        if (!m) results[i] = { applied: false, record: rec, events: [] };
        else plans.push({ index: i, write: buildWrite(rec, m, clock()) });
      }
      if (plans.length === 0) return results;
      // Without a marker a write could not be told apart from a conflict: those go one by one.
      const unmarked = plans.filter((p) => !p.write.marker);
      const marked = plans.filter((p) => p.write.marker);
      for (const p of unmarked) {
        const item = items[p.index]!;
        results[p.index] = await repo.mutate(item.initial.id, item.fn, { initial: current[p.index], now: clock });
      }
      if (marked.length === 0) return results;
      const res = await col.bulkWrite(marked.map((p) => ({ updateOne: { filter: p.write.filter, update: p.write.update } })), { ordered: false });
      if (res.matchedCount === marked.length) {
        for (const p of marked) results[p.index] = written(p.write);
        return results;
      }
      // Some compare-and-sets lost to another writer: one read of the batch tells which landed (their
      // marker is there) and gives the others their current state to compute the change again.
      const docs = await byIds(col, [...new Set(marked.map((p) => p.write.record.id))]);
      const byId = new Map(docs.map((d) => [d._id, d]));
      open = [];
      for (const p of marked) {
        const d = byId.get(p.write.record.id);
        if (d && landed(d, p.write)) results[p.index] = written(p.write);
        else if (!d || d._deletedAt) results[p.index] = undefined;
        else {
          current[p.index] = toRecord(d);
          open.push(p.index);
        }
      }
    }
    if (open.length > 0) throw new Error(`emails ${open.map((i) => items[i]!.initial.id).join(', ')}: too many concurrent changes`);
    return results;
  }

  const repo: EmailsRepository = {
    collection: col as unknown as Collection<Document>,
    async ensureIndexes() {
      await col.createIndex({ teamId: 1, createdAt: -1 }, { name: 'team_created' });
      await col.createIndex({ teamId: 1, bouncedAt: -1 }, { name: 'team_bounced', sparse: true });
      await col.createIndex({ teamId: 1, complainedAt: -1 }, { name: 'team_complained', sparse: true });
      await col.createIndex({ teamId: 1, domainId: 1, sendState: 1 }, { name: 'team_domain_state' });
      await col.createIndex({ teamId: 1, campaignId: 1 }, { name: 'team_campaign', sparse: true });
      await ensureOutboxIndex(col as unknown as Collection<Document>);
    },

    async insertMany(emails, opts = {}) {
      if (emails.length === 0) {
        await opts.after;
        return;
      }
      const withFiles = emails.filter((e) => e.attachments.length > 0);
      // Attachments and contents before the emails, side by side (and beside the caller's own write): an email is
      // never visible without them, while a file set or content document without its email is an orphan nobody reads.
      const files = withFiles.length === 0 ? undefined : insertManyIgnoringDuplicates(
        attachments as unknown as Collection<Document>,
        withFiles.map((e): Document => ({
          _id: e.id, teamId: e.teamId, items: e.attachments.map((a) => ({ filename: a.filename, content: new Binary(a.content) })),
        })),
      );
      const bodies = insertManyIgnoringDuplicates(contents as unknown as Collection<Document>, emails.map((e): Document => ({
        _id: e.id, teamId: e.teamId, headers: e.headers.map(([name, value]) => ({ name, value })),
        ...(e.html !== undefined ? { html: e.html } : {}),
        ...(e.text !== undefined ? { text: e.text } : {}),
      })));
      // Every one is awaited (not only until the first failure): none may still be under way once this settles.
      const settled = await Promise.allSettled([files, bodies, opts.after]);
      for (const r of settled) if (r.status === 'rejected') throw r.reason;
      const docs: EmailDoc[] = emails.map((e) => {
        const facts = factsOf({ ...e, metadata: e.metadata });
        const events = buildEvents(e.teamId, facts, e.events, e.createdAt);
        let latest: EmailStatus | undefined;
        for (const s of e.events) latest = advanceStatus(latest, s.status);
        const sending = e.pending.length > 0;
        const doc: EmailDoc = {
          _id: e.id, teamId: e.teamId, domainId: e.domainId, from: e.from, fromAddress: e.fromAddress, to: [...e.to], toAddresses: [...e.toAddresses],
          cc: [...e.cc], bcc: [...e.bcc], replyTo: [...e.replyTo], subject: e.subject,
          hasAttachments: e.attachments.length > 0, messageId: e.messageId, references: [...e.references],
          latestStatus: latest ?? 'QUEUED',
          events: events.map((ev, i) => encodeStoredEvent({ id: ev.id, status: e.events[i]!.status, data: storedEventData(e.events[i]!.extras), createdAt: e.createdAt })),
          sendState: sending ? 'PENDING' : 'DONE',
          recipients: { pending: [...e.pending], accepted: [], bounced: [], suppressed: [...e.suppressed], failed: [...(e.failed ?? [])] },
          attempts: 0, suppressionCheckedAt: e.createdAt, reportKeys: [], trackingEventCount: 0, version: 1,
          createdAt: e.createdAt, updatedAt: e.createdAt,
          outbox: outboxEntries(events),
          ...(sending ? { nextAttemptAt: e.scheduledAt && e.scheduledAt > e.createdAt ? e.scheduledAt : e.createdAt } : {}),
          ...(e.templateId ? { templateId: e.templateId } : {}),
          ...(e.campaignId ? { campaignId: e.campaignId } : {}),
          ...(e.contactId ? { contactId: e.contactId } : {}),
          ...(e.metadata && Object.keys(e.metadata).length > 0 ? { metadataJson: JSON.stringify(e.metadata) } : {}),
          ...(e.inReplyTo ? { inReplyTo: e.inReplyTo } : {}),
          ...(e.scheduledAt ? { scheduledAt: e.scheduledAt } : {}),
        };
        return doc;
      });
      const inserted = await insertManyIgnoringDuplicates(col as unknown as Collection<Document>, docs as unknown as Document[]);
      // What this insert wrote is remembered for the send worker (not an email that was there already: a
      // retried accept's email may have changed since; not one due much later: it would only take memory).
      const soon = Date.now() + 60_000;
      docs.forEach((d, i) => {
        const e = emails[i]!;
        if (!inserted?.has(i) || d.sendState !== 'PENDING' || (d.nextAttemptAt && d.nextAttemptAt.getTime() > soon)) return;
        recent.put(toRecord(d), { html: e.html, text: e.text, headers: e.headers });
      });
      // What this insert wrote is handed over as written; an email that existed already (a retried accept)
      // is only named, so its stored outbox is read and published.
      const existing: string[] = [];
      docs.forEach((d, i) => {
        if ((d.outbox?.length ?? 0) === 0) return;
        if (inserted?.has(i) && hooks.onWritten) hooks.onWritten(d._id, d.outbox ?? []);
        else existing.push(d._id);
      });
      if (existing.length > 0) hooks.onEvents?.(existing);
    },

    async get(teamId, id, domainId) {
      const d = await col.findOne({ _id: id, teamId, ...(domainId ? { domainId } : {}), ...NOT_DELETED } as Filter<EmailDoc>);
      if (!d) return undefined;
      return { ...toRecord(d), content: toContent(await contents.findOne({ _id: id })) };
    },
    async getById(id) {
      const d = await col.findOne({ _id: id, ...NOT_DELETED } as Filter<EmailDoc>);
      return d ? toRecord(d) : undefined;
    },
    async messageIdOf(teamId, id, domainId) {
      const d = await col.findOne({ _id: id, teamId, ...(domainId ? { domainId } : {}), ...NOT_DELETED } as Filter<EmailDoc>, { projection: { messageId: 1, references: 1 } });
      return d ? { messageId: d.messageId, references: d.references ?? [] } : undefined;
    },
    async list(teamId, filter, page, limit) {
      const q: Record<string, unknown> = { teamId, ...NOT_DELETED };
      if (filter.startDate || filter.endDate) {
        q.createdAt = { ...(filter.startDate ? { $gte: filter.startDate } : {}), ...(filter.endDate ? { $lte: filter.endDate } : {}) };
      }
      if (filter.domainIds && filter.domainIds.length > 0) q.domainId = { $in: [...filter.domainIds] };
      const [docs, count] = await Promise.all([
        col.find(q as Filter<EmailDoc>, { projection: LIST_PROJECTION }).sort({ createdAt: -1, _id: -1 }).skip((page - 1) * limit).limit(limit).toArray(),
        col.countDocuments(q as Filter<EmailDoc>),
      ]);
      const bodies = new Map((await byIds(contents, docs.map((d) => d._id))).map((c) => [c._id, toContent(c)] as const));
      return { items: docs.map((d) => ({ ...toRecord({ ...d, events: [], reportKeys: [] }), content: bodies.get(d._id) ?? toContent(undefined) })), count };
    },
    async listFeedback(teamId, kind, page, limit, domainId) {
      const at = kind === 'bounce' ? 'bouncedAt' : 'complainedAt';
      const q = { teamId, ...(domainId ? { domainId } : {}), [at]: { $exists: true }, ...NOT_DELETED } as Filter<EmailDoc>;
      const [docs, count] = await Promise.all([
        col.find(q, { projection: { subject: 1, bouncedAt: 1, bouncedEmail: 1, complainedAt: 1, complainedEmail: 1 } })
          .sort({ [at]: -1, _id: -1 }).skip((page - 1) * limit).limit(limit).toArray(),
        col.countDocuments(q),
      ]);
      return {
        count,
        items: docs.map((d) => ({
          emailId: d._id,
          email: (kind === 'bounce' ? d.bouncedEmail : d.complainedEmail) ?? '',
          subject: d.subject,
          status: kind === 'bounce' ? 'BOUNCED' : 'COMPLAINED',
          createdAt: (kind === 'bounce' ? d.bouncedAt : d.complainedAt) ?? new Date(0),
        })),
      };
    },

    async mutate(id, fn, opts = {}) {
      const clock = opts.now ?? (() => new Date());
      let current: EmailRecord | undefined = opts.initial;
      for (let attempt = 0; attempt < 20; attempt++) {
        if (!current) {
          const d = await col.findOne({ _id: id, ...(opts.teamId ? { teamId: opts.teamId } : {}), ...NOT_DELETED } as Filter<EmailDoc>);
          if (!d) return undefined;
          current = toRecord(d);
        }
        const m = fn(current);
        if (!m) return { applied: false, record: current, events: [] };
        const w = buildWrite(current, m, clock());
        const res = await col.updateOne(w.filter, w.update);
        if (res.matchedCount === 1) return written(w);
        current = undefined;
      }
      throw new Error(`email ${id}: too many concurrent changes`);
    },

    async mutateMany(items, opts = {}) {
      const clock = opts.now ?? (() => new Date());
      const results: (MutateResult | undefined)[] = new Array(items.length);
      // A write of this process to the same emails under way (a report's, a send outcome's) is waited for and
      // its result started from: a compare-and-set on the caller's older record would only lose to it.
      const ids = items.map((i) => i.initial.id);
      await settled(ids);
      const done = writing(ids);
      try {
        return await mutateManyFrom(items, items.map((i) => newest(i.initial)), results, clock);
      } finally {
        done();
      }
    },
    writing,
    outboxRemoved(id, entryIds) {
      const known = recent.get(id);
      if (!known) return;
      const gone = new Set(entryIds);
      if (known.outbox.some((e) => gone.has(e.id))) recent.put({ ...known, outbox: known.outbox.filter((e) => !gone.has(e.id)) });
    },

    async getManyById(ids, opts = {}) {
      if (ids.length === 0) return [];
      const unique = [...new Set(ids)];
      if (opts.recent) await settled(unique);
      const known = opts.recent ? unique.map((id) => recent.get(id)).filter((r): r is EmailRecord => r !== undefined) : [];
      const have = new Set(known.map((r) => r.id));
      const read = unique.filter((id) => !have.has(id));
      return [...known, ...(await byIds(col, read, NOT_DELETED)).map(toRecord)];
    },
    async takeAccepted(ids) {
      await settled(ids);
      const out = new Map<string, { record: EmailRecord; content?: EmailContent | undefined }>();
      for (const id of ids) {
        const record = recent.get(id);
        if (record) out.set(id, { record, content: recent.takeContent(id) });
      }
      return out;
    },
    async contentsOf(ids) {
      if (ids.length === 0) return new Map();
      const docs = await byIds(contents, [...new Set(ids)]);
      const byId = new Map(docs.map((d) => [d._id, d]));
      return new Map(ids.map((id) => [id, toContent(byId.get(id))]));
    },
    async contentOf(id) {
      return toContent(await contents.findOne({ _id: id }));
    },
    async attachmentsOf(id) {
      const d = await attachments.findOne({ _id: id });
      return (d?.items ?? []).map((i) => ({ filename: i.filename, content: Buffer.from(i.content.buffer) }));
    },
    async deleteAttachments(id) {
      await attachments.deleteOne({ _id: id });
    },
    async pendingOfDomain(teamId, domainId) {
      const docs = await col.find({ teamId, domainId, sendState: 'PENDING', ...NOT_DELETED } as Filter<EmailDoc>, { projection: { _id: 1 } }).toArray();
      return docs.map((d) => d._id);
    },
    async pendingOfCampaign(teamId, campaignId) {
      const docs = await col.find({ teamId, campaignId, sendState: 'PENDING', ...NOT_DELETED } as Filter<EmailDoc>, { projection: { _id: 1 } }).toArray();
      return docs.map((d) => d._id);
    },
    async tombstoneCampaign(teamId, campaignId, now) {
      const ids = (await col.find({ teamId, campaignId } as Filter<EmailDoc>, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
      const res = await col.updateMany({ teamId, campaignId, ...NOT_DELETED } as Filter<EmailDoc>, { $set: { _deletedAt: now } });
      for (const id of ids) recent.forget(id);
      // Bodies and files go with them (the tombstones themselves are purged once their events are out).
      for (let i = 0; i < ids.length; i += 500) {
        const chunk = ids.slice(i, i + 500);
        await contents.deleteMany({ _id: { $in: chunk } });
        await attachments.deleteMany({ _id: { $in: chunk } });
      }
      return res.modifiedCount;
    },
  };
  return repo;
}

/**
 * What an email keeps of each event (SPEC 2.5 `data`: free-form details such as the server response or the
 * bounce reason): the event's own details, not the whole published payload, whose common fields (from,
 * subject...) are the email's own. Keeps the document small: it is rewritten on every status change.
 */
export function storedEventData(extras: EventExtras | undefined): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  if (!extras) return data;
  if (extras.to) data.to = [...extras.to];
  if (extras.bounce) data.bounce = { ...extras.bounce };
  if (extras.open) data.open = { ...extras.open };
  if (extras.click) data.click = { ...extras.click };
  if (extras.details) Object.assign(data, extras.details);
  return data;
}

/** The record after an update, computed rather than read back (one round trip less on the hot path). */
function applyLocally(
  r: EmailRecord,
  u: { set: Record<string, unknown>; unset: readonly string[]; stored: StoredEvent[]; reportKey?: string | undefined; incTracking: boolean },
): EmailRecord {
  // Records are never changed in place: the new one shares what the change leaves alone, and every object on
  // the path of a change is copied once.
  const out: Record<string, unknown> = { ...r };
  const copies = new Set<unknown>();
  const assign = (path: string, value: unknown) => {
    const parts = path.split('.');
    let obj = out;
    for (const p of parts.slice(0, -1)) {
      const next = obj[p];
      if (!copies.has(next)) {
        const copy = typeof next !== 'object' || next === null ? {} : Array.isArray(next) ? [...next] : { ...next };
        copies.add(copy);
        obj[p] = copy;
      }
      obj = obj[p] as Record<string, unknown>;
    }
    const last = parts[parts.length - 1] as string;
    if (value === undefined) delete obj[last];
    else obj[last] = value;
  };
  for (const [k, v] of Object.entries(u.set)) assign(k, v);
  for (const k of u.unset) assign(k, undefined);
  out.events = [...r.events, ...u.stored];
  if (u.reportKey) out.reportKeys = [...r.reportKeys, u.reportKey];
  if (u.incTracking) out.trackingEventCount = r.trackingEventCount + 1;
  out.version = r.version + 1;
  return out as unknown as EmailRecord;
}
