import { describe, expect, it } from 'vitest';
import { createGroupCommit } from '../../src/group-commit.js';

function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => { resolve = r; });
  return { promise, resolve };
}

/** A group commit whose first flush waits for `gate`; every flush is recorded in `flushes`. */
function gatedCommit(maxDelayMs: number) {
  const gate = deferred<void>();
  const flushes: number[][] = [];
  const gc = createGroupCommit<number, number>({
    maxItems: 100, maxDelayMs,
    flush: async (items) => { flushes.push([...items]); if (flushes.length === 1) await gate.promise; return [...items]; },
  });
  return { gc, gate, flushes };
}

describe('group commit', () => {
  it('items submitted together share one flush, and each caller gets its own result', async () => {
    const flushes: number[][] = [];
    const gc = createGroupCommit<number, number>({ maxItems: 100, maxDelayMs: 5, flush: async (items) => { flushes.push([...items]); return items.map((i) => i * 2); } });
    const results = await Promise.all([1, 2, 3].map((i) => gc.submit(i)));
    expect(results).toEqual([2, 4, 6]);
    expect(flushes).toEqual([[1, 2, 3]]);
  });

  it('at a delay of 0, what is submitted in the same tick still shares one flush', async () => {
    const flushes: number[][] = [];
    const gc = createGroupCommit<number, number>({ maxItems: 100, maxDelayMs: 0, flush: async (items) => { flushes.push([...items]); return [...items]; } });
    await Promise.all([gc.submit(1), gc.submit(2), gc.submit(3)]);
    expect(flushes).toEqual([[1, 2, 3]]);
  });

  it('a full batch is written at once, without waiting for the delay', async () => {
    const flushes: number[][] = [];
    const gc = createGroupCommit<number, number>({ maxItems: 2, maxDelayMs: 60_000, flush: async (items) => { flushes.push([...items]); return [...items]; } });
    await Promise.all([gc.submit(1), gc.submit(2)]);
    expect(flushes).toEqual([[1, 2]]);
  });

  it('one flush at a time: what arrives meanwhile goes in the next one, together', async () => {
    const { gc, gate, flushes } = gatedCommit(0);
    const first = gc.submit(1);
    await new Promise((r) => setTimeout(r, 10));
    const later = [gc.submit(2), gc.submit(3), gc.submit(4)];
    expect(gc.size).toBe(4);
    gate.resolve();
    await Promise.all([first, ...later]);
    expect(flushes).toEqual([[1], [2, 3, 4]]);
    expect(gc.size).toBe(0);
  });

  it('what arrives during a flush still waits out the delay from its arrival, so a slow store gets fuller batches', async () => {
    // A long delay: the 20 ms pause below stays well inside it on a loaded machine.
    const { gc, gate, flushes } = gatedCommit(1_000);
    const first = gc.submit(1);
    await new Promise((r) => setTimeout(r, 1_020));
    expect(flushes).toEqual([[1]]);
    const second = gc.submit(2);
    gate.resolve();
    await first;
    // The flush is over, but 2 has not waited its delay yet: 3 joins it.
    await new Promise((r) => setTimeout(r, 20));
    expect(flushes).toEqual([[1]]);
    const third = gc.submit(3);
    await Promise.all([second, third]);
    expect(flushes).toEqual([[1], [2, 3]]);
  });

  it('an item that failed alone fails only its caller', async () => {
    const gc = createGroupCommit<number, number>({ maxItems: 10, maxDelayMs: 1, flush: async (items) => items.map((i) => (i === 2 ? new Error('dup 2') : i)) });
    const settled = await Promise.allSettled([gc.submit(1), gc.submit(2), gc.submit(3)]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((settled[1] as PromiseRejectedResult).reason).toEqual(new Error('dup 2'));
  });

  it('a flush that throws fails every item of its batch, and the next batch is written normally', async () => {
    let calls = 0;
    const gc = createGroupCommit<number, number>({ maxItems: 10, maxDelayMs: 1, flush: async (items) => { calls++; if (calls === 1) throw new Error('store down'); return [...items]; } });
    const settled = await Promise.allSettled([gc.submit(1), gc.submit(2)]);
    expect(settled.every((s) => s.status === 'rejected')).toBe(true);
    await expect(gc.submit(3)).resolves.toBe(3);
  });

  it('a flush that returns the wrong number of outcomes fails its batch rather than mismatching callers', async () => {
    const gc = createGroupCommit<number, number>({ maxItems: 10, maxDelayMs: 1, flush: async () => [1] });
    const settled = await Promise.allSettled([gc.submit(1), gc.submit(2)]);
    expect(settled.every((s) => s.status === 'rejected')).toBe(true);
  });

  it('drain writes what waits without the delay and resolves when nothing runs', async () => {
    const flushes: number[][] = [];
    const gc = createGroupCommit<number, number>({ maxItems: 100, maxDelayMs: 60_000, flush: async (items) => { flushes.push([...items]); return [...items]; } });
    const p = gc.submit(7);
    await gc.drain();
    await expect(p).resolves.toBe(7);
    expect(flushes).toEqual([[7]]);
    expect(gc.size).toBe(0);
  });

  it('with a weight, a batch holds at most that much (but always one item, however heavy)', async () => {
    const flushes: number[][] = [];
    const gate = deferred<void>();
    const gc = createGroupCommit<number, number>({
      maxItems: 100, maxDelayMs: 0, weigh: (n) => n,
      flush: async (items) => { flushes.push([...items]); if (flushes.length === 1) await gate.promise; return [...items]; },
    });
    const first = gc.submit(1);
    await new Promise((r) => setTimeout(r, 10));
    const later = [60, 30, 20, 150, 5].map((n) => gc.submit(n));
    gate.resolve();
    await Promise.all([first, ...later]);
    expect(flushes).toEqual([[1], [60, 30], [20], [150], [5]]);
  });

  it('refuses nonsense sizes', () => {
    expect(() => createGroupCommit({ maxItems: 0, maxDelayMs: 1, flush: async () => [] })).toThrow(/maxItems/);
    expect(() => createGroupCommit({ maxItems: 1, maxDelayMs: -1, flush: async () => [] })).toThrow(/maxDelayMs/);
  });
});
