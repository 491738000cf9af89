import { createGrpcClient, createLogger, type UpstreamClient } from '@mailfleet/kit';
import { contactsV1 } from '@mailfleet/proto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiAt, createTeam, gatewayUrl, until } from './helpers.js';

/** Issue 19 "Inputs": one address normalisation, the longest valid address, re-subscribing. */

interface Suppression {
  id: string;
  email: string;
  reason: string;
  source: string | null;
  createdAt: string;
}

const api = apiAt(gatewayUrl());
const logger = createLogger({ service: 'inputs-e2e', level: 'silent' });
/** What a campaign's unsubscribe link calls: an opt-out by the recipient (reason UNSUBSCRIBE). */
let contactsRpc: UpstreamClient<contactsV1.ContactsServiceClient>;

beforeAll(() => {
  const port = inject('platformPorts').services.contacts.grpc;
  contactsRpc = createGrpcClient({ name: 'contacts', address: `127.0.0.1:${port}`, ctor: contactsV1.ContactsServiceClient, logger });
});
afterAll(() => {
  contactsRpc?.close();
});

async function newBook(token: string): Promise<string> {
  const res = await api('POST', '/v1/contactBooks', { token, body: { name: 'Inputs' } });
  expect(res.status).toBe(200);
  return (res.body as { id: string }).id;
}

async function newContact(token: string, bookId: string, email: string): Promise<string> {
  const res = await api('POST', `/v1/contactBooks/${bookId}/contacts`, { token, body: { email } });
  expect(res.status).toBe(200);
  return (res.body as { contactId: string }).contactId;
}

async function optOut(teamId: string, contactId: string): Promise<void> {
  await contactsRpc.call.unsubscribeContact({ teamId, contactId, reason: '', reasonCode: contactsV1.UnsubscribeReason.UNSUBSCRIBE_REASON_UNSUBSCRIBE });
}

async function suppressions(token: string, search: string): Promise<Suppression[]> {
  const res = await api('GET', `/v1/suppressions?limit=100&search=${encodeURIComponent(search)}`, { token });
  expect(res.status).toBe(200);
  return (res.body as { suppressions: Suppression[] }).suppressions;
}

const listed = (token: string, email: string) => until(async () => (await suppressions(token, email)).find((s) => s.email === email), 20_000, `${email} suppressed`);
const gone = (token: string, email: string) => until(async () => (await suppressions(token, email)).every((s) => s.email !== email), 20_000, `${email} no longer suppressed`);

describe('one address normalisation (contacts and suppressions)', () => {
  it('a Unicode address added to a book and unsubscribed is suppressed, found and removed however it is written', async () => {
    const { teamId, token } = await createTeam('Inputs Unicode');
    const book = await newBook(token);
    const id = await newContact(token, book, 'Jürgen.Müller@Example.com');
    await optOut(teamId, id);
    const s = await listed(token, 'jürgen.müller@example.com');
    expect(s).toMatchObject({ reason: 'UNSUBSCRIBE' });
    // Searched in capitals, or with "ü" as "u" + combining diaeresis: one address.
    expect((await suppressions(token, 'JÜRGEN.MÜLLER')).map((x) => x.id)).toEqual([s.id]);
    expect((await suppressions(token, 'ju\u0308rgen')).map((x) => x.id)).toEqual([s.id]);
    const del = await api('DELETE', `/v1/suppressions/email/${encodeURIComponent('JU\u0308RGEN.MÜLLER@EXAMPLE.COM')}`, { token });
    expect(del).toMatchObject({ status: 200, body: { success: true } });
    expect(await suppressions(token, 'müller')).toEqual([]);
    expect((await api('DELETE', `/v1/suppressions/email/${encodeURIComponent('jürgen.müller@example.com')}`, { token })).status).toBe(404);
  });
});

describe('the longest valid address', () => {
  const domain = `${'d'.repeat(63)}.${'e'.repeat(63)}.${'f'.repeat(57)}.com`;
  it.each([
    ['ASCII', `${'l'.repeat(64)}@${domain}`],
    ['Unicode, nine times longer percent-encoded', `${'ü'.repeat(64)}@${domain}`],
  ])('%s: 254 characters can be suppressed and removed again', async (_, email) => {
    expect(email).toHaveLength(254);
    const { token } = await createTeam('Inputs Long');
    const add = await api('POST', '/v1/suppressions', { token, body: { email: email.toUpperCase(), reason: 'MANUAL' } });
    expect(add).toMatchObject({ status: 200, body: { email, reason: 'MANUAL' } });
    const del = await api('DELETE', `/v1/suppressions/email/${encodeURIComponent(email)}`, { token });
    expect(del).toMatchObject({ status: 200, body: { success: true } });
    expect(await suppressions(token, email.slice(0, 40))).toEqual([]);
  });
});

describe('re-subscribing', () => {
  it('subscribed: true (PATCH or PUT) lifts an UNSUBSCRIBE suppression; HARD_BOUNCE, COMPLAINT and MANUAL stay', async () => {
    const { teamId, token } = await createTeam('Inputs Resubscribe');
    const book = await newBook(token);
    const base = `/v1/contactBooks/${book}/contacts`;
    const again = await newContact(token, book, 'again@example.com');
    const upserted = await newContact(token, book, 'upsert@example.com');
    const kept = { HARD_BOUNCE: 'hard@example.com', COMPLAINT: 'spam@example.com', MANUAL: 'manual@example.com' };
    for (const [reason, email] of Object.entries(kept)) {
      const id = await newContact(token, book, email);
      expect((await api('POST', '/v1/suppressions', { token, body: { email, reason } })).status).toBe(200);
      // Opted out by the team and back in: contact.resubscribed goes out, but only UNSUBSCRIBE is lifted.
      expect((await api('PATCH', `${base}/${id}`, { token, body: { subscribed: false } })).status).toBe(200);
      expect((await api('PATCH', `${base}/${id}`, { token, body: { subscribed: true } })).status).toBe(200);
    }
    await optOut(teamId, again);
    await optOut(teamId, upserted);
    await listed(token, 'again@example.com');
    await listed(token, 'upsert@example.com');

    expect((await api('PATCH', `${base}/${again}`, { token, body: { subscribed: true } })).status).toBe(200);
    expect((await api('PUT', `${base}/any`, { token, body: { email: 'Upsert@Example.com', subscribed: true } })).status).toBe(200);
    await gone(token, 'again@example.com');
    await gone(token, 'upsert@example.com');
    const left = (await suppressions(token, '@example.com')).map((s) => [s.email, s.reason]).sort();
    expect(left).toEqual(Object.entries(kept).map(([reason, email]) => [email, reason]).sort());
  });
});
