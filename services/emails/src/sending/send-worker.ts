import { hostname } from 'node:os';
import { createGroupCommit, ID_IN_CHUNK, randomBase62, type Logger } from '@mailfleet/kit';
import type { IdentitySource, SuppressionChecker } from '../clients/upstreams.js';
import type { SmtpRelay } from '../clients/smtp.js';
import { domainOf } from '../domain/addresses.js';
import { retryDelayMs, type AttemptResult, type RecipientRefusal } from '../domain/delivery.js';
import type { BounceDetails } from '../domain/event-data.js';
import { verpAddress } from '../domain/verp.js';
import type { EmailContent, EmailRecord, EmailsRepository, MutateResult, Mutation } from '../repositories/emails.repository.js';
import type { HeldLease, Holder, QueueEntry, SendQueueRepository } from '../repositories/send-queue.repository.js';
import { composeMessage, createSigningKeys } from './compose.js';
import { failMutation, isPending, outcomeMutation, suppressMutation, whyNotSendable } from './outcomes.js';

export interface SendWorkerOptions {
  readonly emails: EmailsRepository;
  readonly queue: SendQueueRepository;
  readonly identities: IdentitySource;
  readonly suppressions: SuppressionChecker;
  readonly relay: SmtpRelay;
  readonly logger: Logger;
  readonly classify: (refusal: RecipientRefusal) => BounceDetails;
  /** Emails of one batch handed to the relay at once. */
  readonly concurrency: number;
  /** Queue entries one claim takes. */
  readonly batchSize?: number;
  /** How long the relay's first answer waits for others to share its bulk write. */
  readonly outcomeLingerMs?: number;
  /** How long the queue entry of a finished email waits for others to share its delete. */
  readonly removalLingerMs?: number;
  readonly pollMs: number;
  /**
   * While emails handed over by local accepts keep the worker busy, how often it still scans the queue (for
   * schedules come due, retries, entries inserted unleased, and expired leases of other workers).
   */
  readonly busyPollMs?: number;
  /** Emails local accepts may hand over that wait here at most (0: none; every entry is then claimed). */
  readonly handoffMax?: number;
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

/** Places in the local hand-off reserved by one accept write, with the lease to write on their entries. */
export interface HandoffReservation {
  readonly count: number;
  readonly lease: HeldLease;
  /**
   * The write is over: `written` are the entries inserted with the lease (they go to the worker now); `giveBack`
   * those inserted with it whose write then failed (given back to the queue). Frees the rest of the places.
   */
  settle(written: readonly { emailId: string; due: Date }[], giveBack?: readonly string[]): void;
}

export interface SendHandoff {
  /** Reserves up to `n` places (0 while stopping or full). Each reservation must be settled. */
  reserve(n: number, now: Date): HandoffReservation;
  /** Takes back an email handed over and not started yet (a change of it wins): who held it, else undefined. */
  withdraw(emailId: string): Holder | undefined;
}

export interface SendWorker {
  start(): void;
  /** Where this process's accepts hand their due emails over, already leased to this worker (no claim). */
  readonly handoff: SendHandoff;
  /** Something due was queued here without a hand-off (or came due): a loop scans the queue at once. */
  wake(): void;
  /** Stops claiming and waits for every send in flight to be recorded. */
  stop(): Promise<void>;
  readonly owner: string;
}

/** How long to give an unreachable upstream (domains, suppressions) before trying the email again. */
const UPSTREAM_RETRY_MS = 5_000;
/**
 * Batches claimed and sent at once per replica: while one batch's last sends and outcomes finish, the next
 * is already claimed and sending, so the relay is never idle waiting on the store.
 */
const BATCHES_IN_FLIGHT = 2;
/** Default of `busyPollMs`. */
const BUSY_POLL_MS = 5_000;

/** Until when the claim of a batch holds its entries (extended while the batch runs). */
interface Lease {
  until: number;
}

/** Statements per bulk write (see the outcomes' group commit). */
const MAX_BULK = 25;
/** Default of `removalLingerMs`. */
export const REMOVAL_LINGER_MS = 250;

/** An outcome waiting for its bulk write: the email as the worker knew it and the change to make. */
interface OutcomeItem {
  readonly initial: EmailRecord;
  readonly fn: (e: EmailRecord) => Mutation | null;
}

/** Email ids by the claim that holds their entries (a hand-off's own, or a scan's). */
function idsByClaim(entries: readonly QueueEntry[]): Map<string, string[]> {
  const byClaim = new Map<string, string[]>();
  for (const e of entries) {
    const ids = byClaim.get(e.claimId);
    if (ids) ids.push(e.emailId);
    else byClaim.set(e.claimId, [e.emailId]);
  }
  return byClaim;
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}

async function mapLimit<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const run = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, run));
}

/**
 * The send queue's consumer. Every replica runs one; it claims a batch of due
 * entries with one bulk update (lease + owner), so no two workers anywhere hold
 * the same email, takes their emails and contents from what this process's
 * accept wrote when the entry proves them unchanged (else reads them), and hands
 * them to the pooled relay, a bounded number at once. Each relay answer is
 * written as soon as it comes, through a group commit: the answers that come
 * within a few milliseconds share one bulk write on `emails` (each still a
 * compare-and-set on the email's version, carrying the status, the stored
 * event and the outbox entry), then one write reschedules the entries of
 * retries; the entries of finished emails are removed together, a few times a
 * second (`removals`). Nothing else happens between the relay's 250 and the
 * bulk write on `emails`. See README
 * "Exactly once" for the one window left.
 */
export function createSendWorker(opts: SendWorkerOptions): SendWorker {
  const owner = `${hostname()}-${process.pid}-${randomBase62(6)}`;
  const now = opts.now ?? (() => new Date());
  const recheckMs = opts.suppressionRecheckMs ?? 30_000;
  const batchSize = opts.batchSize ?? 100;
  const signingKeys = createSigningKeys();
  const handoffMax = opts.handoffMax ?? 0;
  const busyPollMs = opts.busyPollMs ?? BUSY_POLL_MS;
  let stopping = false;
  const sleepers = new Set<() => void>();
  /**
   * The local hand-off: entries leased to this worker and not started, in order: those this process's accepts
   * inserted already leased (under one claim id of the worker's own), and a scan's claim beyond the batch it
   * sends at once (under that claim's id). `reserved` places are promised to accept writes under way. Only
   * memory: after a crash the leases end and any worker claims the entries (previousOwner set).
   */
  const handoffClaimId = randomBase62(12);
  const waiting = new Map<string, QueueEntry>();
  let reserved = 0;
  let handoffTimer: ReturnType<typeof setInterval> | undefined;
  const givingBack = new Set<Promise<void>>();
  /** When a loop last scanned the queue. */
  let lastScanAt = 0;
  /** Due entries may wait in the queue unleased (wake(), or a scan that took all it asked for): scan without waiting. */
  let scanWanted = true;

  /** Gives back entries held by `claimId` (the hand-off's own by default; a claim's surplus has its own). */
  function giveBackHeld(ids: readonly string[], claimId = handoffClaimId): void {
    if (ids.length === 0) return;
    const p = opts.queue.giveBack(claimId, ids, now())
      .catch((err: unknown) => opts.logger.warn({ err, count: ids.length }, 'could not give handed-over entries back; their leases will expire'))
      .finally(() => givingBack.delete(p));
    givingBack.add(p);
  }

  /** Gives back waiting entries, per claim that holds them. */
  function giveBackWaiting(entries: readonly QueueEntry[]): void {
    for (const [claimId, ids] of idsByClaim(entries)) giveBackHeld(ids, claimId);
  }

  const handoff: SendHandoff = {
    reserve(n, at) {
      const count = stopping ? 0 : Math.max(0, Math.min(n, handoffMax - waiting.size - reserved));
      reserved += count;
      const lease: HeldLease = { owner, claimId: handoffClaimId, until: new Date(at.getTime() + opts.leaseMs) };
      let open = true;
      return {
        count, lease,
        settle(written, giveBack = []) {
          if (!open) return;
          open = false;
          reserved -= count;
          if (stopping) {
            // Stop gave back what waited already; these came after it.
            giveBackHeld([...written.map((w) => w.emailId), ...giveBack]);
            return;
          }
          giveBackHeld(giveBack);
          for (const w of written.slice(0, count)) {
            waiting.set(w.emailId, {
              emailId: w.emailId, due: w.due, createdAt: at, attempt: 1, leaseUntil: lease.until, claimId: handoffClaimId, untouched: true,
            });
          }
          if (written.length > 0) wakeAll();
        },
      };
    },
    withdraw(emailId) {
      const e = waiting.get(emailId);
      if (!e) return undefined;
      waiting.delete(emailId);
      return { owner, claimId: e.claimId };
    },
  };

  /**
   * Takes up to a batch of handed-over entries in accept order: from here on they are started (a change finds
   * them busy, as a claimed batch). One whose lease is too short for an attempt (its extensions failed) is not
   * sent but given back, while the lease still holds it.
   */
  function takeHandedOver(): QueueEntry[] {
    const out: QueueEntry[] = [];
    const late: QueueEntry[] = [];
    const at = now().getTime();
    for (const [id, e] of waiting) {
      if (out.length >= batchSize) break;
      waiting.delete(id);
      if (e.leaseUntil.getTime() - at < opts.minLeaseLeftMs) late.push(e);
      else out.push(e);
    }
    giveBackWaiting(late);
    return out;
  }

  /** Extends the leases of entries that may come from several claims (a hand-off, a claim's surplus): one write per claim. */
  async function extendAll(entries: readonly QueueEntry[], until: Date): Promise<void> {
    await Promise.all([...idsByClaim(entries)].map(([claimId, ids]) => opts.queue.extendLeases(claimId, ids, until)));
  }

  /** How often the leases of a running batch, and of the emails waiting in the hand-off, are extended. */
  function heartbeatMs(): number {
    return Math.max(opts.leaseMs / 3, 250);
  }

  /**
   * Keeps the leases of the emails waiting in the hand-off, every heartbeat: so they never have less than a
   * lease minus one heartbeat left, as much as a claimed batch before its first extension.
   */
  function extendWaiting(): void {
    const due = [...waiting.values()];
    if (due.length === 0) return;
    const until = new Date(now().getTime() + opts.leaseMs);
    extendAll(due, until)
      .then(() => {
        for (const { emailId: id } of due) {
          const e = waiting.get(id);
          if (e) waiting.set(id, { ...e, leaseUntil: until });
        }
      })
      .catch((err: unknown) => opts.logger.warn({ err }, 'could not extend the leases of handed-over emails'));
  }

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

  /**
   * The entries of finished emails, removed together: one delete of up to ID_IN_CHUNK ids rather than one per bulk
   * of relay answers. Waiting costs nothing: the entry of a finished email is a stale pointer, which the lease this
   * worker holds keeps others off meanwhile, and which any worker that claims it later (after a crash) finds done
   * and removes. `stop` writes what waits.
   */
  const removals = createGroupCommit<string, undefined>({
    maxItems: ID_IN_CHUNK,
    maxDelayMs: opts.removalLingerMs ?? REMOVAL_LINGER_MS,
    flush: async (ids) => {
      await opts.queue.removeMany(ids);
      return ids.map(() => undefined);
    },
  });

  /** After changes: each entry follows its email (next due time, the attempt count kept), or goes once it is done. Best effort: a stale entry only makes a worker look at the email again. */
  async function settleQueue(records: readonly EmailRecord[]): Promise<void> {
    const at = now();
    const done = records.filter((r) => r.sendState !== 'PENDING').map((r) => r.id);
    const waiting = records.filter((r) => r.sendState === 'PENDING').map((r) => ({ emailId: r.id, due: r.nextAttemptAt ?? at }));
    if (done.length > 0) {
      Promise.all(done.map((id) => removals.submit(id)))
        .catch((err: unknown) => opts.logger.warn({ err, count: done.length }, 'could not remove send queue entries of finished emails; a worker will when it next looks'));
    }
    try {
      await opts.queue.rescheduleMany(waiting);
    } catch (err) {
      opts.logger.warn({ err, count: waiting.length }, 'could not update send queue entries; a worker will fix them when it next looks');
    }
  }

  /** The outcomes that arrive together: one bulk write on the emails, then one settle of their queue entries. */
  const outcomes = createGroupCommit<OutcomeItem, MutateResult | undefined>({
    // Small bulks: FerretDB v1 holds a SQLite connection for every statement of a bulk command until the
    // command ends (pool of 100), and large bulks under concurrent reads stall the whole database.
    maxItems: MAX_BULK,
    maxDelayMs: opts.outcomeLingerMs ?? 20,
    flush: async (items) => {
      let results: (MutateResult | undefined | Error)[];
      try {
        results = await opts.emails.mutateMany(items, { now });
      } catch (err) {
        if (items.length === 1) throw err;
        // One statement may be what failed the bulk: each is written again on its own (one already written is
        // recognised by what it wrote), so only that one fails and is retried by its caller.
        results = await Promise.all(items.map((i) => opts.emails.mutateMany([i], { now }).then((r) => r[0], (e: unknown) => asError(e))));
      }
      // Also the emails left unchanged (a report finished them first): their entries follow them all the same.
      const changed = results.filter((r): r is MutateResult => r !== undefined && !(r instanceof Error)).map((r) => r.record);
      const gone = items.filter((_, i) => results[i] === undefined).map((i) => i.initial.id);
      await settleQueue(changed);
      if (gone.length > 0) await opts.queue.removeMany(gone).catch(() => undefined);
      return results;
    },
  });

  /** Writes an outcome; keeps trying while the database is unreachable, because the relay already acted. */
  async function persist(e: EmailRecord, lease: Lease, fn: (x: EmailRecord) => Mutation | null): Promise<MutateResult | undefined> {
    let delay = 100;
    for (let attempt = 1; ; attempt++) {
      try {
        return await outcomes.submit({ initial: e, fn });
      } catch (err) {
        if (Date.now() >= lease.until - 1_000) {
          opts.logger.error({ err, emailId: e.id }, 'could not record a delivery outcome before the lease ran out; the email will be retried');
          return undefined;
        }
        opts.logger.warn({ err, emailId: e.id, attempt }, 'recording a delivery outcome failed; retrying');
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 2_000);
      }
    }
  }

  /** Gives the entry back without counting the attempt (an upstream we need is unreachable, or too little lease is left). */
  async function release(id: string, retryAt: Date): Promise<void> {
    await opts.queue.reschedule(id, retryAt, { uncount: true }).catch((err: unknown) => opts.logger.warn({ err, emailId: id }, 'could not give a queue entry back; its lease will expire'));
  }

  async function deliver(e: EmailRecord, entry: QueueEntry, lease: Lease, content: EmailContent): Promise<void> {
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
        await persist(e, lease, (x) => failMutation(x, reason));
        return;
      }
      identity = found.identity;
    } catch (err) {
      log.warn({ err }, 'an upstream needed to send is unavailable; the email waits');
      await release(e.id, new Date(now().getTime() + UPSTREAM_RETRY_MS));
      return;
    }

    let raw: Buffer;
    try {
      const attachments = e.hasAttachments ? await opts.emails.attachmentsOf(e.id) : [];
      raw = await composeMessage({ email: e, content, identity, attachments, tracking: opts.tracking, date: now(), signingKeys });
    } catch (err) {
      log.error({ err }, 'could not build the message');
      await persist(e, lease, (x) => failMutation(x, 'The message could not be built or signed', 'REJECTED'));
      return;
    }

    if (lease.until - now().getTime() < opts.minLeaseLeftMs) {
      // Not enough of the lease left for a whole attempt: better to let it go than to race a takeover.
      await release(e.id, now());
      return;
    }
    const result: AttemptResult = await opts.relay.send({
      envelopeFrom: verpAddress({ secret: opts.verpSecret, emailId: e.id, bounceDomain: opts.bounceDomain }),
      recipients: e.recipients.pending,
      raw,
      envelopeId: e.id,
    });
    // Nothing between the relay's answer and this write (the group commit waits a few milliseconds at most).
    const at = now();
    const res = await persist(e, lease, (x) => (
      // This attempt's answer is on the email already (a write whose reply was lost, then retried): not twice.
      x.version !== e.version && x.attempts >= entry.attempt ? null : outcomeMutation(x, result, {
        attempt: entry.attempt, now: at, maxAttempts: opts.maxAttempts, classify: opts.classify,
        retryDelayMs: (n) => retryDelayMs(n, opts.retryBaseMs, opts.retryMaxMs),
      })));
    log.debug({ result: result.kind }, 'delivery attempt recorded');
    if (e.hasAttachments && res?.record.sendState === 'DONE') await opts.emails.deleteAttachments(e.id).catch(() => undefined);
  }

  /**
   * Emails waiting longer than the recheck interval are checked against the suppression list again: one call
   * per team of the batch. Returns the emails still to send; the others are settled or given back.
   */
  async function recheckSuppressions(batch: { record: EmailRecord; entry: QueueEntry }[]): Promise<{ record: EmailRecord; entry: QueueEntry }[]> {
    const at = now();
    const stale = batch.filter((b) => at.getTime() - b.record.suppressionCheckedAt.getTime() > recheckMs);
    if (stale.length === 0) return batch;
    const byTeam = new Map<string, { record: EmailRecord; entry: QueueEntry }[]>();
    for (const b of stale) byTeam.set(b.record.teamId, [...(byTeam.get(b.record.teamId) ?? []), b]);
    const drop = new Set<string>();
    const replaced = new Map<string, EmailRecord>();
    await Promise.all([...byTeam].map(async ([teamId, items]) => {
      let suppressed: ReadonlySet<string>;
      try {
        suppressed = await opts.suppressions.suppressed(teamId, [...new Set(items.flatMap((i) => i.record.recipients.pending))]);
      } catch (err) {
        opts.logger.warn({ err, teamId }, 'the suppression list is unavailable; the emails wait');
        for (const i of items) drop.add(i.record.id);
        await opts.queue.rescheduleMany(items.map((i) => ({ emailId: i.record.id, due: new Date(at.getTime() + UPSTREAM_RETRY_MS), uncount: true })))
          .catch((e: unknown) => opts.logger.warn({ err: e }, 'could not give queue entries back; their leases will expire'));
        return;
      }
      // Hits are rare: those few are written one by one before sending.
      const hits = items.filter((i) => i.record.recipients.pending.some((r) => suppressed.has(r)));
      for (const h of hits) {
        try {
          const res = await opts.emails.mutate(h.record.id, (x) => suppressMutation(x, suppressed, at), { initial: h.record, now });
          if (!res) {
            drop.add(h.record.id);
            await opts.queue.remove(h.record.id);
          } else if (!isPending(res.record)) {
            drop.add(h.record.id);
            await settleQueue([res.record]);
          } else {
            replaced.set(h.record.id, res.record);
          }
        } catch (err) {
          opts.logger.warn({ err, emailId: h.record.id }, 'recording suppressed recipients failed; the email waits');
          drop.add(h.record.id);
          await release(h.record.id, new Date(at.getTime() + UPSTREAM_RETRY_MS));
        }
      }
    }));
    return batch.filter((b) => !drop.has(b.record.id)).map((b) => ({ record: replaced.get(b.record.id) ?? b.record, entry: b.entry }));
  }

  /**
   * Gets the claimed entries' emails, the truth (a stale entry is fixed here), and their contents (from memory
   * for untouched entries this process accepted, else one read each for the whole batch), then sends them.
   */
  async function runBatch(entries: QueueEntry[]): Promise<void> {
    const first = entries[0];
    if (!first) return;
    // The batch's leases are extended together while it runs: its last emails may be handed to the relay, and
    // their answers written, well after the claim. Only a live process extends them, so a crashed worker's
    // emails still go back to the queue one lease after its last extension.
    const lease: Lease = { until: Math.min(...entries.map((e) => e.leaseUntil.getTime())) };
    const tick = heartbeatMs();
    let heartbeat: ReturnType<typeof setTimeout> | undefined;
    const beat = (inMs: number) => {
      heartbeat = setTimeout(() => {
        const until = now().getTime() + opts.leaseMs;
        extendAll(entries, new Date(until))
          .then(() => { lease.until = until; })
          .catch((err: unknown) => opts.logger.warn({ err }, 'could not extend the leases of a send batch'));
        beat(tick);
      }, inMs);
    };
    // A claimed batch starts with a whole lease, handed-over emails with what is left of theirs after waiting:
    // the first extension comes when the lease is down to what a claimed batch has at its first one.
    beat(Math.max(0, lease.until - now().getTime() - (opts.leaseMs - tick)));
    try {
      await sendBatch(entries, lease);
    } finally {
      clearTimeout(heartbeat);
    }
  }

  async function sendBatch(entries: QueueEntry[], lease: Lease): Promise<void> {
    const at = now();
    // An entry nothing but the accept and this claim wrote names an email still exactly as accepted: when this
    // process accepted it, the record and content it wrote are taken from memory. Any other is read (the truth).
    const accepted = await opts.emails.takeAccepted(entries.filter((e) => e.untouched).map((e) => e.emailId));
    let records: Map<string, EmailRecord>;
    try {
      const read = await opts.emails.getManyById(entries.filter((e) => !accepted.has(e.emailId)).map((e) => e.emailId));
      records = new Map([...[...accepted.values()].map((a) => [a.record.id, a.record] as const), ...read.map((r) => [r.id, r] as const)]);
    } catch (err) {
      opts.logger.warn({ err, count: entries.length }, 'reading claimed emails failed; they wait');
      await opts.queue.rescheduleMany(entries.map((e) => ({ emailId: e.emailId, due: new Date(at.getTime() + UPSTREAM_RETRY_MS), uncount: true }))).catch(() => undefined);
      return;
    }
    const remove: string[] = [];
    const later: { emailId: string; due: Date; uncount: boolean }[] = [];
    let sendable: { record: EmailRecord; entry: QueueEntry }[] = [];
    for (const entry of entries) {
      const e = records.get(entry.emailId);
      if (!e) {
        // Entries are written before their emails: a young orphan may be an accept still in progress.
        if (at.getTime() - entry.createdAt.getTime() < 60_000) later.push({ emailId: entry.emailId, due: new Date(at.getTime() + 2_000), uncount: true });
        else remove.push(entry.emailId);
        continue;
      }
      const why = whyNotSendable(e, at);
      if (why === 'done') remove.push(e.id);
      else if (why === 'not-due') later.push({ emailId: e.id, due: e.nextAttemptAt ?? at, uncount: true });
      else sendable.push({ record: e, entry });
    }
    if (remove.length > 0 || later.length > 0) {
      await Promise.all([opts.queue.removeMany(remove), opts.queue.rescheduleMany(later)])
        .catch((err: unknown) => opts.logger.warn({ err }, 'could not fix stale queue entries; they are looked at again later'));
    }
    sendable = await recheckSuppressions(sendable);
    if (sendable.length === 0) return;
    const contents = new Map<string, EmailContent>();
    for (const s of sendable) {
      const c = accepted.get(s.record.id)?.content;
      if (c) contents.set(s.record.id, c);
    }
    try {
      const missing = sendable.filter((s) => !contents.has(s.record.id)).map((s) => s.record.id);
      for (const [id, c] of await opts.emails.contentsOf(missing)) contents.set(id, c);
    } catch (err) {
      opts.logger.warn({ err, count: sendable.length }, 'reading email contents failed; the emails wait');
      await opts.queue.rescheduleMany(sendable.map((s) => ({ emailId: s.record.id, due: new Date(at.getTime() + UPSTREAM_RETRY_MS), uncount: true }))).catch(() => undefined);
      return;
    }
    await mapLimit(sendable, opts.concurrency, async ({ record, entry }) => {
      try {
        await deliver(record, entry, lease, contents.get(record.id) ?? { headers: [] });
      } catch (err) {
        opts.logger.error({ err, emailId: record.id }, 'send failed unexpectedly; the lease will expire and the email be retried');
      }
    });
  }

  function wakeAll(): void {
    for (const s of [...sleepers]) s();
  }

  let loops: Promise<void>[] = [];

  /**
   * A few batch loops, each taking a batch and sending it in turn, so one
   * batch's reads overlap another's sends. A batch is what local accepts
   * handed over (no claim, no scan) or else a claim from the queue. While
   * hand-offs keep the loops busy the queue is still scanned every
   * `busyPollMs` (schedules, retries, entries inserted unleased because the
   * hand-off was full, other workers' expired leases); without them, at once.
   * Only loop 0 polls an idle queue; the others sleep until it (or a local
   * accept) finds work.
   */
  async function loop(index: number): Promise<void> {
    while (!stopping) {
      let entries: QueueEntry[] = Date.now() - lastScanAt < busyPollMs ? takeHandedOver() : [];
      if (entries.length === 0) {
        // With the hand-off empty and a scan just made that found what was there, nothing new is known to wait
        // unleased (a hand-off, wake() or a full scan says so): the queue is scanned at the idle poll's pace.
        const sinceScan = Date.now() - lastScanAt;
        if (!scanWanted && sinceScan < opts.pollMs) {
          await sleep(opts.pollMs - sinceScan);
          continue;
        }
        scanWanted = false;
        lastScanAt = Date.now();
        try {
          // A scan costs the same whatever it takes (FerretDB v1 decodes the whole queue): it also fills the room
          // left in the hand-off, so a deep queue (accepts far ahead of sending) is scanned once per few batches.
          // The room is reserved while the claim runs: the other loop's claim and local accepts leave it alone.
          const room = Math.max(0, handoffMax - waiting.size - reserved);
          reserved += room;
          let claimed: QueueEntry[];
          try {
            claimed = await opts.queue.claimMany(owner, now(), opts.leaseMs, batchSize + room);
          } finally {
            reserved -= room;
          }
          if (claimed.length === batchSize + room) scanWanted = true;
          entries = claimed.slice(0, batchSize);
          const surplus = claimed.slice(batchSize);
          if (stopping) giveBackWaiting(surplus);
          else for (const e of surplus) waiting.set(e.emailId, e);
        } catch (err) {
          opts.logger.warn({ err }, 'claiming from the send queue failed');
          await sleep(opts.pollMs * 4);
          continue;
        }
      }
      if (entries.length === 0) {
        if (waiting.size > 0) continue;
        await sleep(index === 0 ? opts.pollMs : opts.pollMs * 20);
        continue;
      }
      if (index === 0 || waiting.size > 0) wakeAll();
      try {
        await runBatch(entries);
      } catch (err) {
        opts.logger.error({ err, count: entries.length }, 'a send batch failed unexpectedly; the leases will expire and the emails be retried');
      }
    }
  }

  return {
    owner,
    handoff,
    start() {
      if (loops.length > 0) return;
      stopping = false;
      loops = Array.from({ length: BATCHES_IN_FLIGHT }, (_, i) => loop(i));
      handoffTimer = setInterval(extendWaiting, heartbeatMs());
    },
    wake() {
      scanWanted = true;
      wakeAll();
    },
    async stop() {
      stopping = true;
      wakeAll();
      await Promise.all(loops);
      await outcomes.drain();
      await removals.drain();
      loops = [];
      clearInterval(handoffTimer);
      // Handed over but not started: given back (free, due now, the attempt uncounted) for any worker to claim.
      const left = [...waiting.values()];
      waiting.clear();
      giveBackWaiting(left);
      await Promise.all([...givingBack]);
    },
  };
}
