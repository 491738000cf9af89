import { InvalidArgumentError } from '@mailfleet/kit';

/** SPEC 8: contacts page size default 5000; capped so one page stays a sane response. */
export const CONTACTS_DEFAULT_LIMIT = 5000;
export const CONTACTS_MAX_LIMIT = 10_000;
/** Filters of a list call (`emails`, `ids`): more values than a page can hold make no sense. */
export const MAX_FILTER_VALUES = CONTACTS_MAX_LIMIT;

export const BOOK_PAGE_DEFAULT_LIMIT = 1000;
export const BOOK_PAGE_MAX_LIMIT = 1000;

export const UNSUBSCRIBES_DEFAULT_LIMIT = 20;
export const UNSUBSCRIBES_MAX_LIMIT = 100;

export interface PageWindow {
  readonly skip: number;
  readonly limit: number;
}

/** 1-based page and limit as the proto gives them (0 means the default) into skip/limit. */
export function pageWindow(page: number, limit: number, defaults: { limit: number; max: number }): PageWindow {
  if (!Number.isInteger(page) || page < 0) throw new InvalidArgumentError('page must be an integer >= 1');
  if (!Number.isInteger(limit) || limit < 0) throw new InvalidArgumentError('limit must be an integer >= 1');
  if (limit > defaults.max) throw new InvalidArgumentError(`limit must be at most ${defaults.max}`);
  const size = limit === 0 ? defaults.limit : limit;
  const p = page === 0 ? 1 : page;
  const skip = (p - 1) * size;
  if (!Number.isSafeInteger(skip)) throw new InvalidArgumentError('page is too large');
  return { skip, limit: size };
}

/**
 * Position in a book's creation order (createdAt, then id). New contacts are
 * created after every existing one, so a campaign paging with this cursor also
 * reaches contacts added while it runs.
 */
export interface BookCursor {
  readonly createdAt: Date;
  readonly id: string;
}

export function encodeCursor(c: BookCursor): string {
  return Buffer.from(`${c.createdAt.getTime()}.${c.id}`, 'utf8').toString('base64url');
}

export function decodeCursor(raw: string): BookCursor {
  const text = /^[A-Za-z0-9_-]+$/.test(raw) ? Buffer.from(raw, 'base64url').toString('utf8') : '';
  const m = /^(\d{1,15})\.([A-Za-z0-9_]{1,100})$/.exec(text);
  if (!m) throw new InvalidArgumentError('cursor is not valid; start again without one');
  return { createdAt: new Date(Number(m[1])), id: m[2]! };
}

/** Comma-separated query values (`emails`, `ids`) as a list: trimmed, empty ones dropped, duplicates removed. */
export function distinctValues(values: readonly string[]): string[] {
  return [...new Set(values.map((v) => v.trim()).filter((v) => v.length > 0))];
}
