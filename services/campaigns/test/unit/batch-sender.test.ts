import { describe, expect, it } from 'vitest';
import { createLogger, toGrpcError, UnavailableError } from '@mailfleet/kit';
import { COUNTERS, type Campaign } from '../../src/domain/campaign.js';
import type { BookContact, CampaignUpstreams } from '../../src/clients/upstreams.js';
import type { CampaignsRepository, SendingState } from '../../src/repositories/campaigns.repository.js';
import { createBatchSender } from '../../src/workers/batch-sender.js';

const logger = createLogger({ service: 'batch-sender-test', level: 'silent' });

const campaign: Campaign = {
  ...(Object.fromEntries(COUNTERS.map((k) => [k, 0])) as Record<(typeof COUNTERS)[number], number>),
  id: 'cmp_1', teamId: 'team_a', name: 'C', from: 'a@news.example.com', subject: 'Hi', previewText: null, contactBookId: 'book_1',
  html: '<a href="{{service_unsubscribe_url}}">u</a>', content: null, status: 'SENDING', scheduledAt: null, batchSize: 1000,
  batchWindowMinutes: 0, total: 0, replyTo: [], cc: [], bcc: [], pausedReason: null, createdAt: new Date(0), updatedAt: new Date(0),
};

/**
 * A fake store that records every move of the cursor, and an emails peer whose answers the test releases
 * one by one, in any order: what the sender stores must never pass a chunk that was not accepted.
 */
function setup(contactCount: number, opts: { totalCounted?: boolean } = {}) {
  const book: BookContact[] = Array.from({ length: contactCount }, (_, i) => ({
    id: `ct_${String(i).padStart(4, '0')}`, email: `r${i}@example.org`, properties: {}, cursor: `c${i}`,
  }));
  const advances: { cursor: string | null; chunkNo: number }[] = [];
  const ends: string[] = [];
  const totals: number[] = [];
  /** Every read of the book: where it started. */
  const reads: (string | null)[] = [];
  let claimed = false;
  const campaigns = {
    startDue: async () => 0,
    claimDue: async (): Promise<SendingState | undefined> => {
      if (claimed) return undefined;
      claimed = true;
      return { campaign, cursor: null, batchNo: 0, sentInBatch: 0, chunkNo: 0, totalCounted: opts.totalCounted ?? true, failures: 0 };
    },
    advance: async (_id: string, _owner: string, p: { cursor: string | null; chunkNo: number }) => {
      advances.push({ cursor: p.cursor, chunkNo: p.chunkNo });
      return 'SENDING' as const;
    },
    finishBatch: async (_id: string, _o: string, done: boolean) => void ends.push(done ? 'completed' : 'finished'),
    release: async () => void ends.push('released'),
    backOff: async () => void ends.push('backed off'),
    pauseWithReason: async () => void ends.push('paused'),
    setTotal: async (_id: string, _o: string, total: number) => void totals.push(total),
  } as unknown as CampaignsRepository;
  const answers = new Map<number, { resolve: () => void; reject: (e: unknown) => void }>();
  /** Every SendBatch, by chunk number; chunks whose every further attempt fails. */
  const calls: number[] = [];
  const down = new Set<number>();
  const upstreams: Pick<CampaignUpstreams, 'bookContacts' | 'sendBatch' | 'countSuppressed'> = {
    bookContacts: async (_t, _b, cursor, limit) => {
      reads.push(cursor);
      const from = cursor === null ? 0 : book.findIndex((c) => c.cursor === cursor) + 1;
      const contacts = book.slice(from, from + limit);
      return { contacts, nextCursor: from + limit < book.length ? contacts[contacts.length - 1]!.cursor : undefined };
    },
    countSuppressed: async () => 0,
    sendBatch: (req) => new Promise((resolve, reject) => {
      const chunk = Number(/chunk:(\d+)$/.exec(req.idempotencyKey ?? '')![1]);
      calls.push(chunk);
      if (answers.has(chunk) && down.has(chunk)) {
        reject(toGrpcError(new UnavailableError('emails is down')));
        return;
      }
      answers.set(chunk, { resolve: () => resolve({ emailIds: req.emails.map(() => 'em'), replayed: false }), reject });
    }),
  };
  const sender = createBatchSender({
    campaigns, upstreams, logger, publicUrl: 'https://x.test', signingKey: 'k'.repeat(32), pollMs: 1_000, leaseMs: 10_000,
    retryDelayMs: 1_000, windowUnitMs: 1, chunksInFlight: 4,
  });
  const inFlight = async (n: number) => {
    for (let i = 0; i < 100 && answers.size < n; i++) await new Promise((r) => setTimeout(r, 1));
    return [...answers.keys()].sort((a, b) => a - b);
  };
  return { sender, advances, ends, answers, inFlight, calls, down, totals, reads };
}

describe('batch sender: chunks in flight', () => {
  it('a first batch counts the book and sends from the same read of its first page', async () => {
    const t = setup(250, { totalCounted: false });
    const pass = t.sender.tick();
    expect(await t.inFlight(3)).toEqual([0, 1, 2]);
    for (const k of [0, 1, 2]) t.answers.get(k)!.resolve();
    await pass;
    expect(t.totals).toEqual([250]);
    // One read of the book: the count's page is the chunks' read-ahead.
    expect(t.reads).toEqual([null]);
    expect(t.ends).toEqual(['completed']);
  });

  it('hands several chunks over at once and moves the cursor over them only in order', async () => {
    const t = setup(450);
    const pass = t.sender.tick();
    // Four chunks at once (the window), not one.
    expect(await t.inFlight(4)).toEqual([0, 1, 2, 3]);
    // Later chunks accepted first: the cursor does not move past chunk 0, which is still out.
    t.answers.get(2)!.resolve();
    t.answers.get(1)!.resolve();
    await new Promise((r) => setTimeout(r, 10));
    expect(t.advances).toEqual([]);
    t.answers.get(0)!.resolve();
    expect(await t.inFlight(5)).toEqual([0, 1, 2, 3, 4]);
    expect(t.advances.map((a) => a.chunkNo)).toEqual([1, 2, 3]);
    for (const k of [3, 4]) t.answers.get(k)!.resolve();
    await pass;
    expect(t.advances).toEqual([
      { cursor: 'c99', chunkNo: 1 }, { cursor: 'c199', chunkNo: 2 }, { cursor: 'c299', chunkNo: 3 }, { cursor: 'c399', chunkNo: 4 }, { cursor: 'c399', chunkNo: 5 },
    ]);
    expect(t.ends).toEqual(['completed']);
  });

  it('a chunk that fails stops the cursor before it, even when later chunks were accepted, and the batch backs off', async () => {
    const t = setup(450);
    const pass = t.sender.tick();
    expect(await t.inFlight(4)).toEqual([0, 1, 2, 3]);
    t.down.add(1);
    t.answers.get(1)!.reject(toGrpcError(new UnavailableError('emails is down')));
    t.answers.get(2)!.resolve();
    t.answers.get(3)!.resolve();
    await new Promise((r) => setTimeout(r, 10));
    t.answers.get(0)!.resolve();
    // While chunk 1 is tried again in place, the window goes on with the last chunk.
    expect(await t.inFlight(5)).toEqual([0, 1, 2, 3, 4]);
    t.answers.get(4)!.resolve();
    await pass;
    // Only chunk 0 is behind the cursor; chunks 2 to 4 go again with their keys (replays) once the batch is retried.
    expect(t.advances.map((a) => a.chunkNo)).toEqual([1]);
    expect(t.ends).toEqual(['backed off']);
    // The failed chunk was tried twice more in place, then the batch gave up.
    expect(t.calls.filter((k) => k === 1)).toHaveLength(3);
  });

  it('a chunk that fails once is tried again in place with the same key, and the batch goes on', async () => {
    const t = setup(250);
    const pass = t.sender.tick();
    expect(await t.inFlight(3)).toEqual([0, 1, 2]);
    const first = t.answers.get(0)!;
    first.reject(toGrpcError(new UnavailableError('response lost')));
    // The retry registers a fresh answer for chunk 0.
    for (let i = 0; i < 200 && t.answers.get(0) === first; i++) await new Promise((r) => setTimeout(r, 10));
    for (const k of [0, 1, 2]) t.answers.get(k)!.resolve();
    await pass;
    expect(t.calls).toEqual([0, 1, 2, 0]);
    expect(t.advances.map((a) => a.chunkNo)).toEqual([1, 2, 3]);
    expect(t.ends).toEqual(['completed']);
  });
});
