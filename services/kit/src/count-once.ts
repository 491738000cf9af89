import type { Collection, Document, Filter } from 'mongodb';
import { isDuplicateKeyError } from './mongo.js';

/**
 * Counting an effect exactly once, without transactions: an email's `sent`
 * in a daily rollup (analytics), an email's `delivered` on its campaign
 * (campaigns). At-least-once delivery of events plus a crash anywhere must
 * neither lose nor repeat a count.
 *
 * Two documents take part: a *mark* per effect (its `_id` is the effect's
 * key), which says which event owns the counting and whether it is finished,
 * and the *target* document holding the counters. Single-document updates
 * are atomic; nothing spans two documents, so the protocol is the classic
 * two-phase one (MongoDB's pre-transaction "two-phase commit" pattern):
 *
 * 1. claim: insert the mark `{pending, until: now + lease, <target>}`; the
 *    unique `_id` lets exactly one event own it.
 * 2. apply: in ONE update of the target, `$inc` the counters and `$push` the
 *    mark's id onto the target's `pending` list, filtered on the id not being
 *    there already, so a repeat of this step changes nothing.
 * 3. finish: mark `pending: false` (compare-and-set on the owner's `until`).
 * 4. unpend: `$pullAll` the id from the target's `pending` list. The list
 *    only ever holds the countings in flight: the target stays small however
 *    much it counts.
 *
 * A crash anywhere leads to a redelivery that finds the mark and resumes: a
 * pending mark whose lease ran out is taken over and steps 2-4 repeated (2 is
 * a no-op if it had happened); a finished mark only needs step 4 again
 * (idempotent). Another event with the same key (a second open of an email)
 * finds the mark and counts nothing. A mark without `pending` (written before
 * this protocol, as a plain "done" key) reads as finished.
 *
 * Why the lease: the id must never leave the pending list while someone may
 * still apply step 2 for it, or that late step 2 would count again. Only the
 * lease holder applies, and only while at least `marginMs` of its lease is
 * left; a takeover happens only once the lease is over. So a stale holder
 * would have to see its step-2 write delayed by more than the margin.
 */

export interface MarkState {
  readonly eventId: string;
  readonly pending?: boolean;
  readonly until?: Date;
}

export type ExistingMarkDecision =
  /** Counted already (by this event or another): only make sure the id left the target's pending list. */
  | { readonly action: 'unpend' }
  /** Another event is counting it right now: this one counts nothing. */
  | { readonly action: 'skip' }
  /** This same event is being handled elsewhere right now (a concurrent redelivery): try again later. */
  | { readonly action: 'retry' }
  /** The holder's lease ran out without finishing (it crashed): take the counting over. */
  | { readonly action: 'take-over' };

export function decideOnExistingMark(mark: MarkState, eventId: string, now: Date): ExistingMarkDecision {
  if (!mark.pending || !mark.until) return { action: 'unpend' };
  if (mark.until.getTime() <= now.getTime()) return { action: 'take-over' };
  return mark.eventId === eventId ? { action: 'retry' } : { action: 'skip' };
}

/** Whether a holder may still apply step 2: at least `marginMs` of its lease is left. */
export function mayApply(until: Date, now: Date, marginMs: number): boolean {
  return until.getTime() - now.getTime() >= marginMs;
}

export const DEFAULT_COUNT_LEASE_MS = 60_000;
export const DEFAULT_COUNT_MARGIN_MS = 30_000;

/** A counting could not go on now (another delivery of the same event holds it, or the lease is nearly over); the event is retried. */
export class CountingBusyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CountingBusyError';
  }
}

export type CountOutcome = 'counted' | 'already counted';

/** A claim held by the caller: apply and finish with it. */
export interface CountClaim {
  readonly markId: string;
  /** The target document's `_id`. */
  readonly target: string;
  readonly until: Date;
}

export interface CountClaimInput {
  /** The effect's key: the mark's `_id`. */
  readonly markId: string;
  readonly eventId: string;
  /** The `_id` of the document the counters live in. */
  readonly target: string;
  /** More fields stored on a new mark (for sweeps and reading). */
  readonly markFields?: Document;
}

export interface CountApplyInput {
  /** Counter field -> amount. */
  readonly inc: Readonly<Record<string, number>>;
  /** With `upsert`: the fields of a target created by this counting. */
  readonly setOnInsert?: Document;
  /** Set on the target with the counters (e.g. `updatedAt`). */
  readonly set?: Document;
}

export interface CountOnce {
  /** Steps 1-4 in turn. */
  count(input: CountClaimInput & CountApplyInput): Promise<CountOutcome>;
  /** The steps, exposed so tests can stop between them as a crash would. Undefined: nothing to do for this event. */
  claim(input: CountClaimInput): Promise<CountClaim | undefined>;
  apply(claim: CountClaim, input: CountApplyInput): Promise<void>;
  finish(claim: CountClaim): Promise<void>;
}

/** Marks and targets are keyed by strings. */
export type KeyedDoc = Document & { _id: string };

export function createCountOnce(opts: {
  marks: Collection<KeyedDoc>;
  targets: Collection<KeyedDoc>;
  /** The mark's field naming its target (default `target`). */
  targetField?: string;
  /** Creates a missing target (a daily rollup); otherwise a missing target counts nothing. */
  upsert?: boolean;
  leaseMs?: number;
  marginMs?: number;
  now?: () => Date;
}): CountOnce {
  const { marks, targets } = opts;
  const targetField = opts.targetField ?? 'target';
  const leaseMs = opts.leaseMs ?? DEFAULT_COUNT_LEASE_MS;
  const marginMs = Math.min(opts.marginMs ?? DEFAULT_COUNT_MARGIN_MS, leaseMs);
  const now = opts.now ?? (() => new Date());

  async function unpend(target: string, markId: string): Promise<void> {
    await targets.updateOne({ _id: target } as Filter<KeyedDoc>, { $pullAll: { pending: [markId] } } as Document);
  }

  async function claim(input: CountClaimInput): Promise<CountClaim | undefined> {
    const at = now();
    const until = new Date(at.getTime() + leaseMs);
    try {
      await marks.insertOne({
        ...input.markFields, _id: input.markId, eventId: input.eventId, [targetField]: input.target, pending: true, until, createdAt: at,
      } as KeyedDoc);
      return { markId: input.markId, target: input.target, until };
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
    }
    const mark = await marks.findOne({ _id: input.markId } as Filter<KeyedDoc>);
    if (!mark) throw new CountingBusyError('count mark vanished while being read');
    // The target stays the one the first claim chose, whichever event takes over.
    const target = typeof mark[targetField] === 'string' ? (mark[targetField] as string) : input.target;
    const decision = decideOnExistingMark(mark as unknown as MarkState, input.eventId, at);
    switch (decision.action) {
      case 'unpend':
        await unpend(target, input.markId);
        return undefined;
      case 'skip':
        return undefined;
      case 'retry':
        throw new CountingBusyError('this event is being counted by another delivery');
      case 'take-over': {
        const res = await marks.updateOne({ _id: input.markId, pending: true, until: mark.until } as Filter<KeyedDoc>, { $set: { until } });
        if (res.modifiedCount !== 1) throw new CountingBusyError('another delivery took the counting over first');
        return { markId: input.markId, target, until };
      }
    }
  }

  async function apply(c: CountClaim, input: CountApplyInput): Promise<void> {
    if (!mayApply(c.until, now(), marginMs)) throw new CountingBusyError('lease nearly over before the counter was applied');
    const update: Document = { $inc: input.inc, $push: { pending: c.markId } };
    if (opts.upsert && input.setOnInsert) update.$setOnInsert = input.setOnInsert;
    if (input.set) update.$set = input.set;
    const filter = { _id: c.target, pending: { $ne: c.markId } } as Filter<KeyedDoc>;
    if (!opts.upsert) {
      await targets.updateOne(filter, update);
      return;
    }
    try {
      await targets.updateOne(filter, update, { upsert: true });
      return;
    } catch (err) {
      // The target exists and holds the id already (applied before a crash), or two first
      // countings raced on the insert: retry without upsert to tell them apart.
      if (!isDuplicateKeyError(err)) throw err;
    }
    await targets.updateOne(filter, update);
  }

  async function finish(c: CountClaim): Promise<void> {
    const res = await marks.updateOne({ _id: c.markId, pending: true, until: c.until } as Filter<KeyedDoc>, { $set: { pending: false, doneAt: now() } });
    // Lost the lease meanwhile: whoever took over finishes (its step 2 finds the id and adds nothing).
    if (res.matchedCount === 1) await unpend(c.target, c.markId);
  }

  return {
    async count(input) {
      const c = await claim(input);
      if (!c) return 'already counted';
      await apply(c, input);
      await finish(c);
      return 'counted';
    },
    claim,
    apply,
    finish,
  };
}
