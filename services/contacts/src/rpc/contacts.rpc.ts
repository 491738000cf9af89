import { InvalidArgumentError, newId, NotFoundError, type UnaryHandlers } from '@mailfleet/kit';
import type { contactsV1 } from '@mailfleet/proto';
import { checkBookChange, checkBookName, checkEmoji, DEFAULT_BOOK_EMOJI, type ContactBook } from '../domain/book.js';
import { BULK_MAX, type BulkItemError } from '../domain/bulk.js';
import { planBulkUpsert } from '../domain/bulk.js';
import {
  checkChange, checkInput, checkProperties, createContact, orThrow, resolveReason, unsubscribeContact, unsubscribeDetails, updateContact,
} from '../domain/contact.js';
import { emailKey, normaliseEmail } from '../domain/email.js';
import {
  BOOK_PAGE_DEFAULT_LIMIT, BOOK_PAGE_MAX_LIMIT, bookCursorAfter, CONTACTS_DEFAULT_LIMIT, CONTACTS_MAX_LIMIT, decodeCursor, distinctValues, encodeCursor,
  MAX_FILTER_VALUES, pageWindow, UNSUBSCRIBES_DEFAULT_LIMIT, UNSUBSCRIBES_MAX_LIMIT,
} from '../domain/paging.js';
import type { ContactBooksRepository } from '../repositories/contact-books.repository.js';
import type { ContactsRepository } from '../repositories/contacts.repository.js';
import type { BookPurger } from '../workers/book-purge.worker.js';
import { bookToProto, contactToProto, inputFromProto, reasonFromProto, unsubscribeToProto } from './mapping.js';

export interface ContactsRpcDeps {
  readonly books: ContactBooksRepository;
  readonly contacts: ContactsRepository;
  readonly purger: Pick<BookPurger, 'kick'>;
  /**
   * Asks the outbox relay for a pass now, so contact.* events go out promptly: over the contacts with these ids
   * (read by id), or without ids over every document waiting (a scan of the collection on FerretDB).
   */
  readonly kickRelay: (contactIds?: readonly string[]) => void;
  readonly now?: () => Date;
}

function requireId(value: string, field: string): string {
  if (!value) throw new InvalidArgumentError(`${field} is required`);
  return value;
}

const BOOK_NOT_FOUND = 'Contact book not found';
const CONTACT_NOT_FOUND = 'Contact not found';

export function createContactsHandlers(deps: ContactsRpcDeps): UnaryHandlers<contactsV1.ContactsServiceServer> {
  const now = deps.now ?? (() => new Date());
  const { books, contacts } = deps;

  /** Every contact call goes through its book: missing, foreign or being deleted is NOT_FOUND. */
  async function liveBook(teamId: string, contactBookId: string): Promise<ContactBook> {
    const book = await books.get(requireId(teamId, 'team_id'), requireId(contactBookId, 'contact_book_id'));
    if (!book) throw new NotFoundError(BOOK_NOT_FOUND);
    return book;
  }

  function reasonDetails(code: contactsV1.UnsubscribeReason, note: string, source: string | undefined) {
    return unsubscribeDetails(resolveReason(reasonFromProto(code), note), note, source);
  }

  return {
    async createContactBook(req) {
      const teamId = requireId(req.teamId, 'team_id');
      const t = now();
      const book: ContactBook = {
        id: newId('cb'),
        teamId,
        name: checkBookName(req.name),
        emoji: req.emoji === undefined ? DEFAULT_BOOK_EMOJI : checkEmoji(req.emoji),
        properties: orThrow(checkProperties(req.properties)) ?? {},
        createdAt: t,
        updatedAt: t,
      };
      return { contactBook: bookToProto(await books.create(book)) };
    },

    async listContactBooks(req) {
      const teamId = requireId(req.teamId, 'team_id');
      const [list, counts] = await Promise.all([books.list(teamId), contacts.countByBook(teamId)]);
      return { contactBooks: list.map((b) => ({ contactBook: bookToProto(b), contactsCount: counts.get(b.id) ?? 0 })) };
    },

    async getContactBook(req) {
      const book = await liveBook(req.teamId, req.contactBookId);
      const totals = await contacts.bookTotals(book.teamId, book.id);
      return { contactBook: bookToProto(book), details: { totalContacts: totals.total, unsubscribedContacts: totals.unsubscribed } };
    },

    async updateContactBook(req) {
      const teamId = requireId(req.teamId, 'team_id');
      const change = checkBookChange({ name: req.name, emoji: req.emoji, properties: req.properties?.values });
      const updated = await books.update(teamId, requireId(req.contactBookId, 'contact_book_id'), change, now());
      if (!updated) throw new NotFoundError(BOOK_NOT_FOUND);
      return { contactBook: bookToProto(updated) };
    },

    async deleteContactBook(req) {
      const t = now();
      const marked = await books.markDeleting(requireId(req.teamId, 'team_id'), requireId(req.contactBookId, 'contact_book_id'), t);
      if (!marked) throw new NotFoundError(BOOK_NOT_FOUND);
      // The book and its contacts are invisible from here on; the purge runs in the background (and the sweeper finishes it).
      deps.purger.kick(req.contactBookId, t);
      return {};
    },

    async createContact(req) {
      const book = await liveBook(req.teamId, req.contactBookId);
      const input = orThrow(checkInput(inputFromProto(req.contact)));
      const t = createContact({ id: newId('ct'), teamId: book.teamId, contactBookId: book.id, input, now: now() });
      await contacts.insert(t);
      deps.kickRelay([t.next.id]);
      return { contact: contactToProto(t.next) };
    },

    async getContact(req) {
      const book = await liveBook(req.teamId, req.contactBookId);
      const c = await contacts.get(book.teamId, book.id, requireId(req.contactId, 'contact_id'));
      if (!c) throw new NotFoundError(CONTACT_NOT_FOUND);
      return { contact: contactToProto(c) };
    },

    async updateContact(req) {
      const book = await liveBook(req.teamId, req.contactBookId);
      const change = orThrow(checkChange({
        ...(req.firstName !== undefined ? { firstName: req.firstName } : {}),
        ...(req.lastName !== undefined ? { lastName: req.lastName } : {}),
        ...(req.subscribed !== undefined ? { subscribed: req.subscribed } : {}),
        ...(req.properties !== undefined ? { properties: req.properties.values } : {}),
      }));
      const t = now();
      const res = await contacts.modify({ teamId: book.teamId, contactBookId: book.id, id: requireId(req.contactId, 'contact_id') }, (c) => updateContact(c, change, t));
      if (!res) throw new NotFoundError(CONTACT_NOT_FOUND);
      if (res.changed) deps.kickRelay([res.contact.id]);
      return { contact: contactToProto(res.contact) };
    },

    async upsertContact(req) {
      const book = await liveBook(req.teamId, req.contactBookId);
      const input = orThrow(checkInput(inputFromProto(req.contact)));
      const res = await contacts.upsert(book.teamId, book.id, input, now());
      deps.kickRelay([res.contact.id]);
      return { contact: contactToProto(res.contact), created: res.created };
    },

    async deleteContact(req) {
      const book = await liveBook(req.teamId, req.contactBookId);
      const contactId = requireId(req.contactId, 'contact_id');
      const n = await contacts.removeMany(book.teamId, book.id, { ids: [contactId], emails: [] }, now());
      if (n === 0) throw new NotFoundError(CONTACT_NOT_FOUND);
      deps.kickRelay([contactId]);
      return {};
    },

    async listContacts(req) {
      const book = await liveBook(req.teamId, req.contactBookId);
      const window = pageWindow(req.page, req.limit, { limit: CONTACTS_DEFAULT_LIMIT, max: CONTACTS_MAX_LIMIT });
      const emails = distinctValues(req.emails).map(emailKey);
      const ids = distinctValues(req.ids);
      if (emails.length > MAX_FILTER_VALUES || ids.length > MAX_FILTER_VALUES) throw new InvalidArgumentError(`at most ${MAX_FILTER_VALUES} values per filter`);
      const list = await contacts.list(book.teamId, book.id, { emails, ids, ...window });
      return { contacts: list.map(contactToProto) };
    },

    async bulkUpsertContacts(req) {
      const book = await liveBook(req.teamId, req.contactBookId);
      if (req.contacts.length > BULK_MAX) throw new InvalidArgumentError(`at most ${BULK_MAX} contacts per call`);
      const plan = planBulkUpsert(req.contacts.map(inputFromProto));
      const res = await contacts.bulkUpsert(book.teamId, book.id, plan.items, now());
      if (res.created + res.updated > 0) deps.kickRelay([...res.ids.values()]);
      const conflicts: BulkItemError[] = res.conflicts.map((i) => ({
        index: i.index, email: req.contacts[i.index]?.email ?? i.input.email, code: 'CONFLICT', message: 'The contact was changed concurrently; retry',
      }));
      return {
        contactIds: req.contacts.map((_, i) => res.ids.get(i) ?? ''),
        createdCount: res.created,
        updatedCount: res.updated,
        errors: [...plan.errors, ...conflicts].sort((a, b) => a.index - b.index),
      };
    },

    async bulkDeleteContacts(req) {
      const book = await liveBook(req.teamId, req.contactBookId);
      const ids = distinctValues(req.contactIds);
      const emails = distinctValues(req.emails).map(emailKey);
      if (ids.length + emails.length > BULK_MAX) throw new InvalidArgumentError(`at most ${BULK_MAX} contacts per call`);
      const n = await contacts.removeMany(book.teamId, book.id, { ids, emails }, now());
      // Deleted by address, the ids are not known here.
      if (n > 0) deps.kickRelay(emails.length === 0 ? ids : undefined);
      return { deletedCount: n };
    },

    async unsubscribeContact(req) {
      const teamId = requireId(req.teamId, 'team_id');
      const contactId = requireId(req.contactId, 'contact_id');
      const found = await contacts.getInTeam(teamId, contactId);
      if (!found || !(await books.get(teamId, found.contactBookId))) throw new NotFoundError(CONTACT_NOT_FOUND);
      const details = reasonDetails(req.reasonCode, req.reason, req.source ?? req.campaignId);
      const t = now();
      const res = await contacts.modify({ teamId, id: contactId }, (c) => unsubscribeContact(c, details, t));
      if (!res) throw new NotFoundError(CONTACT_NOT_FOUND);
      if (res.changed) deps.kickRelay([res.contact.id]);
      return { contact: contactToProto(res.contact) };
    },

    async unsubscribeByEmail(req) {
      const teamId = requireId(req.teamId, 'team_id');
      const email = normaliseEmail(req.email);
      if (!email) throw new InvalidArgumentError(req.email ? `Invalid email address: ${req.email}` : 'email is required');
      const details = reasonDetails(req.reasonCode, req.reason, req.source);
      const n = await contacts.unsubscribeByEmail(teamId, email, await books.deletingIds(teamId), details, now());
      if (n > 0) deps.kickRelay();
      return { unsubscribedCount: n };
    },

    async listUnsubscribes(req) {
      const teamId = requireId(req.teamId, 'team_id');
      const window = pageWindow(req.page, req.limit, { limit: UNSUBSCRIBES_DEFAULT_LIMIT, max: UNSUBSCRIBES_MAX_LIMIT });
      const res = await contacts.listUnsubscribed(teamId, await books.deletingIds(teamId), window.skip, window.limit);
      return { unsubscribes: res.items.map(unsubscribeToProto), count: res.count };
    },

    async listBookContacts(req) {
      const book = await liveBook(req.teamId, req.contactBookId);
      const window = pageWindow(1, req.limit, { limit: BOOK_PAGE_DEFAULT_LIMIT, max: BOOK_PAGE_MAX_LIMIT });
      const after = req.cursor ? decodeCursor(req.cursor) : undefined;
      // One more than asked tells whether another page follows.
      const page = await contacts.pageSubscribed(book.teamId, book.id, after, window.limit + 1);
      const items = page.slice(0, window.limit);
      const last = items[items.length - 1];
      return {
        contacts: items.map(contactToProto),
        nextCursor: page.length > window.limit && last ? encodeCursor(bookCursorAfter(after, last.id, last.createdAt)) : undefined,
      };
    },
  };
}
