import { randomBytes } from 'node:crypto';
import { readMailDir, type ReceivedMail } from '@mailfleet/testkit';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { apiAt, gatewayUrl, newSender, until, type Sender } from './helpers.js';

const api = apiAt(gatewayUrl());
const mailDir = inject('mailDir');

interface Campaign {
  id: string; name: string; from: string; subject: string; previewText: string | null; contactBookId: string | null; html: string | null;
  content: string | null; status: string; scheduledAt: string | null; batchSize: number; batchWindowMinutes: number; total: number; sent: number;
  delivered: number; opened: number; clicked: number; unsubscribed: number; bounced: number; hardBounced: number; complained: number;
  replyTo: string[]; cc: string[]; bcc: string[]; createdAt: string; updatedAt: string;
}

async function newBook(s: Sender, addresses: string[]): Promise<string> {
  const book = await api('POST', '/v1/contactBooks', { token: s.token, body: { name: `Book ${randomBytes(3).toString('hex')}` } });
  expect(book.status).toBe(200);
  const id = (book.body as { id: string }).id;
  for (let i = 0; i < addresses.length; i += 1000) {
    const chunk = addresses.slice(i, i + 1000).map((email, j) => ({ email, firstName: `N${i + j}`, properties: { code: `c${i + j}` } }));
    const res = await api('POST', `/v1/contactBooks/${id}/contacts/bulk`, { token: s.token, body: chunk });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  }
  return id;
}

const HTML = '<p>Hello {{firstName}} ({{properties.code}})</p><p><a href="{{ service_unsubscribe_url }}">Unsubscribe</a></p>';
const mailsTo = async (domainPart: string): Promise<ReceivedMail[]> => (await readMailDir(mailDir)).filter((m) => m.envelope.rcptTo.some((r) => r.endsWith(domainPart)));

let s: Sender;
let other: Sender;
let bookId: string;
beforeAll(async () => {
  s = await newSender('Camp');
  other = await newSender('CampOther');
  bookId = await newBook(s, [`a-${randomBytes(3).toString('hex')}@inbox.mailfleet-e2e.test`]);
});

function create(body: Record<string, unknown>, as: Sender = s) {
  return api('POST', '/v1/campaigns', {
    token: as.token, body: { name: 'Spring', from: `News <news@${as.domain}>`, subject: 'Hi {{firstName}}', contactBookId: bookId, html: HTML, ...body },
  });
}

describe('campaigns API (SPEC 4.8)', () => {
  it('creates a draft with the full Campaign shape', async () => {
    const res = await create({ previewText: 'pv', replyTo: 'r@example.org', cc: ['c@example.org'] });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const c = res.body as Campaign;
    expect(c).toEqual({
      id: c.id, name: 'Spring', from: `News <news@${s.domain}>`, subject: 'Hi {{firstName}}', previewText: 'pv', contactBookId: bookId, html: HTML, content: null,
      status: 'DRAFT', scheduledAt: null, batchSize: 100, batchWindowMinutes: 5, total: 0, sent: 0, delivered: 0, opened: 0, clicked: 0, unsubscribed: 0,
      bounced: 0, hardBounced: 0, complained: 0, replyTo: ['r@example.org'], cc: ['c@example.org'], bcc: [], createdAt: c.createdAt, updatedAt: c.updatedAt,
    });
    const got = await api('GET', `/v1/campaigns/${c.id}`, { token: s.token });
    expect(got.body).toEqual(c);
  });

  it('rejects content without {{service_unsubscribe_url}} with 400 {code, message} naming it', async () => {
    const res = await create({ html: '<p>no link</p>' });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ code: 'BAD_REQUEST', message: expect.stringContaining('{{service_unsubscribe_url}}') as unknown });
  });

  it('validates from, the book, batchSize and the schedule', async () => {
    expect((await create({ from: 'x@not-ours.example.com' })).status).toBe(400);
    expect((await create({ contactBookId: 'book_missing' })).status).toBe(404);
    const foreign = await create({}, other);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toMatchObject({ code: 'NOT_FOUND' });
    expect((await create({ batchSize: 0 })).status).toBe(400);
    expect((await create({ batchSize: 100_001 })).status).toBe(400);
    const bad = await create({ scheduledAt: 'when pigs fly' });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 'BAD_REQUEST' });
    expect((await create({ scheduledAt: 'yesterday at 9am' })).status).toBe(400);
    expect((await create({ name: undefined })).status).toBe(400);
  });

  it('schedules "in 2 hours" and "tomorrow at 9am" to the resolved ISO timestamps', async () => {
    const before = Date.now();
    const inTwo = (await create({ scheduledAt: 'in 2 hours' })).body as Campaign;
    expect(inTwo.status).toBe('SCHEDULED');
    const t = Date.parse(inTwo.scheduledAt!);
    expect(t).toBeGreaterThanOrEqual(before + 7_200_000 - 2000);
    expect(t).toBeLessThanOrEqual(Date.now() + 7_200_000 + 2000);
    const tomorrow = (await create({ scheduledAt: 'tomorrow at 9am' })).body as Campaign;
    const d = new Date();
    expect(tomorrow.scheduledAt).toBe(new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1, 9)).toISOString());
  });

  it('lists newest first as list items, schedules, refuses bad transitions, deletes', async () => {
    const a = (await create({ name: 'Older' })).body as Campaign;
    const b = (await create({ name: 'Newer' })).body as Campaign;
    const list = (await api('GET', '/v1/campaigns', { token: s.token })).body as Record<string, unknown>[];
    expect(list[0]).toEqual({ id: b.id, name: 'Newer', subject: 'Hi {{firstName}}', status: 'DRAFT', created_at: b.createdAt, sent: 0, delivered: 0, opened: 0, clicked: 0 });
    expect(list[1]?.id).toBe(a.id);
    expect(((await api('GET', '/v1/campaigns', { token: other.token })).body as unknown[]).map((x) => (x as { id: string }).id)).not.toContain(a.id);
    expect((await api('GET', `/v1/campaigns/${a.id}`, { token: other.token })).status).toBe(404);

    const sched = await api('POST', `/v1/campaigns/${a.id}/schedule`, { token: s.token, body: { scheduledAt: 'in 3 hours', batchSize: 50 } });
    expect(sched.status).toBe(200);
    expect(sched.body).toEqual({ success: true });
    expect((await api('GET', `/v1/campaigns/${a.id}`, { token: s.token })).body).toMatchObject({ status: 'SCHEDULED', batchSize: 50 });
    expect((await api('POST', `/v1/campaigns/${a.id}/schedule`, { token: s.token, body: { scheduledAt: 'nonsense o clock' } })).status).toBe(400);
    expect((await api('POST', `/v1/campaigns/${b.id}/pause`, { token: s.token })).status).toBe(400);
    expect((await api('POST', `/v1/campaigns/${b.id}/resume`, { token: s.token })).status).toBe(400);
    expect((await api('POST', `/v1/campaigns/${b.id}/pause`, { token: other.token })).status).toBe(404);

    expect((await api('DELETE', `/v1/campaigns/${b.id}`, { token: other.token })).status).toBe(404);
    const del = await api('DELETE', `/v1/campaigns/${b.id}`, { token: s.token });
    expect(del.status, JSON.stringify(del.body)).toBe(200);
    expect(del.body).toEqual({ success: true });
    expect((await api('GET', `/v1/campaigns/${b.id}`, { token: s.token })).status).toBe(404);
  });

  it('the unsubscribe link refuses a forged token with a 404 page, without an API key', async () => {
    const res = await fetch(`${gatewayUrl()}/v1/campaigns/unsubscribe?token=abc.def`);
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
  });
});

describe('sending a campaign through the platform', () => {
  it('sends every subscribed, non-suppressed contact exactly once, completes, counts; the link and one-click POST unsubscribe and suppress', async () => {
    const tag = randomBytes(3).toString('hex');
    const domainPart = `@c${tag}.inbox.mailfleet-e2e.test`;
    // The size: 1,000 contacts in batches of 100. Among them the mailbox simulator's hard bounces
    // (refused at RCPT, so never in the sink) and complaints (delivered, then an ARF report).
    const addresses = Array.from({ length: 1000 }, (_, i) => {
      if (i % 200 === 7) return `bounce+u${i}${domainPart}`;
      if (i % 300 === 11) return `complaint+u${i}${domainPart}`;
      return `u${i}${domainPart}`;
    });
    const book = await newBook(s, addresses);
    // Unsubscribe two contacts and suppress a third address.
    const listed = (await api('GET', `/v1/contactBooks/${book}/contacts?emails=${addresses[1]},${addresses[2]}`, { token: s.token })).body as { id: string }[];
    expect(listed).toHaveLength(2);
    for (const c of listed) expect((await api('PATCH', `/v1/contactBooks/${book}/contacts/${c.id}`, { token: s.token, body: { subscribed: false } })).status).toBe(200);
    expect((await api('POST', '/v1/suppressions', { token: s.token, body: { email: addresses[3], reason: 'MANUAL' } })).status).toBe(200);

    const res = await create({ contactBookId: book, sendNow: true, batchSize: 100, batchWindowMinutes: 1 });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const c = res.body as Campaign;
    expect(c.status).toBe('SENDING');
    const sentTo = addresses.filter((_, i) => i === 0 || i > 3);
    const bounces = sentTo.filter((a) => a.startsWith('bounce+'));
    const complaints = sentTo.filter((a) => a.startsWith('complaint+'));
    const expected = sentTo.filter((a) => !bounces.includes(a));
    expect({ bounces: bounces.length, complaints: complaints.length }).toEqual({ bounces: 5, complaints: 4 });
    await until(async () => ((await api('GET', `/v1/campaigns/${c.id}`, { token: s.token })).body as Campaign).status === 'COMPLETED', 900_000, 'campaign completed');
    const mails = await until(async () => {
      const m = await mailsTo(domainPart);
      return m.length >= expected.length && m;
    }, 900_000, 'all campaign mail in the sink');
    await new Promise((r) => setTimeout(r, 2000));
    const rcpts = (await mailsTo(domainPart)).flatMap((m) => m.envelope.rcptTo);
    // Every subscribed, non-suppressed contact exactly once; none of the others.
    expect(rcpts.length).toBe(expected.length);
    expect(new Set(rcpts)).toEqual(new Set(expected));
    // The counters follow the simulator's outcomes.
    const done = await until(async () => {
      const g = (await api('GET', `/v1/campaigns/${c.id}`, { token: s.token })).body as Campaign;
      return g.delivered >= expected.length && g.hardBounced >= bounces.length && g.complained >= complaints.length && g;
    }, 120_000, 'counters');
    expect(done).toMatchObject({
      // Refused outright, a bounce still counts as sent (the relay was asked).
      status: 'COMPLETED', total: sentTo.length, sent: sentTo.length, delivered: expected.length,
      bounced: bounces.length, hardBounced: bounces.length, complained: complaints.length, unsubscribed: 0,
    });

    // The List-Unsubscribe headers and the link in the body.
    const mail = mails.find((m) => m.envelope.rcptTo.includes(addresses[10]!))!;
    const unfold = (m: ReceivedMail) => m.raw.toString().replace(/\r?\n(?=[ \t])/g, '');
    const raw = unfold(mail);
    expect(raw).toMatch(/List-Unsubscribe-Post: List-Unsubscribe=One-Click/i);
    const link = /List-Unsubscribe: <([^>]+)>/i.exec(raw)?.[1];
    expect(link).toMatch(/\/v1\/campaigns\/unsubscribe\?token=/);
    const page = await fetch(link!);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(addresses[10]);

    const mail2 = mails.find((m) => m.envelope.rcptTo.includes(addresses[12]!))!;
    const link2 = /List-Unsubscribe: <([^>]+)>/i.exec(unfold(mail2))?.[1];
    const post = await fetch(link2!, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
    expect(post.status).toBe(200);

    for (const address of [addresses[10]!, addresses[12]!]) {
      const contact = ((await api('GET', `/v1/contactBooks/${book}/contacts?emails=${encodeURIComponent(address)}`, { token: s.token })).body as { subscribed: boolean }[])[0];
      expect(contact?.subscribed).toBe(false);
      await until(async () => {
        const sup = (await api('GET', `/v1/suppressions?search=${encodeURIComponent(address)}`, { token: s.token })).body as { suppressions: { reason: string }[] };
        return sup.suppressions.some((x) => x.reason === 'UNSUBSCRIBE');
      }, 30_000, `suppression of ${address}`);
    }
    expect(((await api('GET', `/v1/campaigns/${c.id}`, { token: s.token })).body as Campaign).unsubscribed).toBe(2);
  }, 2_000_000);
});

describe('pausing and resuming through the platform', () => {
  it('pause after the first batch stops the mail; resume completes it with no repeats', async () => {
    // The e2e platform's batch window "minute" is a second (CAMPAIGN_BATCH_WINDOW_UNIT_MS): two contacts,
    // batches of one, a window of five.
    const tag = randomBytes(3).toString('hex');
    const domainPart = `@p${tag}.inbox.mailfleet-e2e.test`;
    const addresses = [`first${domainPart}`, `second${domainPart}`];
    const book = await newBook(s, addresses);
    const c = (await create({ contactBookId: book, sendNow: true, batchSize: 1, batchWindowMinutes: 5 })).body as Campaign;
    await until(async () => (await mailsTo(domainPart)).length === 1, 60_000, 'the first batch in the sink');
    const paused = await api('POST', `/v1/campaigns/${c.id}/pause`, { token: s.token });
    expect(paused.status).toBe(200);
    expect(paused.body).toEqual({ success: true });
    expect(((await api('GET', `/v1/campaigns/${c.id}`, { token: s.token })).body as Campaign).status).toBe('PAUSED');
    expect((await api('POST', `/v1/campaigns/${c.id}/pause`, { token: s.token })).status).toBe(400);
    await new Promise((r) => setTimeout(r, 5000));
    expect((await mailsTo(domainPart)).length).toBe(1);

    expect((await api('POST', `/v1/campaigns/${c.id}/resume`, { token: s.token })).status).toBe(200);
    await until(async () => ((await api('GET', `/v1/campaigns/${c.id}`, { token: s.token })).body as Campaign).status === 'COMPLETED', 120_000, 'completed');
    await until(async () => (await mailsTo(domainPart)).length >= 2, 60_000, 'the second batch in the sink');
    await new Promise((r) => setTimeout(r, 2000));
    const rcpts = (await mailsTo(domainPart)).flatMap((m) => m.envelope.rcptTo);
    expect(rcpts.sort()).toEqual([...addresses].sort());
  }, 300_000);
});
