import { createBatchCountOnce, createCountOnce, type BatchCountResult, type CountClaim, type CountOutcome, type KeyedDoc } from '@mailfleet/kit';
import type { Collection, Db, Filter } from 'mongodb';
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

/** Daily counters; `pending` holds the marks of countings in flight (see the kit's count-once.ts). */
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

export interface CountInput {
  readonly teamId: string;
  readonly emailId: string;
  readonly metric: Metric;
  readonly eventId: string;
  readonly rollup: RollupKey;
}

/** A claim held by the caller: apply and finish with it (`target` is the rollup id). */
export type Claim = CountClaim;

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
  /**
   * countOnce for a whole batch of countings at once: one claim, one apply per rollup,
   * one finish and one unpend per rollup (the kit's batched count-once). `busy` names
   * events another delivery of the same event is counting right now: retry them later.
   */
  countBatch(inputs: readonly CountInput[]): Promise<BatchCountResult>;
  /** Steps of countOnce, exposed so tests can stop between them as a crash would. Undefined: nothing to do for this event. */
  claim(input: CountInput): Promise<Claim | undefined>;
  apply(claim: Claim, metric: Metric): Promise<void>;
  finish(claim: Claim): Promise<void>;
  /**
   * Sums of the counters (all, or only `metrics`; the others read 0), in one group (key '') or by day,
   * kind or domain. The database sums the daily rollups; raw events are never read.
   */
  sum(query: SumQuery, groupBy?: GroupBy, metrics?: readonly Metric[]): Promise<Map<string, Counts>>;
  /** Deletes marks (and settlements) created before `before`: a later event for such an email counts again. */
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
  const now = opts.now ?? (() => new Date());

  const counting = createCountOnce({
    marks: marks as unknown as Collection<KeyedDoc>, targets: rollups as unknown as Collection<KeyedDoc>,
    targetField: 'rollupId', upsert: true, ...(opts.leaseMs !== undefined ? { leaseMs: opts.leaseMs } : {}),
    ...(opts.marginMs !== undefined ? { marginMs: opts.marginMs } : {}), now,
  });

  // A batch is finished by one settlement per rollup (one insert), not an update of each of its marks: on
  // FerretDB each of those updates is a statement of its own, and they were most of a batch's time.
  const batchCounting = createBatchCountOnce({
    marks: marks as unknown as Collection<KeyedDoc>, targets: rollups as unknown as Collection<KeyedDoc>,
    targetField: 'rollupId', upsert: true, settle: true, ...(opts.leaseMs !== undefined ? { leaseMs: opts.leaseMs } : {}),
    ...(opts.marginMs !== undefined ? { marginMs: opts.marginMs } : {}), now,
  });

  function claimInput(input: CountInput) {
    return {
      markId: markIdOf(input.teamId, input.emailId, input.metric), eventId: input.eventId, target: rollupIdOf(input.rollup),
      markFields: { teamId: input.teamId, emailId: input.emailId, metric: input.metric },
    };
  }

  function applyInput(target: string, metric: Metric) {
    const key = rollupKeyOf(target);
    return { inc: { [metric]: 1 }, setOnInsert: { teamId: key.teamId, day: key.day, domainId: key.domainId, kind: key.kind } };
  }

  return {
    async ensureIndexes() {
      await rollups.createIndex({ teamId: 1, day: 1 }, { name: 'team_day' });
      await rollups.createIndex({ teamId: 1, domainId: 1, day: 1 }, { name: 'team_domain_day' });
      await marks.createIndex({ createdAt: 1 }, { name: 'created' });
    },

    async countOnce(input) {
      return counting.count({ ...claimInput(input), ...applyInput(rollupIdOf(input.rollup), input.metric) });
    },

    async countBatch(inputs) {
      return batchCounting.count(inputs.map((input) => ({ ...claimInput(input), ...applyInput(rollupIdOf(input.rollup), input.metric) })));
    },

    claim: (input) => counting.claim(claimInput(input)),
    apply: (c, metric) => counting.apply(c, applyInput(c.target, metric)),
    finish: (c) => counting.finish(c),

    async sum(query, groupBy, metrics = METRICS) {
      const match: Filter<RollupDoc> = { teamId: query.teamId };
      if (query.range) match.day = query.range.from ? { $gte: query.range.from, $lte: query.range.to } : { $lte: query.range.to };
      if (query.domainId !== undefined) match.domainId = query.domainId;
      const group: Record<string, unknown> = { _id: groupBy ? `$${groupBy}` : null };
      for (const m of metrics) group[m] = { $sum: `$${m}` };
      const rows = await rollups.aggregate<Record<string, unknown>>([{ $match: match }, { $group: group }]).toArray();
      const out = new Map<string, Counts>();
      for (const row of rows) {
        const key = row['_id'] === null || row['_id'] === undefined ? '' : String(row['_id']);
        const c = out.get(key) ?? zeroCounts();
        for (const m of metrics) {
          const v = row[m];
          c[m] = typeof v === 'number' && Number.isFinite(v) ? v : 0;
        }
        out.set(key, c);
      }
      return out;
    },

    async sweepMarks(before) {
      // Whatever `pending` says: a batch's marks stay pending in their documents and are finished by its
      // settlements, which are younger than they are, so a cutoff never takes a settlement and leaves its marks.
      // A counting in flight is minutes old at most, far inside any retention.
      return (await marks.deleteMany({ createdAt: { $lt: before } })).deletedCount;
    },
  };
}
