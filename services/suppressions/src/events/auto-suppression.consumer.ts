import {
  createBatchConsumer, subjectFor, type BatchHandler, type DurableConsumer, type Logger, type NatsHandle, type ServiceMetrics,
} from '@mailfleet/kit';
import { AUTO_EVENT_TYPES, isIgnored, isLift, MalformedEventError, planAutoSuppression, type AutoPlan } from '../domain/auto-suppression.js';
import type { ProcessedEventsRepository } from '../repositories/processed-events.repository.js';
import type { AutomaticWrite, SuppressionsRepository } from '../repositories/suppressions.repository.js';

/** Durable name shared by every replica: each event is applied by one of them. */
export const AUTO_SUPPRESSION_DURABLE = 'suppressions-auto';

export interface AutoSuppressionDeps {
  readonly suppressions: SuppressionsRepository;
  readonly processed: ProcessedEventsRepository;
  readonly now?: () => Date;
}

/** When the event happened: its envelope time, so an opt-in lifts exactly the opt-outs that came before it. */
function eventTime(createdAt: string, fallback: Date): Date {
  const t = new Date(createdAt);
  return Number.isNaN(t.getTime()) ? fallback : t;
}

/**
 * Applies a batch of events with three storage operations whatever its size:
 * one read of the event ids already applied, one ordered bulk write of every
 * suppression and lift (chunked for FerretDB), one insert recording the event
 * ids. Idempotent on the event id: an id already recorded changes nothing (a
 * redelivery after a DELETE does not bring the address back). The ids are
 * recorded only after the writes, so a crash in between leads to a redelivery
 * that rewrites the same values. A malformed event is terminated alone; the
 * rest of the batch is applied.
 */
export function createAutoSuppressionHandler(deps: AutoSuppressionDeps): BatchHandler {
  const now = deps.now ?? (() => new Date());
  return async (batch, { log }) => {
    const applied = await deps.processed.appliedAmong(batch.map(({ event }) => event.id));
    const poison = new Map<string, string>();
    const writes: AutomaticWrite[] = [];
    const record: { eventId: string; type: string; teamId: string }[] = [];
    let skipped = 0;
    for (const { event } of batch) {
      if (applied.has(event.id)) continue;
      let plan: AutoPlan;
      try {
        plan = planAutoSuppression(event.type, event.data);
      } catch (err) {
        if (!(err instanceof MalformedEventError)) throw err;
        poison.set(event.id, err.message);
        continue;
      }
      if (isIgnored(plan)) continue;
      if (!event.teamId) {
        poison.set(event.id, `${event.type}: teamId is required`);
        continue;
      }
      const at = eventTime(event.createdAt, now());
      if (isLift(plan)) {
        writes.push({ kind: 'lift', teamId: event.teamId, email: plan.lift, at });
      } else {
        skipped += plan.skipped.length;
        for (const email of plan.emails) writes.push({ kind: 'suppress', teamId: event.teamId, email, reason: plan.reason, source: plan.source, at });
      }
      record.push({ eventId: event.id, type: event.type, teamId: event.teamId });
    }
    if (skipped > 0) log.warn({ skipped }, 'recipients without a well-formed address were not suppressed');
    const res = await deps.suppressions.applyAutomatic(writes);
    await deps.processed.recordMany(record, now());
    if (record.length > 0) log.info({ events: record.length, written: res.upserted, lifted: res.lifted }, 'automatic suppressions applied');
    return poison.size > 0 ? { poison } : undefined;
  };
}

export function createAutoSuppressionConsumer(opts: AutoSuppressionDeps & { nats: NatsHandle; logger: Logger; metrics?: ServiceMetrics }): DurableConsumer {
  return createBatchConsumer({
    nats: opts.nats,
    durable: AUTO_SUPPRESSION_DURABLE,
    filterSubjects: AUTO_EVENT_TYPES.map(subjectFor),
    handler: createAutoSuppressionHandler(opts),
    logger: opts.logger,
    metrics: opts.metrics,
  });
}
