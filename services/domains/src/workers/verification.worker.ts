import { createPoller, type Logger } from '@mailfleet/kit';
import type { DnsClient } from '../clients/dns.client.js';
import { evaluateMx, evaluateTxt, type DnsRecordSpec, type RecordCheck } from '../domain/records.js';
import { decideOutcome, type VerificationTimings } from '../domain/verification.js';
import type { ClaimedCheck, DomainPatch, DomainsRepository } from '../repositories/domains.repository.js';

/** Looks every record up at once and compares each with what the domain must publish. */
export async function checkRecords(dns: DnsClient, records: readonly DnsRecordSpec[]): Promise<RecordCheck[]> {
  return Promise.all(records.map(async (r) => (r.type === 'MX' ? evaluateMx(r, await dns.mx(r.name)) : evaluateTxt(r, await dns.txt(r.name)))));
}

export interface VerificationWorker {
  start(): void;
  /** Looks for due checks now (after a PUT verify). */
  kick(): void;
  /** Claims and checks every due domain once; resolves with how many were checked. */
  runOnce(): Promise<number>;
  /** Stops polling and waits for the checks in progress to be written. */
  stop(): Promise<void>;
}

export interface VerificationWorkerOptions {
  repo: DomainsRepository;
  dns: DnsClient;
  timings: VerificationTimings;
  pollIntervalMs: number;
  leaseMs: number;
  concurrency: number;
  logger: Logger;
  /** Called after a write that carries events (kicks the outbox relay). */
  onEvents?: () => void;
  now?: () => Date;
}

/**
 * The verification loop of one replica. Due domains are claimed one at a time
 * with an atomic conditional update (`nextCheckAt <= now`, lease expired), so
 * replicas never check the same domain at once; a crashed replica's claim
 * lapses after the lease. Each check writes its result, its events and the
 * next check time in one update. Between passes it sleeps until the next
 * domain is due or the poll interval ends, whichever is first.
 */
export function createVerificationWorker(opts: VerificationWorkerOptions): VerificationWorker {
  const now = opts.now ?? (() => new Date());
  let stopping = false;

  async function check(claim: ClaimedCheck): Promise<void> {
    const log = opts.logger.child({ domainId: claim.record.id, domain: claim.record.name });
    try {
      const checks = await checkRecords(opts.dns, claim.records);
      const at = now();
      const res = await opts.repo.completeCheck(claim, (_current, state) => {
        const o = decideOutcome(state, checks, at, opts.timings);
        const patch: DomainPatch = {
          status: o.status, isVerifying: o.isVerifying, dkimStatus: o.dkimStatus, spfDetails: o.spfDetails, dmarcAdded: o.dmarcAdded,
          errorMessage: o.errorMessage, verificationError: o.verificationError, lastCheckedTime: at, recordStatuses: o.recordStatuses,
          schedule: { nextCheckAt: o.nextCheckAt, attempt: o.attempt, tempFailures: o.tempFailures, tempSince: o.tempSince },
        };
        return patch;
      }, at);
      if (!res) {
        log.debug('verification result dropped: a new verification run began or the domain is gone');
        return;
      }
      if (res.before.status !== res.after.status) {
        log.info({ from: res.before.status, to: res.after.status, problem: res.after.errorMessage ?? undefined }, 'domain verification status changed');
      }
      if (res.before.updatedAt !== res.after.updatedAt) opts.onEvents?.();
    } catch (err) {
      log.warn({ err }, 'domain check failed; the claim is released and the check retried');
      await opts.repo.releaseClaim(claim).catch(() => undefined);
    }
  }

  async function runOnce(): Promise<number> {
    let handled = 0;
    const inflight = new Set<Promise<void>>();
    try {
      for (;;) {
        while (inflight.size >= opts.concurrency) await Promise.race(inflight);
        if (stopping) break;
        const claim = await opts.repo.claimDue(now(), opts.leaseMs);
        if (!claim) break;
        handled++;
        const p = check(claim).finally(() => inflight.delete(p));
        inflight.add(p);
      }
    } finally {
      await Promise.allSettled([...inflight]);
    }
    return handled;
  }

  async function nextDelay(): Promise<number> {
    const due = await opts.repo.nextDueAt(now());
    if (!due) return opts.pollIntervalMs;
    return Math.min(opts.pollIntervalMs, Math.max(20, due.getTime() - now().getTime()));
  }

  const poller = createPoller({ name: 'domain verification', pass: runOnce, logger: opts.logger, intervalMs: opts.pollIntervalMs, nextDelayMs: nextDelay });

  return {
    start() {
      stopping = false;
      poller.start();
    },
    kick: () => poller.kick(),
    runOnce,
    async stop() {
      stopping = true;
      await poller.stop();
    },
  };
}
