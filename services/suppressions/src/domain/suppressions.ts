import { addressOfRecipient, canonicalAddress, normaliseAddress } from '@mailfleet/kit';

/**
 * The suppression list's rules, without I/O: address normalisation and
 * validation, paging, search, and the limits of the batch check.
 */

export const SUPPRESSION_REASONS = ['HARD_BOUNCE', 'COMPLAINT', 'MANUAL', 'UNSUBSCRIBE'] as const;
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];

export function isSuppressionReason(value: unknown): value is SuppressionReason {
  return typeof value === 'string' && (SUPPRESSION_REASONS as readonly string[]).includes(value);
}

/** SPEC 8: suppressions page size default 20, max 100. */
export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;
/** Most addresses one CheckSuppressed call may carry (a batch send is at most 100 emails, each with to/cc/bcc). */
export const MAX_CHECK_ADDRESSES = 1000;
export const MAX_SEARCH_LENGTH = 320;
export const MAX_SOURCE_LENGTH = 500;
/**
 * Addresses are keyed by the platform's one normalisation (`@mailfleet/kit`
 * addresses.ts: trimmed, NFC, lower case; Unicode local parts accepted), the
 * same as contacts and emails, so an address unsubscribed in a contact book
 * is the address the send path checks.
 */
export const canonicalEmail = canonicalAddress;
export const normalizeEmail = normaliseAddress;
export { addressOfRecipient };

/** Escapes every regular-expression metacharacter, so user text matches only itself. */
export function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

export interface Paging {
  readonly page: number;
  readonly limit: number;
  readonly skip: number;
}

/** Proto paging (0 = default) to a page; out-of-range values are refused, never clamped. */
export function checkPaging(page: number, limit: number): Checked<Paging> {
  if (!Number.isInteger(page) || page < 0) return { ok: false, message: 'page must be an integer of at least 1' };
  if (!Number.isInteger(limit) || limit < 0 || limit > MAX_PAGE_SIZE) {
    return { ok: false, message: `limit must be an integer from 1 to ${MAX_PAGE_SIZE}` };
  }
  const p = page === 0 ? 1 : page;
  const l = limit === 0 ? DEFAULT_PAGE_SIZE : limit;
  return { ok: true, value: { page: p, limit: l, skip: (p - 1) * l } };
}

/** The search text as matched: trimmed and lower-cased (addresses are stored lower-case); undefined means no filter. */
export function checkSearch(search: string | undefined): Checked<string | undefined> {
  const s = canonicalAddress(search ?? '');
  if (s.length > MAX_SEARCH_LENGTH) return { ok: false, message: `search must be at most ${MAX_SEARCH_LENGTH} characters` };
  return { ok: true, value: s.length === 0 ? undefined : s };
}

/** A source as stored: trimmed; blank means none. */
export function checkSource(source: string | undefined): Checked<string | undefined> {
  const s = source?.trim() ?? '';
  if (s.length > MAX_SOURCE_LENGTH) return { ok: false, message: `source must be at most ${MAX_SOURCE_LENGTH} characters` };
  return { ok: true, value: s.length === 0 ? undefined : s };
}

/** The distinct canonical forms of the addresses to look up, in first-seen order. */
export function lookupKeys(emails: readonly string[]): string[] {
  return [...new Set(emails.map(canonicalEmail).filter((e) => e.length > 0))];
}

/** The given addresses whose canonical form is suppressed, as given, in request order. */
export function pickSuppressed(emails: readonly string[], suppressed: ReadonlySet<string>): string[] {
  return emails.filter((e) => suppressed.has(canonicalEmail(e)));
}
