import { InvalidArgumentError } from '@mailfleet/kit';

/** SPEC 8: contacts page size default 5000; capped so one page stays a sane response. */
export const CONTACTS_DEFAULT_LIMIT = 5000;
export const CONTACTS_MAX_LIMIT = 10_000;
/** Filters of a list call (`emails`, `ids`): more values than a page can hold make no sense. */
export const MAX_FILTER_VALUES = CONTACTS_MAX_LIMIT;

/**
 * A campaign reads its book a page at a time, and on FerretDB every page decodes the whole contacts
 * collection (no index but _id's), so the page is large: 5,000 small contacts are about a megabyte.
 */
export const BOOK_PAGE_DEFAULT_LIMIT = 5000;
export const BOOK_PAGE_MAX_LIMIT = 5000;

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

/** The book cursor lives in the kit: the campaigns sender makes one after any contact of a page. */
export { bookCursorAfter, decodeBookCursor as decodeCursor, encodeBookCursor as encodeCursor, type BookCursor } from '@mailfleet/kit';

/** Comma-separated query values (`emails`, `ids`) as a list: trimmed, empty ones dropped, duplicates removed. */
export function distinctValues(values: readonly string[]): string[] {
  return [...new Set(values.map((v) => v.trim()).filter((v) => v.length > 0))];
}
