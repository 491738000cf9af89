import type { Logger } from '@mailfleet/kit';
import type { EmailRecord, EmailsRepository, MutateResult } from '../repositories/emails.repository.js';
import type { Holder, SendQueueRepository } from '../repositories/send-queue.repository.js';

/** The local worker's hand-off (see SendWorker.handoff): an email it holds but has not started can be withdrawn. */
export interface HandoffWithdrawal {
  withdraw(emailId: string): Holder | undefined;
}

/**
 * After a change to an email: point its queue entry at the email's next due
 * time, or drop the entry once nothing is left to send. Best effort by
 * design: a stale entry only makes a worker look at the email, which is the
 * truth, and fix the entry then.
 */
export async function syncQueueEntry(queue: SendQueueRepository, e: EmailRecord, logger: Logger, now: Date = new Date()): Promise<void> {
  try {
    if (e.sendState === 'PENDING') await queue.reschedule(e.id, e.nextAttemptAt ?? now);
    else await queue.remove(e.id);
  } catch (err) {
    logger.warn({ err, emailId: e.id }, 'could not update the send queue entry; a worker will fix it when it next looks');
  }
}

/**
 * Runs a change of a waiting email (cancel, reschedule, failing it) under the
 * lock of its queue entry, so it never overlaps a send: `busy` when a worker
 * holds the entry right now. An email this process's accept handed to its own
 * worker is held from the accept on; while the worker has not started it, it
 * is withdrawn from the hand-off here (synchronously, so the worker never
 * starts it) and its lease taken over, so the change wins as it would on an
 * unclaimed entry. The entry then follows the email.
 */
export async function withQueueLock(
  deps: { queue: SendQueueRepository; emails: EmailsRepository; logger: Logger; handoff?: HandoffWithdrawal | undefined },
  emailId: string,
  change: () => Promise<MutateResult | undefined>,
): Promise<{ busy: true } | { busy: false; result: MutateResult | undefined }> {
  // Should this write fail, the withdrawn entry stays leased to this worker until its lease ends, then any
  // worker claims it (a claim reads the email, the truth).
  const lock = await deps.queue.lockForChange(emailId, new Date(), undefined, deps.handoff?.withdraw(emailId));
  if (lock === 'busy') return { busy: true };
  let result: MutateResult | undefined;
  try {
    result = await change();
    return { busy: false, result };
  } finally {
    if (lock === 'locked' || result?.applied) {
      const current = result?.record ?? (await deps.emails.getById(emailId).catch(() => undefined));
      if (current) await syncQueueEntry(deps.queue, current, deps.logger);
      else await deps.queue.remove(emailId).catch(() => undefined);
    }
  }
}
