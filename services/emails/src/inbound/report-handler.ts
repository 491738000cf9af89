import { createHash } from 'node:crypto';
import { createGroupCommit, type Logger } from '@mailfleet/kit';
import type { BounceDetails } from '../domain/event-data.js';
import type { EmailRecord, EmailsRepository, MutateResult, Mutation } from '../repositories/emails.repository.js';
import type { SendQueueRepository } from '../repositories/send-queue.repository.js';
import type { DsnRecipient, InboundReport } from './reports.js';

export interface ReportHandlerDeps {
  readonly emails: EmailsRepository;
  readonly queue: SendQueueRepository;
  readonly classify: (r: DsnRecipient) => BounceDetails;
  readonly logger: Logger;
  readonly now?: () => Date;
}

type EventSpec = NonNullable<Mutation['events']>[number];

/** A report delivered twice (MTAs do repeat) is applied once: its hash is kept on the email. */
export function reportKey(raw: Buffer): string {
  return createHash('sha256').update(raw).digest('hex').slice(0, 32);
}

/**
 * Pure: what a delivery report does to an email.
 *
 * DSN (RFC 3464): `delivered`/`relayed`/`expanded` -> DELIVERED, `failed` ->
 * BOUNCED with the classified bounce (Permanent = hard, Transient = soft),
 * `delayed` -> DELIVERY_DELAYED. ARF (RFC 5965) -> COMPLAINED.
 *
 * A report about a recipient still pending proves that the relay accepted
 * the message: the worker that sent it has not recorded the 250 yet, or
 * crashed before it could. The recipient becomes accepted (SENT, before the
 * report's own event), so the email is never sent to it a second time.
 */
export function reportMutation(e: EmailRecord, report: InboundReport, key: string, classify: (r: DsnRecipient) => BounceDetails, now: Date): Mutation | null {
  if (e.reportKeys.includes(key)) return null;
  const events: EventSpec[] = [];
  const set: Record<string, unknown> = {};
  const unset: string[] = [];
  let pending = [...e.recipients.pending];
  const accepted = [...e.recipients.accepted];

  const named = report.kind === 'dsn'
    ? report.recipients.map((r) => r.recipient.toLowerCase())
    : [report.originalRecipient?.toLowerCase() ?? ''].filter(Boolean);
  const proven = named.filter((r) => pending.includes(r));
  if (proven.length > 0 || (e.sendState === 'PENDING' && named.length === 0 && report.kind === 'arf')) {
    const took = proven.length > 0 ? proven : pending;
    pending = pending.filter((r) => !took.includes(r));
    accepted.push(...took.filter((r) => !accepted.includes(r)));
    events.push({ status: 'SENT', extras: { details: { response: 'accepted by the relay (known from its delivery report)' } } });
    if (!e.sentAt) set.sentAt = now;
    set['recipients.pending'] = pending;
    set['recipients.accepted'] = accepted;
    if (pending.length === 0) {
      set.sendState = 'DONE';
      unset.push('nextAttemptAt');
    }
  }

  if (report.kind === 'dsn') {
    for (const r of report.recipients) {
      const to = [r.recipient.toLowerCase()];
      const details: Record<string, unknown> = {};
      if (r.diagnostic) details.diagnostic = r.diagnostic;
      if (r.status) details.deliveryStatus = r.status;
      if (r.remoteMta) details.remoteMta = r.remoteMta;
      if (r.action === 'delivered' || r.action === 'relayed' || r.action === 'expanded') {
        events.push({ status: 'DELIVERED', extras: { to, details } });
      } else if (r.action === 'failed') {
        events.push({ status: 'BOUNCED', extras: { to, bounce: classify(r), details } });
        if (!set.bouncedAt) {
          set.bouncedAt = now;
          set.bouncedEmail = to[0];
        }
      } else if (r.action === 'delayed') {
        events.push({ status: 'DELIVERY_DELAYED', extras: { to, details: { ...details, reason: r.diagnostic ?? 'delivery delayed downstream' } } });
      }
    }
  } else {
    const to = report.originalRecipient ? [report.originalRecipient.toLowerCase()] : [...e.toAddresses];
    const details: Record<string, unknown> = { feedbackType: report.feedbackType };
    if (report.userAgent) details.userAgent = report.userAgent;
    events.push({ status: 'COMPLAINED', extras: { to, details } });
    set.complainedAt = now;
    set.complainedEmail = to[0] ?? '';
  }
  if (events.length === 0) return { addReportKey: key };
  return { set, unset, events, addReportKey: key };
}

interface ReportItem {
  readonly emailId: string;
  readonly report: InboundReport;
  readonly key: string;
}

/**
 * `onReport` of the inbound SMTP listener. Reports that arrive within a few
 * milliseconds of each other are applied together (a group commit): one read
 * of their emails, one bulk write of the changes (each a compare-and-set on
 * the email's version, with its events in the same write), one removal of
 * the queue entries of emails they finished. The promise of each report
 * settles only once that write is done, so the listener answers 250 after
 * the report is durable. Throws only when the report could not be recorded
 * (the listener then answers 451 and the reporting MTA tries again); an email
 * that does not exist (deleted since) is acknowledged and forgotten.
 */
export function createReportHandler(deps: ReportHandlerDeps & { readonly lingerMs?: number }) {
  const now = deps.now ?? (() => new Date());
  const commit = createGroupCommit<ReportItem, void>({
    // Small bulks: FerretDB v1 holds a SQLite connection per statement of a bulk command until it ends.
    maxItems: 25,
    maxDelayMs: deps.lingerMs ?? 50,
    flush: async (items) => {
      // An email this process wrote lately (its send outcome, usually) is taken as it wrote it: the write below
      // is a compare-and-set on its version, so a stale record only loses and is read then.
      const found = new Map((await deps.emails.getManyById([...new Set(items.map((i) => i.emailId))], { recent: true })).map((e) => [e.id, e]));
      const known = items.filter((i) => found.has(i.emailId));
      for (const i of items) if (!found.has(i.emailId)) deps.logger.info({ emailId: i.emailId, kind: i.report.kind }, 'report for an unknown email ignored');
      // A worker may be sending one of these emails right now (the report beat its write of the relay's 250): the
      // report wins, and the worker's own write then finds the recipients no longer pending.
      const changes = known.map((i) => ({ initial: found.get(i.emailId)!, fn: (x: EmailRecord) => reportMutation(x, i.report, i.key, deps.classify, now()) }));
      let results: (MutateResult | undefined | Error)[];
      try {
        results = await deps.emails.mutateMany(changes, { now });
      } catch (err) {
        if (changes.length <= 1) throw err;
        // One statement may be what failed the bulk: each report is written again on its own (one already
        // written is recognised by its key), so only that report is answered 451.
        results = await Promise.all(changes.map((c) => deps.emails.mutateMany([c], { now }).then((r) => r[0], (e: unknown) => (e instanceof Error ? e : new Error(String(e))))));
      }
      const failed = new Map<ReportItem, Error>();
      const finished = new Set<string>();
      results.forEach((res, n) => {
        const item = known[n]!;
        if (res instanceof Error) {
          failed.set(item, res);
          return;
        }
        if (res?.applied && res.record.sendState === 'DONE' && found.get(item.emailId)!.sendState === 'PENDING') finished.add(item.emailId);
        if (res?.applied) deps.logger.debug({ emailId: item.emailId, kind: item.report.kind }, 'delivery report recorded');
      });
      if (finished.size > 0) await deps.queue.removeMany([...finished]).catch(() => undefined);
      return items.map((i) => failed.get(i));
    },
  });
  return async function onReport(emailId: string, report: InboundReport, raw: Buffer): Promise<void> {
    await commit.submit({ emailId, report, key: reportKey(raw) });
  };
}
