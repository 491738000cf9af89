import { checkInput, type ContactChange, type ContactInput } from './contact.js';

/** One bulk call: at most this many contacts (upsert) or ids/emails (delete). */
export const BULK_MAX = 1000;

export type BulkItemErrorCode = 'INVALID_EMAIL' | 'INVALID_NAME' | 'INVALID_PROPERTIES' | 'DUPLICATE_IN_BATCH' | 'CONFLICT';

export interface BulkItemError {
  readonly index: number;
  readonly email: string;
  readonly code: BulkItemErrorCode;
  readonly message: string;
}

export interface BulkItem {
  readonly index: number;
  readonly input: ContactInput;
}

export interface BulkPlan {
  /** Items to store, one per address, in request order. */
  readonly items: readonly BulkItem[];
  readonly errors: readonly BulkItemError[];
}

/**
 * Splits a bulk upsert into the items to store and per-item errors: an
 * invalid item never fails the others. An address repeated in the batch is
 * stored from its first occurrence; later ones are reported.
 */
export function planBulkUpsert(raw: readonly (ContactChange & { email: string })[]): BulkPlan {
  const items: BulkItem[] = [];
  const errors: BulkItemError[] = [];
  const firstIndex = new Map<string, number>();
  raw.forEach((r, index) => {
    const checked = checkInput(r);
    if (!checked.ok) {
      errors.push({ index, email: r.email, code: checked.problem.code, message: checked.problem.message });
      return;
    }
    const first = firstIndex.get(checked.value.email);
    if (first !== undefined) {
      errors.push({ index, email: r.email, code: 'DUPLICATE_IN_BATCH', message: `${checked.value.email} already appears at index ${first} of this batch` });
      return;
    }
    firstIndex.set(checked.value.email, index);
    items.push({ index, input: checked.value });
  });
  return { items, errors };
}
