import { createHash } from 'node:crypto';
import type { Logger } from '@mailfleet/kit';
import type { BounceDetails } from '../domain/event-data.js';
import type { EmailRecord, EmailsRepository, Mutation } from '../repositories/emails.repository.js';
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

/**
 * `onReport` of the inbound SMTP listener. Throws only when the report could
 * not be recorded (the listener then answers 451 and the reporting MTA tries
 * again); an email that does not exist (deleted since) is acknowledged and
 * forgotten.
 */
export function createReportHandler(deps: ReportHandlerDeps) {
  const now = deps.now ?? (() => new Date());
  return async function onReport(emailId: string, report: InboundReport, raw: Buffer): Promise<void> {
    const e = await deps.emails.getById(emailId);
    if (!e) {
      deps.logger.info({ emailId, kind: report.kind }, 'report for an unknown email ignored');
      return;
    }
    // A worker may be sending this email right now (the report beat its write of the relay's 250): the report
    // wins, and the worker's own write then finds the recipients no longer pending.
    const key = reportKey(raw);
    const res = await deps.emails.mutate(emailId, (x) => reportMutation(x, report, key, deps.classify, now()), { initial: e, now });
    if (res?.applied) {
      if (res.record.sendState === 'DONE' && e.sendState === 'PENDING') await deps.queue.remove(emailId).catch(() => undefined);
      deps.logger.debug({ emailId, kind: report.kind }, 'delivery report recorded');
    }
  };
}
