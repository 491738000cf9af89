import type { Collection, Db, Filter } from 'mongodb';
import type { BookChange, ContactBook } from '../domain/book.js';
import type { Properties } from '../domain/contact.js';

/**
 * The only code that touches the `contact_books` collection. Deleting a book
 * is two-phase: `deletingAt` is set first (every read skips the book, and so
 * its contacts), then the purger deletes its contacts in batches and finally
 * the book document. `deletingAt` is deliberately not the outbox's
 * `_deletedAt`, which the relay purges as soon as a document's outbox is empty.
 */
interface BookDoc {
  _id: string;
  teamId: string;
  name: string;
  emoji: string;
  /** Pairs rather than an object: property names may hold `.` or start with `$`. */
  properties: { k: string; v: string }[];
  createdAt: Date;
  updatedAt: Date;
  deletingAt?: Date;
}

export interface DeletingBook {
  readonly id: string;
  readonly teamId: string;
  readonly deletingAt: Date;
}

export interface ContactBooksRepository {
  ensureIndexes(): Promise<void>;
  create(book: ContactBook): Promise<ContactBook>;
  /** The team's live books, newest first. */
  list(teamId: string): Promise<ContactBook[]>;
  get(teamId: string, id: string): Promise<ContactBook | undefined>;
  update(teamId: string, id: string, change: BookChange, now: Date): Promise<ContactBook | undefined>;
  /** First phase of a deletion; false when the team has no such live book. */
  markDeleting(teamId: string, id: string, now: Date): Promise<boolean>;
  /** Books of the team being deleted (their contacts are excluded from team-wide reads). */
  deletingIds(teamId: string): Promise<string[]>;
  /** Books being deleted, oldest deletion first. */
  deleting(limit: number): Promise<DeletingBook[]>;
  /** Last phase of a deletion: removes the book document (only one marked deleting). */
  purge(id: string): Promise<void>;
}

const LIVE = { deletingAt: { $exists: false } } as const;

function toProperties(pairs: { k: string; v: string }[] | undefined): Properties {
  const out: Record<string, string> = {};
  for (const { k, v } of pairs ?? []) Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  return out;
}

function toRecord(d: BookDoc): ContactBook {
  return { id: d._id, teamId: d.teamId, name: d.name, emoji: d.emoji, properties: toProperties(d.properties), createdAt: d.createdAt, updatedAt: d.updatedAt };
}

export function createContactBooksRepository(db: Db): ContactBooksRepository {
  const col: Collection<BookDoc> = db.collection<BookDoc>('contact_books');
  return {
    async ensureIndexes() {
      await col.createIndex({ teamId: 1, createdAt: -1 }, { name: 'team_created' });
      await col.createIndex({ deletingAt: 1 }, { name: 'deleting', sparse: true });
    },
    async create(book) {
      await col.insertOne({
        _id: book.id, teamId: book.teamId, name: book.name, emoji: book.emoji,
        properties: Object.entries(book.properties).map(([k, v]) => ({ k, v })), createdAt: book.createdAt, updatedAt: book.updatedAt,
      });
      return book;
    },
    async list(teamId) {
      return (await col.find({ teamId, ...LIVE }).sort({ createdAt: -1, _id: -1 }).toArray()).map(toRecord);
    },
    async get(teamId, id) {
      const d = await col.findOne({ _id: id, teamId, ...LIVE });
      return d ? toRecord(d) : undefined;
    },
    async update(teamId, id, change, now) {
      const set: Partial<BookDoc> = { updatedAt: now };
      if (change.name !== undefined) set.name = change.name;
      if (change.emoji !== undefined) set.emoji = change.emoji;
      if (change.properties !== undefined) set.properties = Object.entries(change.properties).map(([k, v]) => ({ k, v }));
      const d = await col.findOneAndUpdate({ _id: id, teamId, ...LIVE } as Filter<BookDoc>, { $set: set }, { returnDocument: 'after' });
      return d ? toRecord(d) : undefined;
    },
    async markDeleting(teamId, id, now) {
      const res = await col.updateOne({ _id: id, teamId, ...LIVE }, { $set: { deletingAt: now } });
      return res.matchedCount === 1;
    },
    async deletingIds(teamId) {
      return (await col.find({ teamId, deletingAt: { $exists: true } }, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
    },
    async deleting(limit) {
      const docs = await col.find({ deletingAt: { $exists: true } }).sort({ deletingAt: 1 }).limit(limit).toArray();
      return docs.map((d) => ({ id: d._id, teamId: d.teamId, deletingAt: d.deletingAt as Date }));
    },
    async purge(id) {
      await col.deleteOne({ _id: id, deletingAt: { $exists: true } });
    },
  };
}
