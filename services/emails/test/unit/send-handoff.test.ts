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
