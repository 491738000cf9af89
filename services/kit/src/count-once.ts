import { randomUUID } from 'node:crypto';
import type { AnyBulkWriteOperation, Collection, Document, Filter } from 'mongodb';
import { bulkWriteInChunks, isDuplicateKeyError } from './mongo.js';

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
  /** Set when a batch claimed the mark: the batch's id is then the token on the target's pending list. */
  readonly batchId?: string;
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

/** The token a mark's counting puts on its target's pending list: its batch's id, else its own. */
export function tokenOf(mark: MarkState, markId: string): string {
  return mark.batchId ?? markId;
}

/**
 * Taking over a crashed holder's mark: its token still on the target means its
 * apply happened (only its end is missing: settle), its absence that the apply
 * never happened and never will (claim it again and count it).
 */
export function decideTakeOver(token: string, targetPending: readonly unknown[] | undefined): 'settle' | 'reclaim' {
  return targetPending?.includes(token) ? 'settle' : 'reclaim';
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
    const found = await marks.findOne({ _id: input.markId } as Filter<KeyedDoc>);
    if (!found) throw new CountingBusyError('count mark vanished while being read');
    // The target stays the one the first claim chose, whichever event takes over.
    const target = typeof found[targetField] === 'string' ? (found[targetField] as string) : input.target;
    const mark = await withSettlement(marks, found, target);
    const decision = decideOnExistingMark(mark as unknown as MarkState, input.eventId, at);
    switch (decision.action) {
      case 'unpend':
        if (typeof mark.batchId === 'string') await settleToken(marks, targets, targetField, target, mark.batchId, at);
        else await unpend(target, input.markId);
        return undefined;
      case 'skip':
        return undefined;
      case 'retry':
        throw new CountingBusyError('this event is being counted by another delivery');
      case 'take-over': {
        const batchId = typeof mark.batchId === 'string' ? mark.batchId : undefined;
        if (batchId !== undefined) {
          // Claimed by a batch that crashed: its token on the target tells whether it applied.
          const t = await targets.findOne({ _id: target, pending: batchId } as Filter<KeyedDoc>, { projection: { _id: 1 } });
          if (t) {
            await settleToken(marks, targets, targetField, target, batchId, now());
            return undefined;
          }
        }
        const res = await marks.updateOne(
          { _id: input.markId, pending: true, until: mark.until } as Filter<KeyedDoc>, { $set: { until }, $unset: { batchId: '' } },
        );
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

/**
 * A batch's *settlement* on one target: the document that says every mark the
 * batch still holds on that target is finished (its apply there happened). It
 * lives among the marks under its own key, so one insert finishes a whole
 * batch on a target where a mark-by-mark finish cost one update per mark (and
 * a finish by `batchId` a scan of every mark, on stores that serve only `_id`
 * from an index). A mark whose claim carries the batch id and the target reads
 * as finished once the settlement exists; a mark taken over by another batch
 * carries that batch's id, so an old batch's settlement never finishes it.
 */
export function settlementIdOf(batchId: string, target: string): string {
  return `settled:${batchId}:${target}`;
}

function settlementDoc(targetField: string, batchId: string, target: string, at: Date): KeyedDoc {
  return { _id: settlementIdOf(batchId, target), batchId, [targetField]: target, pending: false, createdAt: at, doneAt: at };
}

/** The mark as it reads with its batch's settlement: a pending batch mark whose batch settled its target is finished. */
async function withSettlement(marks: Collection<KeyedDoc>, mark: KeyedDoc, target: string): Promise<KeyedDoc> {
  if (mark.pending !== true || typeof mark.batchId !== 'string') return mark;
  const settled = await marks.findOne({ _id: settlementIdOf(mark.batchId, target) } as Filter<KeyedDoc>, { projection: { _id: 1 } });
  return settled ? { ...mark, pending: false } : mark;
}

/**
 * The end of a counting whose token is still on the target although its apply
 * happened: settle the batch on that target (every mark it holds there is
 * finished), then pull the token. A batch's token covers every mark it holds on
 * the target (one apply counted them all), so its token may leave the list
 * only once none of them is pending; otherwise a later take-over of one would
 * find no token and count it again.
 */
async function settleToken(
  marks: Collection<KeyedDoc>, targets: Collection<KeyedDoc>, targetField: string, target: string, batchId: string, at: Date,
): Promise<void> {
  try {
    await marks.insertOne(settlementDoc(targetField, batchId, target, at));
  } catch (err) {
    // Settled already (by the batch itself or another taker).
    if (!isDuplicateKeyError(err)) throw err;
  }
  await targets.updateOne({ _id: target } as Filter<KeyedDoc>, { $pullAll: { pending: [batchId] } } as Document);
}

/*
 * Batched counting: the same two-phase protocol with a batch of effects as the
 * unit, so its cost is per batch and target instead of per effect.
 *
 * 1. claim: one `insertMany(ordered: false)` of the marks, each carrying the
 *    batch's id and lease; the ones that exist already are read back with one
 *    `find` and decided one by one (decideOnExistingMark).
 * 2. apply: per target ONE update: the batch's summed `$inc` and `$push` of
 *    the batch id, filtered on the id not being there yet.
 * 3. finish: one bulk update of the batch's marks by `_id` (compare-and-set on
 *    the lease), or with `settle` one insert of a settlement per target (see
 *    settlementIdOf).
 * 4. unpend: per target, `$pullAll` the batch id.
 *
 * Take-over of a crashed batch's mark (pending, lease over): the old batch's
 * token on the target says whether its apply happened. If it is there, the
 * count is in: finish the old batch's marks on that target and pull its token
 * (settleToken). If not, the apply never happened and never will (a holder
 * applies only with `marginMs` of lease left): the mark is claimed again under
 * the new batch and counted with it.
 */

/** One effect to count once, as part of a batch. */
export interface BatchEffect {
  /** The effect's key: the mark's `_id`. Of several effects with one key in a batch, the first counts. */
  readonly markId: string;
  readonly eventId: string;
  /** The `_id` of the document the counters live in. */
  readonly target: string;
  /** Counter field -> amount. */
  readonly inc: Readonly<Record<string, number>>;
  readonly markFields?: Document;
  /** Of the target (the first effect on a target gives them): set when an upsert creates it. */
  readonly setOnInsert?: Document;
  /** Of the target: set with the counters. */
  readonly set?: Document;
}

interface TargetApply {
  readonly inc: Record<string, number>;
  readonly setOnInsert?: Document;
  readonly set?: Document;
}

/** What a batch holds after its claim. */
export interface BatchClaim {
  readonly batchId: string;
  readonly until: Date;
  /** Per target, the summed counters of the effects this batch holds. */
  readonly targets: ReadonlyMap<string, TargetApply>;
  /** Marks this batch holds (inserted or taken over). */
  readonly held: number;
  /** Their ids: finish reaches each by `_id`, which every store serves from its primary key. */
  readonly heldIds: readonly string[];
  /** Effects counted before (by this event or another) or being counted by another event now. */
  readonly alreadyCounted: number;
  /** Events whose effect another delivery of the same event holds right now: deliver them again later. */
  readonly busy: ReadonlySet<string>;
}

export interface BatchCountResult {
  readonly counted: number;
  readonly alreadyCounted: number;
  /** Event ids to retry later (see BatchClaim.busy); everything else is counted exactly once. */
  readonly busy: ReadonlySet<string>;
}

export interface BatchCountOnce {
  /** Steps 1-4 in turn. */
  count(effects: readonly BatchEffect[]): Promise<BatchCountResult>;
  /** The steps, exposed so tests can stop between them as a crash would. */
  claim(effects: readonly BatchEffect[]): Promise<BatchClaim>;
  apply(claim: BatchClaim): Promise<void>;
  /** Whether every mark the batch held was still pending under it (false: a taker finished some). */
  finish(claim: BatchClaim): Promise<boolean>;
  unpend(claim: BatchClaim): Promise<void>;
}

/** The `_id`s an unordered insertMany refused as duplicates; any other failure is thrown. */
function duplicateIndexes(err: unknown): number[] {
  const raw = (err as { writeErrors?: unknown }).writeErrors;
  const list = (Array.isArray(raw) ? raw : raw ? [raw] : []) as { index?: number; code?: number; err?: { code?: number; index?: number } }[];
  if (list.length === 0) throw err;
  return list.map((w) => {
    const code = w.code ?? w.err?.code;
    const index = w.index ?? w.err?.index;
    if (code !== 11000 || typeof index !== 'number') throw err;
    return index;
  });
}

export function createBatchCountOnce(opts: {
  marks: Collection<KeyedDoc>;
  targets: Collection<KeyedDoc>;
  targetField?: string;
  upsert?: boolean;
  leaseMs?: number;
  marginMs?: number;
  now?: () => Date;
  /** A new batch id (default: random). */
  newBatchId?: () => string;
  /**
   * Finish a batch with one settlement per target (one insert for the batch) instead of an update of each mark.
   * Its marks then stay `pending: true` in their documents and read as finished through the settlement, so a
   * sweep of old marks must delete them whatever their `pending` (with their settlements, never before them).
   */
  settle?: boolean;
}): BatchCountOnce {
  const { marks, targets } = opts;
  const targetField = opts.targetField ?? 'target';
  const leaseMs = opts.leaseMs ?? DEFAULT_COUNT_LEASE_MS;
  const marginMs = Math.min(opts.marginMs ?? DEFAULT_COUNT_MARGIN_MS, leaseMs);
  const now = opts.now ?? (() => new Date());
  const newBatchId = opts.newBatchId ?? (() => `cb_${randomUUID().replace(/-/g, '')}`);

  async function claim(effects: readonly BatchEffect[]): Promise<BatchClaim> {
    const at = now();
    const until = new Date(at.getTime() + leaseMs);
    const batchId = newBatchId();
    const wanted = new Map<string, BatchEffect>();
    for (const e of effects) if (!wanted.has(e.markId)) wanted.set(e.markId, e);
    const candidates = [...wanted.values()];
    let alreadyCounted = effects.length - candidates.length;
    const busy = new Set<string>();
    const held: BatchEffect[] = [];

    let refused = new Set<number>();
    if (candidates.length > 0) {
      try {
        await marks.insertMany(candidates.map((e) => ({
          ...e.markFields, _id: e.markId, eventId: e.eventId, [targetField]: e.target, pending: true, until, batchId, createdAt: at,
        }) as KeyedDoc), { ordered: false });
      } catch (err) {
        refused = new Set(duplicateIndexes(err));
      }
    }
    const existing: BatchEffect[] = [];
    candidates.forEach((e, i) => (refused.has(i) ? existing : held).push(e));

    if (existing.length > 0) {
      // By `_id`, side by side: an `$in` filter is a scan of every mark on FerretDB.
      const found = new Map((await Promise.all(existing.map((e) => marks.findOne({ _id: e.markId } as Filter<KeyedDoc>))))
        .filter((m): m is KeyedDoc => m !== null).map((m) => [m._id, m]));
      const takeOvers: { effect: BatchEffect; mark: KeyedDoc; target: string; token: string }[] = [];
      const settle = new Map<string, { target: string; token: string; batch: boolean; single?: string }>();
      // Pending batch marks whose batch settled their target are finished (reads by `_id`, side by side).
      const settledOnes = new Map(await Promise.all([...found.values()].map(async (m) => {
        const target = typeof m[targetField] === 'string' ? (m[targetField] as string) : '';
        return [m._id, await withSettlement(marks, m, target)] as const;
      })));
      for (const e of existing) {
        const mark = settledOnes.get(e.markId);
        if (!mark) {
          busy.add(e.eventId);
          continue;
        }
        // The target stays the one the first claim chose, whichever event takes over.
        const target = typeof mark[targetField] === 'string' ? (mark[targetField] as string) : e.target;
        const oldBatch = typeof mark.batchId === 'string' ? mark.batchId : undefined;
        const token = tokenOf(mark as unknown as MarkState, e.markId);
        const decision = decideOnExistingMark(mark as unknown as MarkState, e.eventId, at);
        switch (decision.action) {
          case 'unpend':
            alreadyCounted++;
            settle.set(JSON.stringify([target, token]), { target, token, batch: oldBatch !== undefined });
            break;
          case 'skip':
            alreadyCounted++;
            break;
          case 'retry':
            busy.add(e.eventId);
            break;
          case 'take-over':
            takeOvers.push({ effect: e, mark, target, token });
            break;
        }
      }
      if (takeOvers.length > 0) {
        const ids = [...new Set(takeOvers.map((t) => t.target))];
        const pendingOf = new Map((await Promise.all(ids.map((id) => targets.findOne({ _id: id } as Filter<KeyedDoc>, { projection: { pending: 1 } }))))
          .filter((t): t is KeyedDoc => t !== null).map((t) => [t._id, Array.isArray(t.pending) ? (t.pending as unknown[]) : []]));
        for (const t of takeOvers) {
          if (decideTakeOver(t.token, pendingOf.get(t.target)) === 'settle') {
            // The crashed holder's apply happened: the count is in, only its end is missing.
            alreadyCounted++;
            settle.set(JSON.stringify([t.target, t.token]), { target: t.target, token: t.token, batch: t.mark.batchId !== undefined, single: t.effect.markId });
            continue;
          }
          const res = await marks.updateOne(
            { _id: t.effect.markId, pending: true, until: t.mark.until } as Filter<KeyedDoc>, { $set: { until, batchId } },
          );
          if (res.modifiedCount === 1) held.push({ ...t.effect, target: t.target });
          else busy.add(t.effect.eventId);
        }
      }
      for (const s of settle.values()) {
        if (s.batch) {
          await settleToken(marks, targets, targetField, s.target, s.token, at);
          continue;
        }
        // A single-effect counting (its own id as token): a taken-over one still needs its mark finished.
        if (s.single !== undefined) {
          await marks.updateOne({ _id: s.single, pending: true } as Filter<KeyedDoc>, { $set: { pending: false, doneAt: at } });
        }
        await targets.updateOne({ _id: s.target } as Filter<KeyedDoc>, { $pullAll: { pending: [s.token] } } as Document);
      }
    }

    const byTarget = new Map<string, TargetApply>();
    for (const e of held) {
      const t = byTarget.get(e.target) ?? { inc: {}, ...(e.setOnInsert ? { setOnInsert: e.setOnInsert } : {}), ...(e.set ? { set: e.set } : {}) };
      for (const [k, v] of Object.entries(e.inc)) t.inc[k] = (t.inc[k] ?? 0) + v;
      byTarget.set(e.target, t);
    }
    return { batchId, until, targets: byTarget, held: held.length, heldIds: held.map((e) => e.markId), alreadyCounted, busy };
  }

  async function apply(c: BatchClaim): Promise<void> {
    if (c.targets.size === 0) return;
    if (!mayApply(c.until, now(), marginMs)) throw new CountingBusyError('lease nearly over before the counters were applied');
    const ops = (upsert: boolean): AnyBulkWriteOperation<KeyedDoc>[] => [...c.targets].map(([target, a]) => {
      const update: Document = { $inc: a.inc, $push: { pending: c.batchId } };
      if (upsert && a.setOnInsert) update.$setOnInsert = a.setOnInsert;
      if (a.set) update.$set = a.set;
      return { updateOne: { filter: { _id: target, pending: { $ne: c.batchId } } as Filter<KeyedDoc>, update, upsert } };
    });
    if (!opts.upsert) {
      await bulkWriteInChunks(targets, ops(false));
      return;
    }
    try {
      await bulkWriteInChunks(targets, ops(true));
      return;
    } catch (err) {
      // A target that holds the batch id already (applied before a failure) or a race of two first
      // countings on an insert: again without upsert, where the filter tells them apart.
      if (!isDuplicateKeyError(err) && !hasOnlyDuplicateErrors(err)) throw err;
    }
    await bulkWriteInChunks(targets, ops(false));
  }

  async function finish(c: BatchClaim): Promise<boolean> {
    if (c.held === 0) return true;
    if (opts.settle) {
      // Every mark the batch still holds on a target is finished by that target's settlement; a mark taken over
      // meanwhile carries the taker's batch id, so this never finishes it.
      const at = now();
      try {
        await marks.insertMany([...c.targets.keys()].map((target) => settlementDoc(targetField, c.batchId, target, at)), { ordered: false });
        return true;
      } catch (err) {
        // A taker settled a target first (this batch's lease ran out after its apply).
        if (!hasOnlyDuplicateErrors(err)) throw err;
        return false;
      }
    }
    // By `_id`, not by `batchId`: FerretDB serves only `_id` from an index, and a filter on the
    // batch would read every mark ever written, once per batch.
    const doneAt = now();
    const res = await bulkWriteInChunks(marks, c.heldIds.map((id) => ({
      updateOne: {
        filter: { _id: id, batchId: c.batchId, pending: true, until: c.until } as Filter<KeyedDoc>,
        update: { $set: { pending: false, doneAt } },
      },
    })));
    return res.matchedCount === c.held;
  }

  async function unpend(c: BatchClaim): Promise<void> {
    if (c.targets.size === 0) return;
    await bulkWriteInChunks(targets, [...c.targets.keys()].map((target) => ({
      updateOne: { filter: { _id: target } as Filter<KeyedDoc>, update: { $pullAll: { pending: [c.batchId] } } as Document },
    })));
  }

  return {
    async count(effects) {
      const c = await claim(effects);
      if (c.held > 0) {
        await apply(c);
        await finish(c);
        // Safe even when a mark's lease ran out meanwhile: a taker that found our token finished
        // our marks on that target itself, and one that found none cannot exist, as we applied
        // with margin to spare. So after finish no mark of this batch is pending any more.
        await unpend(c);
      }
      return { counted: c.held, alreadyCounted: c.alreadyCounted, busy: c.busy };
    },
    claim,
    apply,
    finish,
    unpend,
  };
}

function hasOnlyDuplicateErrors(err: unknown): boolean {
  try {
    duplicateIndexes(err);
    return true;
  } catch {
    return false;
  }
}
