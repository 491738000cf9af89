import { DeliverPolicy, jetstream, type ConsumerMessages } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { decodeEvent, EVENT_STREAM, type EventEnvelope } from '@mailfleet/kit';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { apiAt, createTeam, gatewayUrl } from './helpers.js';

// Events arrive through the outbox relay, which can be well behind after bulk writes on a loaded machine.
vi.setConfig({ testTimeout: 180_000 });

const api = apiAt(gatewayUrl());
const MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

let nc: NatsConnection;
let feed: ConsumerMessages;
const events: EventEnvelope[] = [];

beforeAll(async () => {
  nc = await connect({ servers: inject('natsUrl') });
  const consumer = await jetstream(nc).consumers.get(EVENT_STREAM, { filter_subjects: ['mailfleet.contact.>'], deliver_policy: DeliverPolicy.New });
  feed = await consumer.consume();
  void (async () => {
    for await (const m of feed) events.push(decodeEvent(m.data));
  })();
});
afterAll(async () => {
  await feed?.close();
  await nc?.close();
});

interface Book { id: string; name: string; emoji: string; teamId: string; properties: Record<string, string>; createdAt: string; updatedAt: string }
interface Contact {
  id: string; email: string; firstName: string | null; lastName: string | null; subscribed: boolean;
  properties: Record<string, string>; contactBookId: string; createdAt: string; updatedAt: string;
}

async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 150_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function newBook(token: string, body: Record<string, unknown> = { name: 'Newsletter' }): Promise<Book> {
  const res = await api('POST', '/v1/contactBooks', { token, body });
  expect(res.status).toBe(200);
  return res.body as Book;
}

async function newContact(token: string, bookId: string, body: Record<string, unknown>): Promise<string> {
  const res = await api('POST', `/v1/contactBooks/${bookId}/contacts`, { token, body });
  expect(res.status).toBe(200);
  return (res.body as { contactId: string }).contactId;
}

describe('contact books (SPEC 4.5)', () => {
  it('create, list with _count, get with details, patch, delete — exact shapes', async () => {
    const { teamId, token } = await createTeam('Books Team');
    const created = await newBook(token, { name: 'Customers', emoji: '🎉', properties: { region: 'eu' } });
    expect(Object.keys(created).sort()).toEqual(['createdAt', 'emoji', 'id', 'name', 'properties', 'teamId', 'updatedAt']);
    expect(created).toMatchObject({ name: 'Customers', emoji: '🎉', teamId, properties: { region: 'eu' } });
    expect(created.createdAt).toMatch(MS);
    expect(created.updatedAt).toMatch(MS);
    const plain = await newBook(token, { name: 'Leads' });
    expect(plain).toMatchObject({ emoji: '📙', properties: {} });

    await newContact(token, created.id, { email: 'one@example.com' });
    await newContact(token, created.id, { email: 'two@example.com', subscribed: false });

    const list = await api('GET', '/v1/contactBooks', { token });
    expect(list.status).toBe(200);
    expect(list.body).toEqual([{ ...plain, _count: { contacts: 0 } }, { ...created, _count: { contacts: 2 } }]);

    const got = await api('GET', `/v1/contactBooks/${created.id}`, { token });
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ ...created, details: { totalContacts: 2, unsubscribedContacts: 1, campaigns: [] } });

    const patched = await api('PATCH', `/v1/contactBooks/${created.id}`, { token, body: { name: 'Clients', properties: { region: 'us' } } });
    expect(patched).toMatchObject({ status: 200, body: { id: created.id, name: 'Clients' } });
    expect(Object.keys(patched.body as object).sort()).toEqual(['id', 'name']);
    const after = (await api('GET', `/v1/contactBooks/${created.id}`, { token })).body as Book;
    expect(after).toMatchObject({ name: 'Clients', emoji: '🎉', properties: { region: 'us' } });
    expect(after.updatedAt).toMatch(MS);

    const del = await api('DELETE', `/v1/contactBooks/${created.id}`, { token });
    expect(del).toMatchObject({ status: 200, body: { success: true } });
    for (const [method, path] of [['GET', `/v1/contactBooks/${created.id}`], ['PATCH', `/v1/contactBooks/${created.id}`], ['DELETE', `/v1/contactBooks/${created.id}`]] as const) {
      const res = await api(method, path, { token, ...(method === 'PATCH' ? { body: { name: 'x' } } : {}) });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ code: 'NOT_FOUND', message: 'Contact book not found' });
    }
    // Its contacts went with it: the contacts endpoints of the book are 404 too.
    expect((await api('GET', `/v1/contactBooks/${created.id}/contacts`, { token })).status).toBe(404);
    expect(((await api('GET', '/v1/contactBooks', { token })).body as Book[]).map((b) => b.id)).toEqual([plain.id]);
  });

  it('another team\'s book is 404 in the {code, message} form; validation is 400', async () => {
    const a = await createTeam('Books A');
    const b = await createTeam('Books B');
    const book = await newBook(a.token);
    for (const [method, body] of [['GET', undefined], ['PATCH', { name: 'mine now' }], ['DELETE', undefined]] as const) {
      const res = await api(method, `/v1/contactBooks/${book.id}`, { token: b.token, body });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ code: 'NOT_FOUND', message: 'Contact book not found' });
    }
    expect(((await api('GET', '/v1/contactBooks', { token: b.token })).body as Book[])).toEqual([]);
    const empty = await api('POST', '/v1/contactBooks', { token: a.token, body: { name: '' } });
    expect(empty.status).toBe(400);
    expect(empty.body).toMatchObject({ code: 'BAD_REQUEST', message: expect.any(String) });
    const badProps = await api('POST', '/v1/contactBooks', { token: a.token, body: { name: 'x', properties: { n: 1 } } });
    expect(badProps).toMatchObject({ status: 400, body: { code: 'BAD_REQUEST', message: 'properties.n must be a string' } });
  });
});

describe('contacts (SPEC 4.4)', () => {
  it('create, get, patch, put, delete — exact shapes and the {error: {code, message}} form', async () => {
    const { token } = await createTeam('Contacts Team');
    const book = await newBook(token);
    const base = `/v1/contactBooks/${book.id}/contacts`;

    const created = await api('POST', base, { token, body: { email: ' Ann@Example.com ', firstName: 'Ann', properties: { plan: 'pro' } } });
    expect(created.status).toBe(200);
    expect(Object.keys(created.body as object)).toEqual(['contactId']);
    const id = (created.body as { contactId: string }).contactId;

    const got = await api('GET', `${base}/${id}`, { token });
    expect(got.status).toBe(200);
    const c = got.body as Contact;
    expect(c).toEqual({
      id, email: 'ann@example.com', firstName: 'Ann', lastName: null, subscribed: true, properties: { plan: 'pro' }, contactBookId: book.id,
      createdAt: expect.stringMatching(MS), updatedAt: expect.stringMatching(MS),
    });

    const dup = await api('POST', base, { token, body: { email: 'ANN@example.com' } });
    expect(dup.status).toBe(409);
    expect(dup.body).toEqual({ error: { code: 'NOT_UNIQUE', message: expect.any(String) } });

    for (const body of [{ email: 'not-an-email' }, { firstName: 'no email' }, { email: 'p@example.com', properties: { n: 1 } }, { email: 'p@example.com', properties: 'x' }]) {
      const res = await api('POST', base, { token, body });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code: 'BAD_REQUEST', message: expect.any(String) } });
    }

    const patched = await api('PATCH', `${base}/${id}`, { token, body: { lastName: 'Lee', subscribed: false } });
    expect(patched).toMatchObject({ status: 200, body: { contactId: id } });
    expect((await api('GET', `${base}/${id}`, { token })).body).toMatchObject({ email: 'ann@example.com', firstName: 'Ann', lastName: 'Lee', subscribed: false, properties: { plan: 'pro' } });
    const noEmailChange = await api('PATCH', `${base}/${id}`, { token, body: { email: 'other@example.com' } });
    expect(noEmailChange.status).toBe(400);
    expect(noEmailChange.body).toMatchObject({ error: { code: 'BAD_REQUEST' } });
    // Re-subscribe through PATCH.
    await api('PATCH', `${base}/${id}`, { token, body: { subscribed: true, firstName: null } });
    expect((await api('GET', `${base}/${id}`, { token })).body).toMatchObject({ firstName: null, subscribed: true });

    // PUT upserts by email: the path id does not identify the contact.
    const putNew = await api('PUT', `${base}/whatever`, { token, body: { email: 'bob@example.com', firstName: 'Bob' } });
    expect(putNew.status).toBe(200);
    const bobId = (putNew.body as { contactId: string }).contactId;
    expect(bobId).not.toBe('whatever');
    const putAgain = await api('PUT', `${base}/${id}`, { token, body: { email: 'Bob@Example.com', lastName: 'Builder', properties: { a: 'b' } } });
    expect(putAgain).toMatchObject({ status: 200, body: { contactId: bobId } });
    expect((await api('GET', `${base}/${bobId}`, { token })).body).toMatchObject({ email: 'bob@example.com', firstName: 'Bob', lastName: 'Builder', properties: { a: 'b' } });
    expect((await api('GET', `${base}/${id}`, { token })).body).toMatchObject({ email: 'ann@example.com', lastName: 'Lee' });

    const del = await api('DELETE', `${base}/${id}`, { token });
    expect(del).toMatchObject({ status: 200, body: { success: true } });
    const gone = await api('GET', `${base}/${id}`, { token });
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({ error: { code: 'NOT_FOUND', message: 'Contact not found' } });
    expect((await api('DELETE', `${base}/${id}`, { token })).status).toBe(404);
    // The address can be added again at once.
    expect((await api('POST', base, { token, body: { email: 'ann@example.com' } })).status).toBe(200);
  });

  it('another team\'s book and contacts are 404 in the {error: {code, message}} form', async () => {
    const a = await createTeam('Contacts A');
    const b = await createTeam('Contacts B');
    const book = await newBook(a.token);
    const id = await newContact(a.token, book.id, { email: 'private@example.com' });
    const base = `/v1/contactBooks/${book.id}/contacts`;
    for (const [method, path, body] of [
      ['GET', base, undefined], ['POST', base, { email: 'x@example.com' }], ['GET', `${base}/${id}`, undefined],
      ['PATCH', `${base}/${id}`, { firstName: 'x' }], ['PUT', `${base}/${id}`, { email: 'private@example.com' }], ['DELETE', `${base}/${id}`, undefined],
      ['POST', `${base}/bulk`, [{ email: 'x@example.com' }]], ['DELETE', `${base}/bulk`, { contactIds: [id] }],
    ] as const) {
      const res = await api(method, path, { token: b.token, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body).toEqual({ error: { code: 'NOT_FOUND', message: 'Contact book not found' } });
    }
    expect((await api('GET', `${base}/${id}`, { token: a.token })).body).toMatchObject({ email: 'private@example.com', firstName: null });
  });

  it('lists with page and limit, and the emails and ids filters combined with paging', async () => {
    const { token } = await createTeam('List Team');
    const book = await newBook(token);
    const base = `/v1/contactBooks/${book.id}/contacts`;
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await newContact(token, book.id, { email: `l${i}@example.com` }));

    const all = await api('GET', base, { token });
    expect(all.status).toBe(200);
    // Oldest first; contacts created in the same millisecond keep one stable order.
    const order = (all.body as Contact[]).map((c) => c.id);
    expect([...order].sort()).toEqual([...ids].sort());
    expect((all.body as Contact[])[0]).toEqual((await api('GET', `${base}/${order[0]}`, { token })).body);

    const page1 = (await api('GET', `${base}?page=1&limit=4`, { token })).body as Contact[];
    const page2 = (await api('GET', `${base}?page=2&limit=4`, { token })).body as Contact[];
    expect([...page1, ...page2].map((c) => c.id)).toEqual(order);
    const byEmail = (await api('GET', `${base}?emails=L1@example.com,l3@example.com,nobody@example.com`, { token })).body as Contact[];
    expect(byEmail.map((c) => c.email)).toEqual(['l1@example.com', 'l3@example.com']);
    const picked = [ids[2]!, ids[4]!, ids[5]!];
    const byId = (await api('GET', `${base}?ids=${picked.join(',')}&limit=2&page=2`, { token })).body as Contact[];
    expect(byId.map((c) => c.id)).toEqual(order.filter((x) => picked.includes(x)).slice(2));
    const both = (await api('GET', `${base}?ids=${ids[2]},${ids[4]}&emails=l4@example.com`, { token })).body as Contact[];
    expect(both.map((c) => c.id)).toEqual([ids[4]]);

    for (const q of ['limit=10001', 'limit=0', 'page=0', 'page=x']) {
      const res = await api('GET', `${base}?${q}`, { token });
      expect(res.status, q).toBe(400);
      expect(res.body).toEqual({ error: { code: 'BAD_REQUEST', message: expect.any(String) } });
    }
  });

  it('20 parallel creates of the same email: exactly one succeeds, the rest are 409', async () => {
    const { token } = await createTeam('Race Team');
    const book = await newBook(token);
    const results = await Promise.all(Array.from({ length: 20 }, () => api('POST', `/v1/contactBooks/${book.id}/contacts`, { token, body: { email: 'race@example.com' } })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    const refused = results.filter((r) => r.status === 409);
    expect(refused).toHaveLength(19);
    expect(refused[0]!.body).toMatchObject({ error: { code: 'NOT_UNIQUE' } });
    expect(((await api('GET', `/v1/contactBooks/${book.id}/contacts`, { token })).body as Contact[])).toHaveLength(1);
  });

  it('works under /api/v1 too (useSend SDK base path)', async () => {
    const { token } = await createTeam('Prefix Team');
    const book = (await api('POST', '/api/v1/contactBooks', { token, body: { name: 'SDK' } })).body as Book;
    const res = await api('POST', `/api/v1/contactBooks/${book.id}/contacts`, { token, body: { email: 'sdk@example.com' } });
    expect(res.status).toBe(200);
  });
});

describe('contact events (SPEC 6.3)', () => {
  it('contact.created, contact.updated and contact.deleted carry the Contact object', async () => {
    const { teamId, token } = await createTeam('Events Team');
    const book = await newBook(token);
    const base = `/v1/contactBooks/${book.id}/contacts`;
    const id = await newContact(token, book.id, { email: 'eve@example.com', firstName: 'Eve' });
    const asCreated = (await api('GET', `${base}/${id}`, { token })).body as Contact;
    await api('PATCH', `${base}/${id}`, { token, body: { properties: { tier: 'gold' } } });
    const asUpdated = (await api('GET', `${base}/${id}`, { token })).body as Contact;
    await api('DELETE', `${base}/${id}`, { token });

    const mine = await waitFor('three contact events', () => {
      const e = events.filter((x) => x.teamId === teamId && x.type !== 'contact.unsubscribed');
      return e.length >= 3 ? e : undefined;
    });
    expect(mine.map((e) => e.type)).toEqual(['contact.created', 'contact.updated', 'contact.deleted']);
    expect(mine[0]!.data).toEqual(asCreated);
    expect(mine[1]!.data).toEqual(asUpdated);
    expect(mine[2]!.data).toEqual(asUpdated);
    for (const e of mine) {
      expect(e.id).toMatch(/^evt_/);
      expect(e.createdAt).toMatch(MS);
    }
  });

  it('opting a contact out publishes the internal contact.unsubscribed beside contact.updated', async () => {
    const { teamId, token } = await createTeam('Opt-out Team');
    const book = await newBook(token);
    const id = await newContact(token, book.id, { email: 'Out@Example.com' });
    await api('PATCH', `/v1/contactBooks/${book.id}/contacts/${id}`, { token, body: { subscribed: false } });
    const e = await waitFor('contact.unsubscribed', () => events.find((x) => x.teamId === teamId && x.type === 'contact.unsubscribed'));
    expect(e.data).toEqual({ contactId: id, contactBookId: book.id, email: 'out@example.com', reason: 'MANUAL', source: null });
    const updated = await waitFor('contact.updated', () => events.find((x) => x.teamId === teamId && x.type === 'contact.updated'));
    expect(updated.data).toMatchObject({ id, subscribed: false });
  });
});

describe('bulk contacts', () => {
  it('creates 1000 contacts in one call, then upserts with per-item errors, then deletes by id', async () => {
    const { token } = await createTeam('Bulk Team');
    const book = await newBook(token);
    const base = `/v1/contactBooks/${book.id}/contacts`;
    const items = Array.from({ length: 1000 }, (_, i) => ({ email: `bulk${i}@example.com`, firstName: `N${i}`, properties: { n: String(i) } }));
    const res = await api('POST', `${base}/bulk`, { token, body: items });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: expect.any(String), count: 1000, created: 1000, updated: 0, errors: [] });
    const details = (await api('GET', `/v1/contactBooks/${book.id}`, { token })).body as { details: { totalContacts: number } };
    expect(details.details.totalContacts).toBe(1000);
    const listed = (await api('GET', base, { token })).body as Contact[];
    expect(listed).toHaveLength(1000);
    expect(listed.find((c) => c.email === 'bulk7@example.com')).toMatchObject({ firstName: 'N7', properties: { n: '7' }, subscribed: true });

    const second = await api('POST', `${base}/bulk`, {
      token,
      body: [
        { email: 'BULK1@example.com', lastName: 'One' },
        { email: 'broken' },
        { email: 'fresh@example.com', subscribed: false },
        { email: 'bulk2@example.com', properties: { n: 2 } },
        { email: 'bulk1@example.com' },
        { firstName: 'no email' },
      ],
    });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ count: 2, created: 1, updated: 1 });
    expect((second.body as { errors: { index: number; code: string }[] }).errors.map((e) => [e.index, e.code])).toEqual([
      [1, 'INVALID_EMAIL'], [3, 'INVALID_PROPERTIES'], [4, 'DUPLICATE_IN_BATCH'], [5, 'INVALID_EMAIL'],
    ]);
    const one = ((await api('GET', `${base}?emails=bulk1@example.com`, { token })).body as Contact[])[0];
    expect(one).toMatchObject({ firstName: 'N1', lastName: 'One', properties: { n: '1' } });

    const tooMany = await api('POST', `${base}/bulk`, { token, body: Array.from({ length: 1001 }, (_, i) => ({ email: `x${i}@example.com` })) });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body).toMatchObject({ error: { code: 'BAD_REQUEST' } });

    const doomed = listed.slice(0, 3).map((c) => c.id);
    const del = await api('DELETE', `${base}/bulk`, { token, body: { contactIds: [...doomed, 'ct_unknown'] } });
    expect(del).toMatchObject({ status: 200, body: { success: true, count: 3 } });
    expect(((await api('GET', `${base}?ids=${doomed.join(',')}`, { token })).body as Contact[])).toEqual([]);
    expect((await api('DELETE', `${base}/bulk`, { token, body: { contactIds: [] } })).status).toBe(400);
  });
});
