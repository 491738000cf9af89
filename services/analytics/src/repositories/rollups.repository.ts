import { isDuplicateKeyError } from '@mailfleet/kit';
import type { Collection, Db, Document, Filter } from 'mongodb';
import {
  DEFAULT_LEASE_MS, DEFAULT_MARGIN_MS, decideOnExistingMark, mayApply,
} from '../domain/count-once.js';
import { METRICS, zeroCounts, type Counts, type EmailKind, type Metric } from '../domain/counts.js';
import type { Day, DayRange } from '../domain/days.js';

/** Where a counter lives: one rollup document per team, UTC day, sending domain and email kind. */
export interface RollupKey {
  readonly teamId: string;
  readonly day: Day;
  /** '' for emails without a domain. */
  readonly domainId: string;
  readonly kind: EmailKind;
}

/** Daily counters; `pending` holds the tokens of countings in flight (see domain/count-once.ts). */
interface RollupDoc extends Partial<Counts> {
  _id: string;
  teamId: string;
  day: Day;
  domainId: string;
  kind: EmailKind;
  pending?: string[];
}

/** Who counts an email's counter, and whether that is finished. */
interface MarkDoc {
  _id: string;
  teamId: string;
  emailId: string;
  metric: Metric;
  eventId: string;
  rollupId: string;
  pending: boolean;
  until: Date;
  createdAt: Date;
  doneAt?: Date;
}

/** A counting could not go on now (another delivery of the same event holds it, or the lease is nearly over); the event is retried. */
export class CountingBusyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CountingBusyError';
  }
}

export type CountOutcome = 'counted' | 'already counted';

export interface CountInput {
  readonly teamId: string;
  readonly emailId: string;
  readonly metric: Metric;
  readonly eventId: string;
  readonly rollup: RollupKey;
}

/** A claim held by the caller: apply and finish with it. */
export interface Claim {
  readonly markId: string;
  readonly rollupId: string;
  readonly until: Date;
}

export type GroupBy = 'day' | 'kind' | 'domainId';

export interface SumQuery {
  readonly teamId: string;
  /** Absent: all time. */
  readonly range?: DayRange | undefined;
  /** Absent: every domain (and emails without one). */
  readonly domainId?: string | undefined;
}

export interface RollupsRepository {
  ensureIndexes(): Promise<void>;
  /** Counts the email once for this counter, however often (and by however many events) it is asked. */
  countOnce(input: CountInput): Promise<CountOutcome>;
  /** Steps of countOnce, exposed so tests can stop between them as a crash would. Undefined: nothing to do for this event. */
  claim(input: CountInput): Promise<Claim | undefined>;
  apply(claim: Claim, metric: Metric): Promise<void>;
  finish(claim: Claim): Promise<void>;
  /**
   * Sums of the counters (all, or only `metrics`; the others read 0), in one group (key '') or by day,
   * kind or domain. The database sums the daily rollups; raw events are never read.
   */
  sum(query: SumQuery, groupBy?: GroupBy, metrics?: readonly Metric[]): Promise<Map<string, Counts>>;
  /** Deletes finished marks created before `before`: a later event for such an email counts again. */
  sweepMarks(before: Date): Promise<number>;
}

export function rollupIdOf(k: RollupKey): string {
  return JSON.stringify([k.teamId, k.day, k.domainId, k.kind]);
}

function rollupKeyOf(id: string): RollupKey {
  const [teamId, day, domainId, kind] = JSON.parse(id) as [string, Day, string, EmailKind];
  return { teamId, day, domainId, kind };
}

export function markIdOf(teamId: string, emailId: string, metric: Metric): string {
  return JSON.stringify([teamId, emailId, metric]);
}

export function createRollupsRepository(db: Db, opts: { leaseMs?: number; marginMs?: number; now?: () => Date } = {}): RollupsRepository {
  const rollups: Collection<RollupDoc> = db.collection<RollupDoc>('daily_rollups');
  const marks: Collection<MarkDoc> = db.collection<MarkDoc>('count_marks');
  const leaseMs = opts.leaseMs ?? DEFAULT_LEASE_MS;
  const marginMs = Math.min(opts.marginMs ?? DEFAULT_MARGIN_MS, leaseMs);
  const now = opts.now ?? (() => new Date());

  async function unpend(rollupId: string, token: string): Promise<void> {
    await rollups.updateOne({ _id: rollupId }, { $pullAll: { pending: [token] } });
  }

  async function claim(input: CountInput): Promise<Claim | undefined> {
    const markId = markIdOf(input.teamId, input.emailId, input.metric);
    const rollupId = rollupIdOf(input.rollup);
    const at = now();
    const until = new Date(at.getTime() + leaseMs);
    try {
      await marks.insertOne({
        _id: markId, teamId: input.teamId, emailId: input.emailId, metric: input.metric, eventId: input.eventId, rollupId,
        pending: true, until, createdAt: at,
      });
      return { markId, rollupId, until };
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
    }
    const mark = await marks.findOne({ _id: markId });
    if (!mark) throw new CountingBusyError('count mark vanished while being read');
    const decision = decideOnExistingMark(mark, input.eventId, at);
    switch (decision.action) {
      case 'unpend':
        await unpend(mark.rollupId, markId);
        return undefined;
      case 'skip':
        return undefined;
      case 'retry':
        throw new CountingBusyError('this event is being counted by another delivery');
      case 'take-over': {
        // The rollup stays the one the first claim chose, whichever event takes over.
        const res = await marks.updateOne({ _id: markId, pending: true, until: mark.until }, { $set: { until } });
        if (res.modifiedCount !== 1) throw new CountingBusyError('another delivery took the counting over first');
        return { markId, rollupId: mark.rollupId, until };
      }
    }
  }

  async function apply(c: Claim, metric: Metric): Promise<void> {
    if (!mayApply(c.until, now(), marginMs)) throw new CountingBusyError('lease nearly over before the counter was applied');
    const key = rollupKeyOf(c.rollupId);
    const update = {
      $inc: { [metric]: 1 },
      $push: { pending: c.markId },
      $setOnInsert: { teamId: key.teamId, day: key.day, domainId: key.domainId, kind: key.kind },
    } as Document;
    const filter: Filter<RollupDoc> = { _id: c.rollupId, pending: { $ne: c.markId } };
    try {
      await rollups.updateOne(filter, update, { upsert: true });
      return;
    } catch (err) {
      // The rollup exists and holds the token already (applied before a crash), or two first
      // countings of the day raced on the insert: retry without upsert to tell them apart.
      if (!isDuplicateKeyError(err)) throw err;
    }
    await rollups.updateOne(filter, update);
  }

  async function finish(c: Claim): Promise<void> {
    const res = await marks.updateOne({ _id: c.markId, pending: true, until: c.until }, { $set: { pending: false, doneAt: now() } });
    // Lost the lease meanwhile: whoever took over finishes (its step 2 finds the token and adds nothing).
    if (res.matchedCount === 1) await unpend(c.rollupId, c.markId);
  }

  return {
    async ensureIndexes() {
      await rollups.createIndex({ teamId: 1, day: 1 }, { name: 'team_day' });
      await rollups.createIndex({ teamId: 1, domainId: 1, day: 1 }, { name: 'team_domain_day' });
      await marks.createIndex({ createdAt: 1 }, { name: 'created' });
    },

    async countOnce(input) {
      const c = await claim(input);
      if (!c) return 'already counted';
      await apply(c, input.metric);
      await finish(c);
      return 'counted';
    },

    claim,
    apply,
    finish,

    async sum(query, groupBy, metrics = METRICS) {
      const match: Filter<RollupDoc> = { teamId: query.teamId };
      if (query.range) match.day = query.range.from ? { $gte: query.range.from, $lte: query.range.to } : { $lte: query.range.to };
      if (query.domainId !== undefined) match.domainId = query.domainId;
      const _id = groupBy ? `$${groupBy}` : null;
      // One accumulator per aggregation: FerretDB v1 answers 0 for every `$sum` of a `$group` but the first.
      const perMetric = await Promise.all(metrics.map(async (m) => ({
        m, rows: await rollups.aggregate<{ _id: unknown; v: unknown }>([{ $match: match }, { $group: { _id, v: { $sum: `$${m}` } } }]).toArray(),
      })));
      const out = new Map<string, Counts>();
      for (const { m, rows } of perMetric) {
        for (const row of rows) {
          const key = row._id === null || row._id === undefined ? '' : String(row._id);
          const c = out.get(key) ?? zeroCounts();
          c[m] = typeof row.v === 'number' && Number.isFinite(row.v) ? row.v : 0;
          out.set(key, c);
        }
      }
      return out;
    },

    async sweepMarks(before) {
      return (await marks.deleteMany({ pending: false, createdAt: { $lt: before } })).deletedCount;
    },
  };
}
