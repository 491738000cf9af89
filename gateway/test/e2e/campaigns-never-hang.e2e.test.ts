import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { addVerifiedDomain, apiAt, gatewayUrl, newSender, until, type Sender } from './helpers.js';

/*
 * Issue 19, "Campaigns never hang", through the public API: a campaign that cannot send is refused up
 * front (400 naming the field) or, when the cause appears later, ends PAUSED with the reason on GET
 * rather than sitting in SENDING forever; and a paused scheduled campaign resumes to its schedule.
 */

const api = apiAt(gatewayUrl());

interface Campaign { id: string; status: string; scheduledAt: string | null; sent: number; pausedReason?: string }

const HTML = '<p>Hello {{firstName}}</p><p><a href="{{service_unsubscribe_url}}">Unsubscribe</a></p>';

let s: Sender;

async function newBook(addresses: string[]): Promise<string> {
  const book = await api('POST', '/v1/contactBooks', { token: s.token, body: { name: `Book ${randomBytes(3).toString('hex')}` } });
  expect(book.status).toBe(200);
  const id = (book.body as { id: string }).id;
  const res = await api('POST', `/v1/contactBooks/${id}/contacts/bulk`, { token: s.token, body: addresses.map((email) => ({ email })) });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return id;
}

function create(body: Record<string, unknown>) {
  return api('POST', '/v1/campaigns', { token: s.token, body: { name: 'Hang', from: `News <news@${s.domain}>`, subject: 'Hi', html: HTML, ...body } });
}

const getCampaign = async (id: string): Promise<Campaign> => (await api('GET', `/v1/campaigns/${id}`, { token: s.token })).body as Campaign;
/** A few seconds ahead, as ISO: long enough to break the campaign before its first batch. */
const soon = (ms: number) => new Date(Date.now() + ms).toISOString();
const tag = () => randomBytes(3).toString('hex');

beforeAll(async () => {
  s = await newSender('Hang');
});

describe('campaigns never hang (issue 19)', () => {
  it('pausing and resuming a SCHEDULED campaign keeps its schedule', async () => {
    const book = await newBook([`keep-${tag()}@inbox.mailfleet-e2e.test`]);
    const created = await create({ contactBookId: book, scheduledAt: 'in 2 hours' });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const c = created.body as Campaign;
    expect(c.status).toBe('SCHEDULED');
    expect((await api('POST', `/v1/campaigns/${c.id}/pause`, { token: s.token })).status).toBe(200);
    expect((await getCampaign(c.id)).status).toBe('PAUSED');
    expect((await api('POST', `/v1/campaigns/${c.id}/resume`, { token: s.token })).status).toBe(200);
    const resumed = await getCampaign(c.id);
    expect(resumed).toMatchObject({ status: 'SCHEDULED', scheduledAt: c.scheduledAt });
    // The e2e sender looks for due work every 200 ms: many passes later it still waits for its time.
    await new Promise((r) => setTimeout(r, 3000));
    expect(await getCampaign(c.id)).toMatchObject({ status: 'SCHEDULED', scheduledAt: c.scheduledAt, sent: 0 });
  }, 60_000);

  it('refuses replyTo, cc and bcc that are not addresses with 400 naming the field', async () => {
    const book = await newBook([`addr-${tag()}@inbox.mailfleet-e2e.test`]);
    for (const field of ['replyTo', 'cc', 'bcc']) {
      const res = await create({ contactBookId: book, sendNow: true, [field]: 'not an address' });
      expect(res.status, `${field}: ${JSON.stringify(res.body)}`).toBe(400);
      expect(res.body).toEqual({ code: 'BAD_REQUEST', message: expect.stringMatching(new RegExp(`^${field}: `)) as unknown });
    }
    const list = await create({ contactBookId: book, cc: ['ok@example.org', 'Ann <ann@example.org>'], bcc: 'x@example.org, bad@' });
    expect(list.status).toBe(400);
    expect((list.body as { message: string }).message).toMatch(/^bcc: .*bad@/);
    // Nothing was created by the refused requests.
    const names = ((await api('GET', '/v1/campaigns', { token: s.token })).body as { name: string; status: string }[]).filter((c) => c.status === 'SENDING');
    expect(names).toEqual([]);
  }, 60_000);

  it('a contact book deleted after creation pauses the campaign with the reason; schedule and resume refuse it naming the book', async () => {
    const book = await newBook([`gone-${tag()}@inbox.mailfleet-e2e.test`]);
    const c = (await create({ contactBookId: book, scheduledAt: soon(15_000) })).body as Campaign;
    expect(c.status).toBe('SCHEDULED');
    expect((await api('DELETE', `/v1/contactBooks/${book}`, { token: s.token })).status).toBe(200);
    const paused = await until(async () => {
      const g = await getCampaign(c.id);
      return g.status === 'PAUSED' ? g : undefined;
    }, 60_000, 'campaign paused');
    expect(paused.pausedReason).toEqual(expect.any(String));
    expect(paused.sent).toBe(0);
    for (const path of ['resume', 'schedule']) {
      const res = await api('POST', `/v1/campaigns/${c.id}/${path}`, { token: s.token, body: {} });
      expect(res.status, path).toBe(400);
      expect((res.body as { message: string }).message).toMatch(/^contactBookId: /);
    }
    expect((await getCampaign(c.id)).status).toBe('PAUSED');
  }, 90_000);

  it('a from-domain removed after creation pauses the campaign with the reason; resume refuses it naming from', async () => {
    const { domain, domainId } = await addVerifiedDomain(s.token, 'HangDom');
    const book = await newBook([`dom-${tag()}@inbox.mailfleet-e2e.test`]);
    const c = (await create({ contactBookId: book, from: `News <news@${domain}>`, scheduledAt: soon(15_000) })).body as Campaign;
    expect(c.status).toBe('SCHEDULED');
    expect((await api('DELETE', `/v1/domains/${domainId}`, { token: s.token })).status).toBe(200);
    const paused = await until(async () => {
      const g = await getCampaign(c.id);
      return g.status === 'PAUSED' ? g : undefined;
    }, 60_000, 'campaign paused');
    expect(paused.pausedReason).toContain(domain);
    const resume = await api('POST', `/v1/campaigns/${c.id}/resume`, { token: s.token });
    expect(resume.status).toBe(400);
    expect((resume.body as { message: string }).message).toMatch(/^from: /);
    // Refused up front as well: a new campaign from that domain.
    expect((await create({ contactBookId: book, from: `news@${domain}`, sendNow: true })).status).toBe(400);
  }, 120_000);
});
