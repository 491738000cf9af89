import { testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type Collection, type CommandStartedEvent } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BULK_CHUNK } from '../../src/mongo.js';
import { createBatchCountOnce, createCountOnce, settlementIdOf, type BatchClaim, type BatchEffect, type KeyedDoc } from '../../src/count-once.js';

/**
 * The batched count-once protocol on the real store, stopped between its steps
 * as a process killed there would be: whatever happens, every effect counts once.
 */
const dbName = uniqueDbName('count_once_batch');
let client: MongoClient;
const writes: string[] = [];
let seq = 0;

beforeAll(async () => {
  client = await new MongoClient(testMongoUrl(), { monitorCommands: true }).connect();
  client.on('commandStarted', (e: CommandStartedEvent) => {
    if (e.databaseName === dbName && ['insert', 'update', 'delete', 'findAndModify'].includes(e.commandName)) writes.push(e.commandName);
  });
});
afterAll(async () => {
  await client?.db(dbName).dropDatabase();
  await client?.close();
});

function setupWith(settle: boolean, lease: { leaseMs?: number; marginMs?: number } = {}) {
  const n = ++seq;
  const marks = client.db(dbName).collection<KeyedDoc>(`marks_${n}`);
  const targets = client.db(dbName).collection<KeyedDoc>(`targets_${n}`);
  // A clock of the test's own: a lease runs out when the test moves it on, however slow the store is meanwhile.
  let t = Date.now();
  const now = () => new Date(t);
  const pass = (ms: number) => {
    t += ms;
  };
  const counting = createBatchCountOnce({ marks, targets, upsert: true, settle, now, ...lease });
  return { marks, targets, counting, now, pass };
}

/** Marks that still read as pending: pending in the document and not finished by their batch's settlement. */
async function pendingMarks(marks: Collection<KeyedDoc>): Promise<number> {
  let n = 0;
  for (const m of await marks.find({ pending: true }).toArray()) {
    if (typeof m.batchId === 'string' && (await marks.findOne({ _id: settlementIdOf(m.batchId, m.target as string) }))) continue;
    n++;
  }
  return n;
}

const effect = (email: string, eventId: string, target = 'day1', inc: Record<string, number> = { sent: 1 }): BatchEffect => ({
  markId: `${email}:sent`, eventId, target, inc, setOnInsert: { team: 't1' },
});

async function sentOf(targets: Collection<KeyedDoc>, id = 'day1'): Promise<{ sent: number; pending: unknown[] }> {
  const d = await targets.findOne({ _id: id });
  return { sent: (d?.sent as number | undefined) ?? 0, pending: (d?.pending as unknown[] | undefined) ?? [] };
}

const SHORT = { leaseMs: 300, marginMs: 100 };

describe.each([
  { mode: 'marks finished one by one', settle: false },
  { mode: 'batches settled per target', settle: true },
])('batched count-once, $mode', ({ settle }) => {
  const setup = (lease: { leaseMs?: number; marginMs?: number } = {}) => setupWith(settle, lease);

  it('a batch of 500 effects on one target costs one write per step, and counts each effect once', async () => {
    const { targets, counting } = setup();
    const effects = Array.from({ length: 500 }, (_, i) => effect(`em_${i}`, `evt_${i}`));
    writes.length = 0;
    const res = await counting.count(effects);
    // claim (one insert), apply (one update), finish (one settlement insert, or one bulk of updates by _id per
    // BULK_CHUNK marks), unpend (one update)
    const finish = settle ? ['insert'] : Array<string>(Math.ceil(500 / BULK_CHUNK)).fill('update');
    expect(writes).toEqual(['insert', 'update', ...finish, 'update']);
    expect(res).toMatchObject({ counted: 500, alreadyCounted: 0 });
    expect(await sentOf(targets)).toEqual({ sent: 500, pending: [] });
  });

  it('replays, repeats within a batch and other events for counted effects add nothing; new effects beside them count', async () => {
    const { targets, counting } = setup();
    await counting.count(Array.from({ length: 10 }, (_, i) => effect(`em_${i}`, `evt_${i}`)));
    const again = await counting.count([
      ...Array.from({ length: 10 }, (_, i) => effect(`em_${i}`, `evt_${i}`)),
      effect('em_3', 'evt_other'), effect('em_new', 'evt_n1'), effect('em_new', 'evt_n2'),
    ]);
    expect(again).toMatchObject({ counted: 1, alreadyCounted: 12 });
    expect(await sentOf(targets)).toEqual({ sent: 11, pending: [] });
  });

  it('crash after the claim, before the apply: a later batch takes the marks over and counts them once', async () => {
    const { targets, marks, counting, pass } = setup(SHORT);
    await counting.claim([effect('em_a', 'evt_a'), effect('em_b', 'evt_b')]);
    // While the lease runs, the same event is busy elsewhere: retried, not counted.
    const early = await counting.count([effect('em_a', 'evt_a')]);
    expect([...early.busy]).toEqual(['evt_a']);
    pass(350);
    const res = await counting.count([effect('em_a', 'evt_a'), effect('em_b', 'evt_b2'), effect('em_c', 'evt_c')]);
    expect(res).toMatchObject({ counted: 3, alreadyCounted: 0 });
    expect(await sentOf(targets)).toEqual({ sent: 3, pending: [] });
    expect(await pendingMarks(marks)).toBe(0);
  });

  it('crash between the targets of one apply: the applied target is settled, the other counted once', async () => {
    const { targets, counting, pass } = setup(SHORT);
    const effects = [effect('em_a', 'evt_a', 'day1'), effect('em_b', 'evt_b', 'day2'), effect('em_c', 'evt_c', 'day2')];
    const c = await counting.claim(effects);
    const onlyDay1: BatchClaim = { ...c, targets: new Map([...c.targets].filter(([t]) => t === 'day1')) };
    await counting.apply(onlyDay1);
    pass(350);
    const res = await counting.count(effects);
    expect(res).toMatchObject({ counted: 2, alreadyCounted: 1 });
    expect(await sentOf(targets, 'day1')).toEqual({ sent: 1, pending: [] });
    expect(await sentOf(targets, 'day2')).toEqual({ sent: 2, pending: [] });
  });

  it('crash after the apply, before the finish: a redelivery of ONE event settles the whole batch on that target; none counts again', async () => {
    const { targets, marks, counting, pass } = setup(SHORT);
    const effects = Array.from({ length: 5 }, (_, i) => effect(`em_${i}`, `evt_${i}`));
    await counting.apply(await counting.claim(effects));
    pass(350);
    expect(await counting.count([effects[0]!])).toMatchObject({ counted: 0, alreadyCounted: 1 });
    expect(await pendingMarks(marks)).toBe(0);
    // The others come later (after their token left the target): finished marks, nothing to count.
    expect(await counting.count(effects.slice(1))).toMatchObject({ counted: 0, alreadyCounted: 4 });
    expect(await sentOf(targets)).toEqual({ sent: 5, pending: [] });
  });

  it('crash in the middle of the finish: a finished mark seen first does not let a pending one count again', async () => {
    const { targets, marks, counting, pass } = setup(SHORT);
    const effects = Array.from({ length: 3 }, (_, i) => effect(`em_${i}`, `evt_${i}`));
    const c = await counting.claim(effects);
    await counting.apply(c);
    // Part of the updateMany happened.
    await marks.updateOne({ _id: effects[0]!.markId }, { $set: { pending: false } });
    await counting.count([effects[0]!]);
    pass(350);
    await counting.count(effects.slice(1));
    expect(await sentOf(targets)).toEqual({ sent: 3, pending: [] });
  });

  it('crash after the finish, before the unpend: a redelivery only pulls the token', async () => {
    const { targets, counting } = setup(SHORT);
    const effects = [effect('em_a', 'evt_a'), effect('em_b', 'evt_b')];
    const c = await counting.claim(effects);
    await counting.apply(c);
    expect(await counting.finish(c)).toBe(true);
    expect((await sentOf(targets)).pending).toEqual([c.batchId]);
    expect(await counting.count([effects[1]!])).toMatchObject({ counted: 0, alreadyCounted: 1 });
    expect(await sentOf(targets)).toEqual({ sent: 2, pending: [] });
  });

  it('the single-effect protocol taking over a crashed batch\'s mark keeps the count exact', async () => {
    const { targets, marks, counting, now, pass } = setup(SHORT);
    const single = createCountOnce({ marks, targets, upsert: true, now, ...SHORT });
    const applied = await counting.claim([effect('em_a', 'evt_a'), effect('em_b', 'evt_b')]);
    await counting.apply(applied);
    await counting.claim([effect('em_c', 'evt_c')]);
    pass(350);
    const input = (email: string, eventId: string) => ({ markId: `${email}:sent`, eventId, target: 'day1', inc: { sent: 1 } });
    expect(await single.count(input('em_a', 'evt_x'))).toBe('already counted');
    expect(await single.count(input('em_b', 'evt_b'))).toBe('already counted');
    expect(await single.count(input('em_c', 'evt_c'))).toBe('counted');
    expect(await sentOf(targets)).toEqual({ sent: 3, pending: [] });
  });

  it('a batch taking over crashed single-effect countings: applied ones are finished, the others counted once', async () => {
    const { targets, marks, counting, now, pass } = setup(SHORT);
    const single = createCountOnce({ marks, targets, upsert: true, now, ...SHORT });
    const input = (email: string, eventId: string) => ({ markId: `${email}:sent`, eventId, target: 'day1', inc: { sent: 1 } });
    const applied = await single.claim(input('em_a', 'evt_a'));
    await single.apply(applied!, { inc: { sent: 1 } });
    await single.claim(input('em_b', 'evt_b'));
    pass(350);
    const res = await counting.count([effect('em_a', 'evt_a'), effect('em_b', 'evt_b')]);
    expect(res).toMatchObject({ counted: 1, alreadyCounted: 1 });
    expect(await sentOf(targets)).toEqual({ sent: 2, pending: [] });
    expect(await pendingMarks(marks)).toBe(0);
  });
  it('a settlement finishes only its own target: a crash between the settlements of two targets leaves the other one to settle', async () => {
    const { targets, marks, counting, pass } = setup(SHORT);
    const effects = [effect('em_a', 'evt_a', 'day1'), effect('em_b', 'evt_b', 'day2')];
    const c = await counting.claim(effects);
    await counting.apply(c);
    await counting.finish({ ...c, targets: new Map([...c.targets].filter(([t]) => t === 'day1')) });
    pass(350);
    expect(await counting.count(effects)).toMatchObject({ counted: 0, alreadyCounted: 2 });
    expect(await sentOf(targets, 'day1')).toEqual({ sent: 1, pending: [] });
    expect(await sentOf(targets, 'day2')).toEqual({ sent: 1, pending: [] });
    expect(await pendingMarks(marks)).toBe(0);
  });
  it('a finished batch\'s marks read as counted long after their lease, to batches and to the single-effect protocol', async () => {
    const { targets, marks, counting, now, pass } = setup(SHORT);
    const single = createCountOnce({ marks, targets, upsert: true, now, ...SHORT });
    await counting.count([effect('em_a', 'evt_a'), effect('em_b', 'evt_b')]);
    pass(350);
    expect(await single.count({ markId: 'em_a:sent', eventId: 'evt_x', target: 'day1', inc: { sent: 1 } })).toBe('already counted');
    expect(await counting.count([effect('em_b', 'evt_y')])).toMatchObject({ counted: 0, alreadyCounted: 1 });
    expect(await sentOf(targets)).toEqual({ sent: 2, pending: [] });
  });
});
