import { hostname } from 'node:os';
import { randomBase62, type Logger } from '@mailfleet/kit';
import type { IdentitySource, SuppressionChecker } from '../clients/upstreams.js';
import type { SmtpRelay } from '../clients/smtp.js';
import { domainOf } from '../domain/addresses.js';
import { retryDelayMs, type AttemptResult, type RecipientRefusal } from '../domain/delivery.js';
import type { BounceDetails } from '../domain/event-data.js';
import { verpAddress } from '../domain/verp.js';
import type { EmailRecord, EmailsRepository, Mutation } from '../repositories/emails.repository.js';
import type { QueueEntry, SendQueueRepository } from '../repositories/send-queue.repository.js';
import { composeMessage } from './compose.js';
import { syncQueueEntry } from './queue-sync.js';
import { failMutation, isPending, outcomeMutation, suppressMutation, whyNotSendable } from './outcomes.js';

export interface SendWorkerOptions {
  readonly emails: EmailsRepository;
  readonly queue: SendQueueRepository;
  readonly identities: IdentitySource;
  readonly suppressions: SuppressionChecker;
  readonly relay: SmtpRelay;
  readonly logger: Logger;
  readonly classify: (refusal: RecipientRefusal) => BounceDetails;
  readonly concurrency: number;
  readonly pollMs: number;
  readonly leaseMs: number;
  /** An attempt starts only with at least this much of the lease left (the SMTP timeouts of one attempt). */
  readonly minLeaseLeftMs: number;
  readonly maxAttempts: number;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  readonly verpSecret: string;
  readonly bounceDomain: string;
  readonly tracking: { readonly publicUrl: string; readonly key: string };
  /** Emails whose last suppression check is older than this are checked again just before sending. */
  readonly suppressionRecheckMs?: number;
  readonly now?: () => Date;
}

export interface SendWorker {
  start(): void;
  /** Wakes the idle claim loop: something was queued here. */
  wake(): void;
  /** Stops claiming and waits for every send in flight to be recorded. */
  stop(): Promise<void>;
  readonly owner: string;
}

/** How long to give an unreachable upstream (domains, suppressions) before trying the email again. */
const UPSTREAM_RETRY_MS = 5_000;

/**
 * The send queue's consumer. Every replica runs one; it claims the next due
 * email with one atomic findOneAndUpdate (lease + owner), so no two workers
 * anywhere hold the same email, and sends up to SEND_CONCURRENCY at once. The relay's answer is written
 * straight away, in one compare-and-set update that carries the status, the
 * stored event and the outbox entry; nothing else happens between the relay's
 * 250 and that write. See README "Exactly once" for the one window left.
 */
export function createSendWorker(opts: SendWorkerOptions): SendWorker {
  const owner = `${hostname()}-${process.pid}-${randomBase62(6)}`;
  const now = opts.now ?? (() => new Date());
  const recheckMs = opts.suppressionRecheckMs ?? 30_000;
  let stopping = false;
  const sleepers = new Set<() => void>();

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        sleepers.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms);
      sleepers.add(done);
    });
  }

  /** After a change: the entry follows the email (next due time, the attempt count kept), or goes once it is done. */
  const syncQueue = (e: EmailRecord) => syncQueueEntry(opts.queue, e, opts.logger, now());

  /** Writes an outcome; keeps trying while the database is unreachable, because the relay already acted. */
  async function persist(e: EmailRecord, entry: QueueEntry, fn: (x: EmailRecord) => Mutation | null): Promise<void> {
    let delay = 100;
    const giveUpAt = entry.leaseUntil.getTime() - 1_000;
    for (let attempt = 1; ; attempt++) {
      try {
        const res = await opts.emails.mutate(e.id, fn, { initial: e, now });
        if (res) await syncQueue(res.record);
        return;
      } catch (err) {
        if (Date.now() >= giveUpAt) {
          opts.logger.error({ err, emailId: e.id }, 'could not record a delivery outcome before the lease ran out; the email will be retried');
          return;
        }
        opts.logger.warn({ err, emailId: e.id, attempt }, 'recording a delivery outcome failed; retrying');
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 2_000);
      }
    }
  }

  /** Gives the entry back without counting the attempt (an upstream we need is unreachable, or too little lease is left). */
  async function release(e: EmailRecord, retryAt: Date): Promise<void> {
    await opts.queue.reschedule(e.id, retryAt, { uncount: true }).catch((err: unknown) => opts.logger.warn({ err, emailId: e.id }, 'could not give a queue entry back; its lease will expire'));
  }

  async function deliver(e: EmailRecord, entry: QueueEntry): Promise<void> {
    const log = opts.logger.child({ emailId: e.id, attempt: entry.attempt });
    if (entry.previousOwner && entry.previousOwner !== owner) {
      log.warn({ previousOwner: entry.previousOwner }, 'previous attempt never finished (worker crashed?) and no delivery report arrived during its lease: sending again');
    }

    let identity;
    try {
      const found = await opts.identities.lookup(e.teamId, domainOf(e.fromAddress));
      if (found.kind !== 'verified') {
        const reason = found.kind === 'unknown'
          ? `The sending domain ${domainOf(e.fromAddress)} no longer exists`
          : `The sending domain ${domainOf(e.fromAddress)} is not verified`;
        await persist(e, entry, (x) => failMutation(x, reason));
        return;
      }
      identity = found.identity;
      if (now().getTime() - e.suppressionCheckedAt.getTime() > recheckMs) {
        const suppressed = await opts.suppressions.suppressed(e.teamId, e.recipients.pending);
        const res = await opts.emails.mutate(e.id, (x) => suppressMutation(x, suppressed, now()), { initial: e, now });
        if (!res) {
          await opts.queue.remove(e.id);
          return;
        }
        e = res.record;
        if (!isPending(e)) {
          await syncQueue(e);
          return;
        }
      }
    } catch (err) {
      log.warn({ err }, 'an upstream needed to send is unavailable; the email waits');
      await release(e, new Date(now().getTime() + UPSTREAM_RETRY_MS));
      return;
    }

    let raw: Buffer;
    try {
      const [content, attachments] = await Promise.all([opts.emails.contentOf(e.id), e.hasAttachments ? opts.emails.attachmentsOf(e.id) : []]);
      raw = await composeMessage({ email: e, content, identity, attachments, tracking: opts.tracking, date: now() });
    } catch (err) {
      log.error({ err }, 'could not build the message');
      await persist(e, entry, (x) => failMutation(x, 'The message could not be built or signed', 'REJECTED'));
      return;
    }

    if (entry.leaseUntil.getTime() - now().getTime() < opts.minLeaseLeftMs) {
      // Not enough of the lease left for a whole attempt: better to let it go than to race a takeover.
      await release(e, now());
      return;
    }
    const result: AttemptResult = await opts.relay.send({
      envelopeFrom: verpAddress({ secret: opts.verpSecret, emailId: e.id, bounceDomain: opts.bounceDomain }),
      recipients: e.recipients.pending,
      raw,
      envelopeId: e.id,
    });
    // Nothing between the relay's answer and this write.
    const at = now();
    await persist(e, entry, (x) => outcomeMutation(x, result, {
      attempt: entry.attempt, now: at, maxAttempts: opts.maxAttempts, classify: opts.classify,
      retryDelayMs: (n) => retryDelayMs(n, opts.retryBaseMs, opts.retryMaxMs),
    }));
    log.debug({ result: result.kind }, 'delivery attempt recorded');
    if (e.hasAttachments) {
      const after = await opts.emails.getById(e.id).catch(() => undefined);
      if (after?.sendState === 'DONE') await opts.emails.deleteAttachments(e.id).catch(() => undefined);
    }
  }

  let slots: Promise<void>[] = [];

  /**
   * Claims the queue entry due first (its lease is the lock on sending the
   * email) and reads the email, the truth: a stale entry is fixed here.
   */
  async function claim(): Promise<{ record: EmailRecord; entry: QueueEntry } | 'idle' | 'skipped'> {
    const entry = await opts.queue.claim(owner, now(), opts.leaseMs);
    if (!entry) return 'idle';
    const e = await opts.emails.getById(entry.emailId);
    if (!e) {
      // Entries are written before their emails: a young orphan may be an accept still in progress.
      if (now().getTime() - entry.createdAt.getTime() < 60_000) await opts.queue.reschedule(entry.emailId, new Date(now().getTime() + 2_000), { uncount: true });
      else await opts.queue.remove(entry.emailId);
      return 'skipped';
    }
    const why = whyNotSendable(e, now());
    if (why === 'done') await opts.queue.remove(e.id);
    else if (why === 'not-due') await opts.queue.reschedule(e.id, e.nextAttemptAt ?? now(), { uncount: true });
    if (why) return 'skipped';
    return { record: e, entry };
  }

  function wakeAll(): void {
    for (const s of [...sleepers]) s();
  }

  /**
   * SEND_CONCURRENCY slots, each claiming and sending in turn, so claims (a
   * few round trips each) overlap as sends do. Only slot 0 polls an idle
   * queue; the others sleep until it (or a local accept) finds work, so an
   * idle replica costs one query per poll interval, not one per slot.
   */
  async function slot(index: number): Promise<void> {
    while (!stopping) {
      let claimed;
      try {
        claimed = await claim();
      } catch (err) {
        opts.logger.warn({ err }, 'claiming from the send queue failed');
        await sleep(opts.pollMs * 4);
        continue;
      }
      if (claimed === 'idle') {
        await sleep(index === 0 ? opts.pollMs : opts.pollMs * 20);
        continue;
      }
      if (claimed === 'skipped') continue;
      if (index === 0) wakeAll();
      try {
        await deliver(claimed.record, claimed.entry);
      } catch (err) {
        opts.logger.error({ err, emailId: claimed.record.id }, 'send failed unexpectedly; the lease will expire and the email be retried');
      }
    }
  }

  return {
    owner,
    start() {
      if (slots.length > 0) return;
      stopping = false;
      slots = Array.from({ length: opts.concurrency }, (_, i) => slot(i));
    },
    wake: wakeAll,
    async stop() {
      stopping = true;
      wakeAll();
      await Promise.all(slots);
      slots = [];
    },
  };
}
