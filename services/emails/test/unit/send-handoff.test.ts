import { createLogger } from '@mailfleet/kit';
import { describe, expect, it } from 'vitest';
import type { SendQueueRepository } from '../../src/repositories/send-queue.repository.js';
import { createSendWorker } from '../../src/sending/send-worker.js';

const logger = createLogger({ service: 'send-handoff-test', level: 'silent' });

/** The queue's writes the hand-off makes, recorded; nothing else is called while the worker is not started. */
function fakeQueue() {
  const givenBack: { claimId: string; ids: string[] }[] = [];
  const queue = {
    async giveBack(claimId: string, ids: readonly string[]) {
      givenBack.push({ claimId, ids: [...ids] });
    },
    async extendLeases() {},
  } as unknown as SendQueueRepository;
  return { queue, givenBack };
}

function worker(queue: SendQueueRepository, handoffMax: number) {
  return createSendWorker({
    queue, handoffMax, logger,
    emails: {} as never, identities: {} as never, suppressions: {} as never, relay: {} as never, classify: () => ({}) as never,
    concurrency: 1, pollMs: 50, leaseMs: 10_000, minLeaseLeftMs: 1_000, maxAttempts: 3, retryBaseMs: 10, retryMaxMs: 10,
    verpSecret: 'x', bounceDomain: 'b.test', tracking: { publicUrl: 'https://t.test', key: 'k' },
  });
}

const entries = (...ids: string[]) => ids.map((emailId) => ({ emailId, due: new Date() }));

describe('the local hand-off of accepted emails', () => {
  it('is bounded: reservations and waiting emails together take at most handoffMax places', () => {
    const { queue } = fakeQueue();
    const w = worker(queue, 3);
    const at = new Date();
    const a = w.handoff.reserve(2, at);
    expect(a.count).toBe(2);
    expect(a.lease).toMatchObject({ owner: w.owner, until: new Date(at.getTime() + 10_000) });
    expect(w.handoff.reserve(5, at).count).toBe(1);
    expect(w.handoff.reserve(1, at).count).toBe(0);
    // Settled with fewer written than reserved: the rest of the places are free again.
    a.settle(entries('em_1'));
    expect(w.handoff.reserve(5, at).count).toBe(1);
  });

  it('a change withdraws a waiting email once, naming the lease that holds it', () => {
    const { queue } = fakeQueue();
    const w = worker(queue, 10);
    const r = w.handoff.reserve(2, new Date());
    r.settle(entries('em_a', 'em_b'));
    expect(w.handoff.withdraw('em_a')).toEqual({ owner: w.owner, claimId: r.lease.claimId });
    expect(w.handoff.withdraw('em_a')).toBeUndefined();
    expect(w.handoff.withdraw('em_unknown')).toBeUndefined();
  });

  it('entries whose write failed are given back; stop gives back what waits, and nothing is handed over after it', async () => {
    const { queue, givenBack } = fakeQueue();
    const w = worker(queue, 10);
    const r = w.handoff.reserve(3, new Date());
    r.settle([], ['em_failed']);
    const s = w.handoff.reserve(3, new Date());
    s.settle(entries('em_1', 'em_2', 'em_3'));
    expect(w.handoff.withdraw('em_2')).toBeDefined();
    const late = w.handoff.reserve(1, new Date());
    await w.stop();
    expect(givenBack).toEqual([{ claimId: r.lease.claimId, ids: ['em_failed'] }, { claimId: r.lease.claimId, ids: ['em_1', 'em_3'] }]);
    // A write that reserved before the stop and ends after it: its entries go back at once.
    late.settle(entries('em_4'));
    expect(givenBack.at(-1)).toEqual({ claimId: r.lease.claimId, ids: ['em_4'] });
    expect(w.handoff.withdraw('em_4')).toBeUndefined();
    expect(w.handoff.reserve(5, new Date()).count).toBe(0);
  });
});

describe('scans of the queue beside the hand-off', () => {
  /** A queue whose scans find nothing, counted; batches of handed-over emails fail at once (no emails repository). */
  function scanCounter() {
    const scans: number[] = [];
    const queue = {
      async claimMany() {
        scans.push(Date.now());
        return [];
      },
      async giveBack() {},
      async extendLeases() {},
    } as unknown as SendQueueRepository;
    return { queue, scans };
  }
  const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('a batch handed over right after a scan does not end in another scan; wake() and the poll interval do', async () => {
    const { queue, scans } = scanCounter();
    const w = createSendWorker({
      queue, handoffMax: 10, logger,
      emails: {} as never, identities: {} as never, suppressions: {} as never, relay: {} as never, classify: () => ({}) as never,
      concurrency: 1, pollMs: 1_500, leaseMs: 10_000, minLeaseLeftMs: 1_000, maxAttempts: 3, retryBaseMs: 10, retryMaxMs: 10,
      verpSecret: 'x', bounceDomain: 'b.test', tracking: { publicUrl: 'https://t.test', key: 'k' },
    });
    w.start();
    try {
      await tick(50);
      expect(scans).toHaveLength(1); // the first pass scans: nothing is known about the queue yet
      // A trickle of single sends: each is handed over, sent (here: failed at once), and the loop finds the
      // hand-off empty again. The last scan was a moment ago, so nothing new is known to wait unleased.
      for (let i = 0; i < 3; i++) {
        w.handoff.reserve(1, new Date()).settle(entries(`em_${i}`));
        await tick(30);
      }
      expect(scans).toHaveLength(1);
      // An accept that could not hand its entries over (or an email made due now) asks for a scan at once.
      w.wake();
      await tick(50);
      expect(scans).toHaveLength(2);
      // Without either, the queue is still scanned once the poll interval has passed since the last scan.
      for (let waited = 0; scans.length < 3 && waited < 10_000; waited += 50) await tick(50);
      expect(scans.length).toBeGreaterThanOrEqual(3);
      expect(scans[2]! - scans[1]!).toBeGreaterThanOrEqual(1_450);
    } finally {
      await w.stop();
    }
  });
});
