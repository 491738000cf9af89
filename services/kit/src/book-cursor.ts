import { InvalidArgumentError } from './errors.js';

/**
 * A position in a contact book's creation order (createdAt, then id): the
 * cursor of the contacts service's ListBookContacts. New contacts are
 * created after every existing one, so a campaign paging with it also reaches
 * contacts added while it runs. Shared so that the campaigns sender can
 * resume after any contact of a page it read ahead, not only after the last.
 */
export interface BookCursor {
  readonly createdAt: Date;
  readonly id: string;
}

export function encodeBookCursor(c: BookCursor): string {
  return Buffer.from(`${c.createdAt.getTime()}.${c.id}`, 'utf8').toString('base64url');
}

export function decodeBookCursor(raw: string): BookCursor {
  const text = /^[A-Za-z0-9_-]+$/.test(raw) ? Buffer.from(raw, 'base64url').toString('utf8') : '';
  const m = /^(\d{1,15})\.([A-Za-z0-9_]{1,100})$/.exec(text);
  if (!m) throw new InvalidArgumentError('cursor is not valid; start again without one');
  return { createdAt: new Date(Number(m[1])), id: m[2]! };
}
