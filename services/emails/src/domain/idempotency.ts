import { createHash } from 'node:crypto';

/**
 * Idempotency-Key (SPEC 4.2). A key is claimed by a unique insert per
 * (team, key); the claim holds the hash of the request body. These are the
 * pure parts: the canonical body hash and what a second request with the same
 * key gets.
 */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 256;

/** JSON with object keys sorted at every level and undefined members dropped: equal bodies give equal text. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (Buffer.isBuffer(value)) return JSON.stringify(value.toString('base64'));
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/** `sha256:<hex>` of the canonical JSON of a body, prefixed by what kind of request it was. */
export function bodyHash(kind: 'single' | 'batch', body: unknown): string {
  return `sha256:${createHash('sha256').update(`${kind}\n${canonicalJson(body)}`).digest('hex')}`;
}

export interface IdempotencyState {
  readonly state: 'PROCESSING' | 'COMPLETED';
  readonly bodyHash: string;
  readonly claimedAt: Date;
  readonly expiresAt: Date;
  readonly emailIds?: readonly string[] | undefined;
}

export type IdempotencyDecision =
  /** Same key, same body, finished: answer with the original ids, send nothing. */
  | { readonly kind: 'replay'; readonly emailIds: readonly string[] }
  /** Same key, another body: 409 NOT_UNIQUE. */
  | { readonly kind: 'mismatch' }
  /** Same key, same body, the first request still running: 409, retry later. */
  | { readonly kind: 'in-progress' }
  /** The first request stopped without finishing (crashed replica): this one may take over. */
  | { readonly kind: 'take-over' }
  /** The entry outlived its lifetime: the key is free again. */
  | { readonly kind: 'expired' };

export function decideIdempotency(existing: IdempotencyState, hash: string, now: Date, takeoverAfterMs: number): IdempotencyDecision {
  if (existing.expiresAt.getTime() <= now.getTime()) return { kind: 'expired' };
  if (existing.bodyHash !== hash) return { kind: 'mismatch' };
  if (existing.state === 'COMPLETED') return { kind: 'replay', emailIds: existing.emailIds ?? [] };
  if (now.getTime() - existing.claimedAt.getTime() >= takeoverAfterMs) return { kind: 'take-over' };
  return { kind: 'in-progress' };
}
