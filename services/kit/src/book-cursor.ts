import { InvalidArgumentError } from './errors.js';

/**
 * A position in a contact book: the cursor of the contacts service's ListBookContacts. Shared so that the
 * campaigns sender can resume after any contact of a page it read ahead, not only after the last.
 *
 * A cursor without `createdAt` is a position in id order. Ids begin with their creation time (`newId`), so new
 * contacts come after every existing one and a campaign paging this way also reaches contacts added while it runs;
 * and a page is a range of the _id index, which the embedded FerretDB reads and orders in SQLite (a page in
 * creation order was a scan and a sort of the whole collection there). A cursor with `createdAt` is a position in
 * creation order (createdAt, then id): what a campaign started before id-order paging holds, still honoured so
 * that it ends in the order it began.
 */
export interface BookCursor {
  readonly id: string;
  readonly createdAt?: Date | undefined;
}

const ID_ORDER = 'i';

export function encodeBookCursor(c: BookCursor): string {
  return Buffer.from(`${c.createdAt ? c.createdAt.getTime() : ID_ORDER}.${c.id}`, 'utf8').toString('base64url');
}

export function decodeBookCursor(raw: string): BookCursor {
  const text = /^[A-Za-z0-9_-]+$/.test(raw) ? Buffer.from(raw, 'base64url').toString('utf8') : '';
  const m = /^(\d{1,15}|i)\.([A-Za-z0-9_]{1,100})$/.exec(text);
  if (!m) throw new InvalidArgumentError('cursor is not valid; start again without one');
  return m[1] === ID_ORDER ? { id: m[2]! } : { createdAt: new Date(Number(m[1])), id: m[2]! };
}

/** The cursor of `id` in the same order as `page` (the cursor a page was asked with; none: id order). */
export function bookCursorAfter(page: BookCursor | undefined, id: string, createdAt: Date): BookCursor {
  return page?.createdAt ? { createdAt, id } : { id };
}
