import { InvalidArgumentError, NotFoundError } from '@mailfleet/kit';
import { suppressionsV1 } from '@mailfleet/proto';
import { describe, expect, it } from 'vitest';
import { createSuppressionsHandlers } from '../../src/rpc/suppressions.rpc.js';
import { fakeSuppressions } from './fakes.js';

const R = suppressionsV1.SuppressionReason;
const ctx = {} as never;
const T = 'team_1';

function setup() {
  const repo = fakeSuppressions();
  let clock = Date.parse('2025-01-01T00:00:00Z');
  const h = createSuppressionsHandlers({ suppressions: repo, now: () => new Date((clock += 1000)) });
  return { repo, h };
}

describe('AddSuppression', () => {
  it('stores the canonical address and updates reason and source on a second add', async () => {
    const { repo, h } = setup();
    const first = await h.addSuppression({ teamId: T, email: ' Bob@Example.COM ', reason: R.SUPPRESSION_REASON_MANUAL, source: ' crm ' }, ctx);
    expect(first.suppression).toMatchObject({ email: 'bob@example.com', reason: R.SUPPRESSION_REASON_MANUAL, source: 'crm', teamId: T });
    const again = await h.addSuppression({ teamId: T, email: 'bob@example.com', reason: R.SUPPRESSION_REASON_COMPLAINT }, ctx);
    expect(again.suppression).toMatchObject({ id: first.suppression!.id, reason: R.SUPPRESSION_REASON_COMPLAINT, source: undefined });
    expect(again.suppression!.createdAt).toEqual(first.suppression!.createdAt);
    expect(repo.all()).toHaveLength(1);
  });

  it('refuses a malformed address, a missing reason, an over-long source and a missing team', async () => {
    const { repo, h } = setup();
    const bad = [
      { teamId: T, email: 'not-an-address', reason: R.SUPPRESSION_REASON_MANUAL },
      { teamId: T, email: '', reason: R.SUPPRESSION_REASON_MANUAL },
      { teamId: T, email: 'a@example.com', reason: R.SUPPRESSION_REASON_UNSPECIFIED },
      { teamId: T, email: 'a@example.com', reason: 99 as suppressionsV1.SuppressionReason },
      { teamId: T, email: 'a@example.com', reason: R.SUPPRESSION_REASON_MANUAL, source: 'x'.repeat(501) },
      { teamId: '', email: 'a@example.com', reason: R.SUPPRESSION_REASON_MANUAL },
    ];
    for (const req of bad) await expect(h.addSuppression(req, ctx)).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(repo.writes).toBe(0);
  });
});

describe('ListSuppressions', () => {
  it('pages newest first with defaults, filters by reason and literal search', async () => {
    const { h } = setup();
    for (const [email, reason] of [['a.b@x.com', R.SUPPRESSION_REASON_MANUAL], ['axb@x.com', R.SUPPRESSION_REASON_COMPLAINT], ['c+tag@y.com', R.SUPPRESSION_REASON_MANUAL]] as const) {
      await h.addSuppression({ teamId: T, email, reason }, ctx);
    }
    const all = await h.listSuppressions({ teamId: T, page: 0, limit: 0, reason: 0 }, ctx);
    expect(all.total).toBe(3);
    expect(all.suppressions.map((s) => s.email)).toEqual(['c+tag@y.com', 'axb@x.com', 'a.b@x.com']);
    const page2 = await h.listSuppressions({ teamId: T, page: 2, limit: 2, reason: 0 }, ctx);
    expect(page2).toMatchObject({ total: 3, suppressions: [{ email: 'a.b@x.com' }] });
    expect((await h.listSuppressions({ teamId: T, page: 1, limit: 20, reason: R.SUPPRESSION_REASON_MANUAL }, ctx)).total).toBe(2);
    expect((await h.listSuppressions({ teamId: T, page: 1, limit: 20, reason: 0, search: 'A.B' }, ctx)).suppressions.map((s) => s.email)).toEqual(['a.b@x.com']);
    expect((await h.listSuppressions({ teamId: 'team_other', page: 1, limit: 20, reason: 0 }, ctx)).total).toBe(0);
  });

  it('refuses out-of-range paging and unknown reasons', async () => {
    const { h } = setup();
    for (const req of [{ page: -1, limit: 20 }, { page: 1, limit: 101 }, { page: 1, limit: -5 }]) {
      await expect(h.listSuppressions({ teamId: T, reason: 0, ...req }, ctx)).rejects.toBeInstanceOf(InvalidArgumentError);
    }
    await expect(h.listSuppressions({ teamId: T, page: 1, limit: 1, reason: 42 as suppressionsV1.SuppressionReason }, ctx)).rejects.toBeInstanceOf(InvalidArgumentError);
  });
});

describe('RemoveSuppression', () => {
  it('removes case-insensitively; absent is NOT_FOUND; malformed is INVALID_ARGUMENT', async () => {
    const { h } = setup();
    await h.addSuppression({ teamId: T, email: 'gone@example.com', reason: R.SUPPRESSION_REASON_MANUAL }, ctx);
    await expect(h.removeSuppression({ teamId: 'team_other', email: 'gone@example.com' }, ctx)).rejects.toBeInstanceOf(NotFoundError);
    expect(await h.removeSuppression({ teamId: T, email: 'GONE@example.com' }, ctx)).toEqual({});
    await expect(h.removeSuppression({ teamId: T, email: 'gone@example.com' }, ctx)).rejects.toBeInstanceOf(NotFoundError);
    await expect(h.removeSuppression({ teamId: T, email: 'gone' }, ctx)).rejects.toBeInstanceOf(InvalidArgumentError);
  });
});

describe('CheckSuppressed', () => {
  it('answers as given, in order, with one entry per distinct suppressed address', async () => {
    const { h } = setup();
    await h.addSuppression({ teamId: T, email: 'x@example.com', reason: R.SUPPRESSION_REASON_HARD_BOUNCE, source: 'em_1' }, ctx);
    const res = await h.checkSuppressed({ teamId: T, emails: ['ok@example.com', 'X@Example.com', 'garbage', 'x@example.com'] }, ctx);
    expect(res.suppressedEmails).toEqual(['X@Example.com', 'x@example.com']);
    expect(res.suppressions).toHaveLength(1);
    expect(res.suppressions[0]).toMatchObject({ email: 'x@example.com', reason: R.SUPPRESSION_REASON_HARD_BOUNCE, source: 'em_1' });
    expect(await h.checkSuppressed({ teamId: T, emails: [] }, ctx)).toEqual({ suppressedEmails: [], suppressions: [] });
  });

  it('takes up to 1000 addresses and refuses more', async () => {
    const { h } = setup();
    const many = (n: number) => Array.from({ length: n }, (_, i) => `u${i}@example.com`);
    expect((await h.checkSuppressed({ teamId: T, emails: many(1000) }, ctx)).suppressedEmails).toEqual([]);
    await expect(h.checkSuppressed({ teamId: T, emails: many(1001) }, ctx)).rejects.toBeInstanceOf(InvalidArgumentError);
  });
});
