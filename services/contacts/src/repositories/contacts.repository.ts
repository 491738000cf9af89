import {
  BULK_CHUNK, ConflictError, createEvent, ensureOutboxIndex, isDuplicateKeyError, isFerretDb, newId, NOT_DELETED, outboxEntries, withOutbox,
  AlreadyExistsError, type OutboxDoc,
} from '@mailfleet/kit';
import { MongoBulkWriteError, type AnyBulkWriteOperation, type BulkWriteResult, type Collection, type Db, type Document, type Filter, type UpdateFilter } from 'mongodb';
import type { BulkItem } from '../domain/bulk.js';
import {
  createContact, deletionEvents, unsubscribeContact, updateContact,
  type Contact, type ContactInput, type PendingEvent, type Properties, type Transition, type UnsubscribeReason,
} from '../domain/contact.js';
import type { BookCursor } from '../domain/paging.js';

/**
 * The only code that touches the `contacts` collection.
 *
 * Every write is one document write carrying its events in the document's
 * outbox, conditional on the `version` read (compare-and-set), so the events
 * always describe exactly the state written; a lost race is retried on the
 * fresh state. A unique index on (book, email) settles concurrent creates.
 * A deleted contact is a tombstone (`_deletedAt`, reads skip it) until the
 * relay has published its `contact.deleted`; its email key is replaced so the
 * address can be added again at once.
 */
interface ContactDoc extends OutboxDoc {
  _id: string;
  teamId: string;
  contactBookId: string;
  email: string;
  /** The unique key with the book: the email while live, `deleted:<id>` on a tombstone. */
  emailKey: string;
  firstName: string | null;
  lastName: string | null;
  subscribed: boolean;
  /** Pairs rather than an object: property names may hold `.` or start with `$`. */
  properties: { k: string; v: string }[];
  createdAt: Date;
  updatedAt: Date;
  unsubscribedAt: Date | null;
  unsubscribeReason: UnsubscribeReason | null;
  unsubscribeNote: string | null;
  unsubscribeSource: string | null;
  version: number;
  /** Id of the last write (its first event id): tells a bulk writer which of its updates landed. */
  writeId: string;
}

export interface UnsubscribedContact {
  readonly contact: Contact;
  readonly reason: UnsubscribeReason;
  readonly note: string | null;
  readonly source: string | null;
  readonly at: Date;
}

/** One address to unsubscribe in every live book of its team. */
export interface UnsubscribeRequest {
  readonly teamId: string;
  /** Normalised. */
  readonly email: string;
  readonly details: { reason: UnsubscribeReason; note: string | null; source: string | null };
}

export interface BulkUpsertResult {
  /** Contact id by request index of each stored item. */
  readonly ids: ReadonlyMap<number, string>;
  readonly created: number;
  readonly updated: number;
  /** Items that lost every compare-and-set round to concurrent writers. */
  readonly conflicts: readonly BulkItem[];
}

export interface ContactsRepository {
  readonly collection: Collection<Document>;
  ensureIndexes(): Promise<void>;
  /** Inserts a new contact with its events; AlreadyExistsError when the book has the address. */
  insert(t: Transition): Promise<void>;
  get(teamId: string, contactBookId: string, id: string): Promise<Contact | undefined>;
  /** A live contact by id anywhere in the team (unsubscribe links carry no book). */
  getInTeam(teamId: string, id: string): Promise<Contact | undefined>;
  list(teamId: string, contactBookId: string, q: { emails: readonly string[]; ids: readonly string[]; skip: number; limit: number }): Promise<Contact[]>;
  /** Subscribed contacts after the cursor, in its order (see BookCursor): id order without one. */
  pageSubscribed(teamId: string, contactBookId: string, after: BookCursor | undefined, limit: number): Promise<Contact[]>;
  /** Live contacts per book of the team. */
  countByBook(teamId: string): Promise<Map<string, number>>;
  bookTotals(teamId: string, contactBookId: string): Promise<{ total: number; unsubscribed: number }>;
  /** Compare-and-set on the contact the filter finds; undefined when none. */
  modify(filter: { teamId: string; contactBookId?: string; id?: string; email?: string }, change: (c: Contact) => Transition): Promise<{ contact: Contact; changed: boolean } | undefined>;
  /** PUT: update the book's contact with this address, or create it. */
  upsert(teamId: string, contactBookId: string, input: ContactInput, now: Date): Promise<{ contact: Contact; created: boolean }>;
  bulkUpsert(teamId: string, contactBookId: string, items: readonly BulkItem[], now: Date): Promise<BulkUpsertResult>;
  /** Deletes the contacts with these ids or addresses (each with `contact.deleted`); returns how many. */
  removeMany(teamId: string, contactBookId: string, by: { ids: readonly string[]; emails: readonly string[] }, now: Date): Promise<number>;
  /** Deletes up to `limit` contacts of a book (book deletion); returns how many it found. */
  purgeBatch(contactBookId: string, limit: number, now: Date): Promise<number>;
  liveCountOfBook(contactBookId: string): Promise<number>;
  unsubscribeByEmail(teamId: string, email: string, excludeBookIds: readonly string[], details: { reason: UnsubscribeReason; note: string | null; source: string | null }, now: Date): Promise<number>;
  /**
   * unsubscribeByEmail for many addresses of many teams at once: one read of
   * the subscribed contacts they name and one bulk write (chunked) of their
   * compare-and-set updates, each carrying its own events. The first request
   * for an address decides reason and source. Contacts whose update lost a
   * race go through the one-contact path. Returns how many contacts changed.
   */
  unsubscribeMany(requests: readonly UnsubscribeRequest[], excludeBookIds: ReadonlyMap<string, readonly string[]>, now: Date): Promise<number>;
  listUnsubscribed(teamId: string, excludeBookIds: readonly string[], skip: number, limit: number): Promise<{ items: UnsubscribedContact[]; count: number }>;
}

/** Compare-and-set attempts before a writer gives up with ABORTED (only under heavy contention on one contact). */
const MAX_ROUNDS = 5;

function toProperties(pairs: { k: string; v: string }[] | undefined): Properties {
  const out: Record<string, string> = {};
  for (const { k, v } of pairs ?? []) Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  return out;
}

function fromProperties(p: Properties): { k: string; v: string }[] {
  return Object.entries(p).map(([k, v]) => ({ k, v }));
}

function toRecord(d: ContactDoc): Contact {
  return {
    id: d._id,
    teamId: d.teamId,
    contactBookId: d.contactBookId,
    email: d.email,
    firstName: d.firstName ?? null,
    lastName: d.lastName ?? null,
    subscribed: d.subscribed,
    properties: toProperties(d.properties),
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    unsubscribe: !d.subscribed && d.unsubscribedAt
      ? { reason: d.unsubscribeReason ?? 'MANUAL', note: d.unsubscribeNote ?? null, source: d.unsubscribeSource ?? null, at: d.unsubscribedAt }
      : null,
    version: d.version ?? 0,
  };
}

/** The mutable fields of a contact as stored. */
function stateFields(c: Contact) {
  return {
    firstName: c.firstName,
    lastName: c.lastName,
    subscribed: c.subscribed,
    properties: fromProperties(c.properties),
    updatedAt: c.updatedAt,
    unsubscribedAt: c.unsubscribe?.at ?? null,
    unsubscribeReason: c.unsubscribe?.reason ?? null,
    unsubscribeNote: c.unsubscribe?.note ?? null,
    unsubscribeSource: c.unsubscribe?.source ?? null,
    version: c.version,
  };
}

function envelopes(c: Contact, events: readonly PendingEvent[], now: Date) {
  return events.map((e) => createEvent(e.type, c.teamId, e.data, now));
}

function newDoc(t: Transition): ContactDoc {
  const c = t.next;
  const events = envelopes(c, t.events, c.createdAt);
  return {
    _id: c.id, teamId: c.teamId, contactBookId: c.contactBookId, email: c.email, emailKey: c.email, createdAt: c.createdAt,
    ...stateFields(c), writeId: events[0]?.id ?? c.id, outbox: outboxEntries(events),
  };
}

/** The conditional update of a transition: applies only to the version it was computed from. */
function casWrite(current: Contact, t: Transition, now: Date): { filter: Filter<ContactDoc>; update: UpdateFilter<ContactDoc>; writeId: string } {
  const events = envelopes(t.next, t.events, now);
  const writeId = events[0]?.id ?? `${current.id}:${t.next.version}`;
  return {
    filter: { _id: current.id, version: current.version, ...NOT_DELETED },
    update: withOutbox<ContactDoc>({ $set: { ...stateFields(t.next), writeId } }, events),
    writeId,
  };
}

function tombstoneWrite(current: Contact, now: Date): { filter: Filter<ContactDoc>; update: UpdateFilter<ContactDoc> } {
  return {
    filter: { _id: current.id, version: current.version, ...NOT_DELETED },
    update: withOutbox<ContactDoc>({ $set: { _deletedAt: now, emailKey: `deleted:${current.id}` } }, envelopes(current, deletionEvents(current), now)),
  };
}

/** Runs an unordered bulk write; duplicate-key refusals are returned by op index, anything else throws. */
async function unorderedBulk(col: Collection<ContactDoc>, ops: AnyBulkWriteOperation<ContactDoc>[]): Promise<{ result: BulkWriteResult; duplicates: Set<number> }> {
  try {
    return { result: await col.bulkWrite(ops, { ordered: false }), duplicates: new Set() };
  } catch (err) {
    if (!(err instanceof MongoBulkWriteError)) throw err;
    const writeErrors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
    if (writeErrors.length === 0 || writeErrors.some((w) => w.code !== 11000 && !isDuplicateKeyError({ message: w.errmsg }))) throw err;
    return { result: err.result, duplicates: new Set(writeErrors.map((w) => w.index)) };
  }
}

export function createContactsRepository(db: Db): ContactsRepository {
  const col = db.collection<ContactDoc>('contacts');

  async function findLive(filter: Filter<ContactDoc>): Promise<ContactDoc | null> {
    return col.findOne({ ...filter, ...NOT_DELETED });
  }

  async function modify(
    f: { teamId: string; contactBookId?: string; id?: string; email?: string },
    change: (c: Contact) => Transition,
  ): Promise<{ contact: Contact; changed: boolean } | undefined> {
    const filter: Filter<ContactDoc> = {
      teamId: f.teamId,
      ...(f.contactBookId !== undefined ? { contactBookId: f.contactBookId } : {}),
      ...(f.id !== undefined ? { _id: f.id } : {}),
      ...(f.email !== undefined ? { emailKey: f.email } : {}),
    };
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const doc = await findLive(filter);
      if (!doc) return undefined;
      const current = toRecord(doc);
      const t = change(current);
      if (t.events.length === 0) return { contact: current, changed: false };
      const w = casWrite(current, t, t.next.updatedAt);
      if ((await col.updateOne(w.filter, w.update)).matchedCount === 1) return { contact: t.next, changed: true };
    }
    throw new ConflictError('The contact was changed concurrently; retry');
  }

  async function insert(t: Transition): Promise<void> {
    try {
      await col.insertOne(newDoc(t));
    } catch (err) {
      if (isDuplicateKeyError(err)) throw new AlreadyExistsError(`A contact with email ${t.next.email} already exists in this contact book`);
      throw err;
    }
  }

  /** Tombstones the given contacts (each compare-and-set); returns how many this call deleted. */
  async function tombstone(docs: ContactDoc[], now: Date): Promise<number> {
    if (docs.length === 0) return 0;
    const ops: AnyBulkWriteOperation<ContactDoc>[] = docs.map((d) => ({ updateOne: tombstoneWrite(toRecord(d), now) }));
    const res = await col.bulkWrite(ops, { ordered: false });
    return res.matchedCount;
  }

  return {
    collection: col as unknown as Collection<Document>,

    async ensureIndexes() {
      await col.createIndex({ contactBookId: 1, emailKey: 1 }, { unique: true, name: 'book_email_unique' });
      await col.createIndex({ contactBookId: 1, createdAt: 1, _id: 1 }, { name: 'book_created' });
      // A campaign's pages of a book, in _id order (pageSubscribed). On the embedded FerretDB only an index whose
      // first key is _id is read for that (built on the unescaped _id text: deploy/ferretdb/patches.json).
      await col.createIndex({ contactBookId: 1, _id: 1 }, { name: 'book_id' });
      if (await isFerretDb(db)) await col.createIndex({ _id: 1, contactBookId: 1 }, { name: 'id_order' });
      await col.createIndex({ teamId: 1, emailKey: 1 }, { name: 'team_email' });
      await col.createIndex({ teamId: 1, subscribed: 1, unsubscribedAt: -1 }, { name: 'team_unsubscribed' });
      // Also indexes _deletedAt, which the relay's tombstone purge queries every pass.
      await ensureOutboxIndex(col as unknown as Collection<Document>);
    },

    insert,

    async get(teamId, contactBookId, id) {
      const d = await findLive({ _id: id, teamId, contactBookId });
      return d ? toRecord(d) : undefined;
    },

    async getInTeam(teamId, id) {
      const d = await findLive({ _id: id, teamId });
      return d ? toRecord(d) : undefined;
    },

    async list(teamId, contactBookId, q) {
      const filter: Filter<ContactDoc> = { teamId, contactBookId, ...NOT_DELETED };
      if (q.emails.length > 0) filter.emailKey = { $in: [...q.emails] };
      if (q.ids.length > 0) filter._id = { $in: [...q.ids] };
      const docs = await col.find(filter).sort({ createdAt: 1, _id: 1 }).skip(q.skip).limit(q.limit).toArray();
      return docs.map(toRecord);
    },

    async pageSubscribed(teamId, contactBookId, after, limit) {
      const filter: Filter<ContactDoc> = { teamId, contactBookId, subscribed: true, ...NOT_DELETED };
      if (after?.createdAt) {
        filter.$or = [{ createdAt: { $gt: after.createdAt } }, { createdAt: after.createdAt, _id: { $gt: after.id } }];
        return (await col.find(filter).sort({ createdAt: 1, _id: 1 }).limit(limit).toArray()).map(toRecord);
      }
      // A range of _id in _id order, read through book_id on MongoDB and id_order on FerretDB (see ensureIndexes);
      // the first page's bound takes every id, all of which are strings.
      filter._id = after ? { $gt: after.id } : { $gte: '' };
      return (await col.find(filter).sort({ _id: 1 }).limit(limit).toArray()).map(toRecord);
    },

    async countByBook(teamId) {
      const rows = await col.aggregate<{ _id: string; n: number }>([
        { $match: { teamId, ...NOT_DELETED } },
        { $group: { _id: '$contactBookId', n: { $sum: 1 } } },
      ]).toArray();
      return new Map(rows.map((r) => [r._id, r.n]));
    },

    async bookTotals(teamId, contactBookId) {
      const rows = await col.aggregate<{ _id: boolean; n: number }>([
        { $match: { teamId, contactBookId, ...NOT_DELETED } },
        { $group: { _id: '$subscribed', n: { $sum: 1 } } },
      ]).toArray();
      let total = 0;
      let unsubscribed = 0;
      for (const r of rows) {
        total += r.n;
        if (r._id === false) unsubscribed += r.n;
      }
      return { total, unsubscribed };
    },

    modify,

    async upsert(teamId, contactBookId, input, now) {
      for (let round = 0; round < MAX_ROUNDS; round++) {
        const updated = await modify({ teamId, contactBookId, email: input.email }, (c) => updateContact(c, input, now));
        if (updated) return { contact: updated.contact, created: false };
        const t = createContact({ id: newId('ct'), teamId, contactBookId, input, now });
        try {
          await col.insertOne(newDoc(t));
          return { contact: t.next, created: true };
        } catch (err) {
          // Created by someone else in between: update that one on the next round.
          if (!isDuplicateKeyError(err)) throw err;
        }
      }
      throw new ConflictError('The contact was changed concurrently; retry');
    },

    async bulkUpsert(teamId, contactBookId, items, now) {
      const ids = new Map<number, string>();
      let created = 0;
      let updated = 0;
      let pending = [...items];
      for (let round = 0; round < MAX_ROUNDS && pending.length > 0; round++) {
        const existing = await col.find({ teamId, contactBookId, emailKey: { $in: pending.map((i) => i.input.email) }, ...NOT_DELETED }).toArray();
        const byEmail = new Map(existing.map((d) => [d.emailKey, toRecord(d)]));
        const ops: AnyBulkWriteOperation<ContactDoc>[] = [];
        const inserts: { op: number; item: BulkItem; id: string }[] = [];
        const updates: { item: BulkItem; id: string; writeId: string }[] = [];
        for (const item of pending) {
          const current = byEmail.get(item.input.email);
          if (current) {
            const t = updateContact(current, item.input, now);
            if (t.events.length === 0) {
              ids.set(item.index, current.id);
              updated++;
              continue;
            }
            const w = casWrite(current, t, now);
            ops.push({ updateOne: { filter: w.filter, update: w.update } });
            updates.push({ item, id: current.id, writeId: w.writeId });
          } else {
            const t = createContact({ id: newId('ct'), teamId, contactBookId, input: item.input, now });
            inserts.push({ op: ops.length, item, id: t.next.id });
            ops.push({ insertOne: { document: newDoc(t) } });
          }
        }
        if (ops.length === 0) {
          pending = [];
          break;
        }
        const { result, duplicates } = await unorderedBulk(col, ops);
        const retry: BulkItem[] = [];
        for (const ins of inserts) {
          if (duplicates.has(ins.op)) {
            retry.push(ins.item); // created concurrently: update it next round
          } else {
            ids.set(ins.item.index, ins.id);
            created++;
          }
        }
        let landed = new Set(updates.map((u) => u.id));
        if (result.matchedCount < updates.length) {
          // Some compare-and-sets lost a race: the writeId tells which of ours are in place.
          const now2 = await col.find({ _id: { $in: updates.map((u) => u.id) } }, { projection: { _id: 1, writeId: 1 } }).toArray();
          const written = new Map(now2.map((d) => [d._id, d.writeId]));
          landed = new Set(updates.filter((u) => written.get(u.id) === u.writeId).map((u) => u.id));
        }
        for (const u of updates) {
          if (landed.has(u.id)) {
            ids.set(u.item.index, u.id);
            updated++;
          } else {
            retry.push(u.item);
          }
        }
        pending = retry;
      }
      return { ids, created, updated, conflicts: pending };
    },

    async removeMany(teamId, contactBookId, by, now) {
      if (by.ids.length === 0 && by.emails.length === 0) return 0;
      const or: Filter<ContactDoc>[] = [];
      if (by.ids.length > 0) or.push({ _id: { $in: [...by.ids] } });
      if (by.emails.length > 0) or.push({ emailKey: { $in: [...by.emails] } });
      const filter: Filter<ContactDoc> = { teamId, contactBookId, ...NOT_DELETED, ...(or.length === 1 ? or[0] : { $or: or }) };
      let deleted = 0;
      for (let round = 0; round < MAX_ROUNDS; round++) {
        const docs = await col.find(filter).toArray();
        if (docs.length === 0) return deleted;
        const n = await tombstone(docs, now);
        deleted += n;
        if (n === docs.length) return deleted;
      }
      throw new ConflictError('Contacts were changed concurrently; retry');
    },

    async purgeBatch(contactBookId, limit, now) {
      const docs = await col.find({ contactBookId, ...NOT_DELETED }).limit(limit).toArray();
      await tombstone(docs, now);
      return docs.length;
    },

    async liveCountOfBook(contactBookId) {
      return col.countDocuments({ contactBookId, ...NOT_DELETED });
    },

    async unsubscribeByEmail(teamId, email, excludeBookIds, details, now) {
      const filter: Filter<ContactDoc> = { teamId, emailKey: email, subscribed: true, ...NOT_DELETED };
      if (excludeBookIds.length > 0) filter.contactBookId = { $nin: [...excludeBookIds] };
      const docs = await col.find(filter, { projection: { _id: 1 } }).toArray();
      let changed = 0;
      for (const d of docs) {
        const r = await modify({ teamId, id: d._id }, (c) => unsubscribeContact(c, details, now));
        if (r?.changed) changed++;
      }
      return changed;
    },

    async unsubscribeMany(requests, excludeBookIds, now) {
      const detailsOf = new Map<string, UnsubscribeRequest['details']>();
      const byTeam = new Map<string, Set<string>>();
      for (const r of requests) {
        const key = `${r.teamId}\u0000${r.email}`;
        if (!detailsOf.has(key)) detailsOf.set(key, r.details);
        const emails = byTeam.get(r.teamId) ?? new Set<string>();
        emails.add(r.email);
        byTeam.set(r.teamId, emails);
      }
      if (byTeam.size === 0) return 0;
      // Every branch is scoped by its team.
      const or: Filter<ContactDoc>[] = [...byTeam].map(([teamId, emails]) => {
        const exclude = excludeBookIds.get(teamId) ?? [];
        return { teamId, emailKey: { $in: [...emails] }, ...(exclude.length > 0 ? { contactBookId: { $nin: [...exclude] } } : {}) };
      });
      // One reply for the usual batch (the default first reply holds 101 documents).
      const docs = await col.find({ $or: or, subscribed: true, ...NOT_DELETED }, { batchSize: 1000 }).toArray();
      const writes = docs.flatMap((d) => {
        const current = toRecord(d);
        const details = detailsOf.get(`${current.teamId}\u0000${current.email}`);
        if (!details) return [];
        const t = unsubscribeContact(current, details, now);
        return t.events.length === 0 ? [] : [{ current, ...casWrite(current, t, now) }];
      });
      let matched = 0;
      for (let i = 0; i < writes.length; i += BULK_CHUNK) {
        const chunk = writes.slice(i, i + BULK_CHUNK);
        matched += (await col.bulkWrite(chunk.map((w) => ({ updateOne: { filter: w.filter, update: w.update } })), { ordered: false })).matchedCount;
      }
      if (matched === writes.length) return matched;
      // Some contacts changed since they were read: find which writes landed (by write id), redo the rest one by one.
      const landed = new Set((await col.find({ _id: { $in: writes.map((w) => w.current.id) } }, { projection: { writeId: 1 } }).toArray())
        .map((d) => `${d._id}\u0000${d.writeId}`));
      let changed = 0;
      for (const w of writes) {
        if (landed.has(`${w.current.id}\u0000${w.writeId}`)) {
          changed++;
          continue;
        }
        const details = detailsOf.get(`${w.current.teamId}\u0000${w.current.email}`);
        if (!details) continue;
        const r = await modify({ teamId: w.current.teamId, id: w.current.id }, (c) => unsubscribeContact(c, details, now));
        if (r?.changed) changed++;
      }
      return changed;
    },

    async listUnsubscribed(teamId, excludeBookIds, skip, limit) {
      const filter: Filter<ContactDoc> = { teamId, subscribed: false, ...NOT_DELETED };
      if (excludeBookIds.length > 0) filter.contactBookId = { $nin: [...excludeBookIds] };
      const [docs, count] = await Promise.all([
        col.find(filter).sort({ unsubscribedAt: -1, _id: -1 }).skip(skip).limit(limit).toArray(),
        col.countDocuments(filter),
      ]);
      return {
        count,
        items: docs.map((d) => {
          const contact = toRecord(d);
          const u = contact.unsubscribe;
          return { contact, reason: u?.reason ?? 'MANUAL', note: u?.note ?? null, source: u?.source ?? null, at: u?.at ?? d.updatedAt };
        }),
      };
    },
  };
}
