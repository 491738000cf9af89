import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createEvent, createGrpcClient, createLogger, decodeEvent, encodeEvent, subjectFor, type EventEnvelope, type UpstreamClient } from '@mailfleet/kit';
import { suppressionsV1 } from '@mailfleet/proto';
import { readMailDir } from '@mailfleet/testkit';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { apiAt, createTeam, detail, gatewayUrl, mailTo, newSender, until, waitStatus, type Sender } from './helpers.js';

interface Suppression {
  id: string;
  email: string;
  reason: string;
  source: string | null;
  createdAt: string;
}
interface ListBody {
  suppressions: Suppression[];
  total: number;
}

const api = apiAt(gatewayUrl());
const logger = createLogger({ service: 'suppressions-e2e', level: 'silent' });
let nc: NatsConnection;
let js: JetStreamClient;
/** What the emails service calls before every send. */
let suppressionsRpc: UpstreamClient<suppressionsV1.SuppressionsServiceClient>;

beforeAll(async () => {
  nc = await connect({ servers: inject('natsUrl') });
  js = jetstream(nc);
  const port = inject('platformPorts').services.suppressions.grpc;
  suppressionsRpc = createGrpcClient({ name: 'suppressions', address: `127.0.0.1:${port}`, ctor: suppressionsV1.SuppressionsServiceClient, logger });
});
afterAll(async () => {
  suppressionsRpc?.close();
  await nc?.close();
});

const tick = () => new Promise((r) => setTimeout(r, 3));

async function publish(e: EventEnvelope<unknown>): Promise<void> {
  await js.publish(subjectFor(e.type), encodeEvent(e), { msgID: e.id });
}

async function listAll(token: string, query = ''): Promise<ListBody> {
  const res = await api('GET', `/v1/suppressions?limit=100${query}`, { token });
  expect(res.status).toBe(200);
  return res.body as ListBody;
}

/** Polls the list until the address shows up (the consumer works asynchronously). */
async function waitForSuppression(token: string, email: string, timeoutMs = 20_000): Promise<Suppression> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = (await listAll(token, `&search=${encodeURIComponent(email)}`)).suppressions.find((s) => s.email === email);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`${email} was not suppressed within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function isSuppressed(teamId: string, email: string): Promise<boolean> {
  return (await suppressionsRpc.call.checkSuppressed({ teamId, emails: [email] })).suppressedEmails.length === 1;
}

describe('POST /v1/suppressions', () => {
  it('creates a suppression with a lower-cased address and returns it', async () => {
    const { token } = await createTeam('Supp Add');
    const res = await api('POST', '/v1/suppressions', { token, body: { email: 'Jane.Doe@Example.COM', reason: 'MANUAL', source: 'support ticket 12' } });
    expect(res.status).toBe(200);
    const s = res.body as Suppression;
    expect(s).toEqual({ id: s.id, email: 'jane.doe@example.com', reason: 'MANUAL', source: 'support ticket 12', createdAt: s.createdAt });
    expect(s.id).toMatch(/^sup_/);
    expect(new Date(s.createdAt).toISOString()).toBe(s.createdAt);

    const noSource = await api('POST', '/v1/suppressions', { token, body: { email: 'other@example.com', reason: 'UNSUBSCRIBE' } });
    expect(noSource.body).toMatchObject({ email: 'other@example.com', reason: 'UNSUBSCRIBE', source: null });
  });

  it('updates reason and source of an address already listed instead of adding it twice', async () => {
    const { token } = await createTeam('Supp Upsert');
    const first = (await api('POST', '/v1/suppressions', { token, body: { email: 'dup@example.com', reason: 'MANUAL' } })).body as Suppression;
    const second = await api('POST', '/v1/suppressions', { token, body: { email: 'DUP@example.com', reason: 'COMPLAINT', source: 'fbl' } });
    expect(second.status).toBe(200);
    expect(second.body).toEqual({ ...first, reason: 'COMPLAINT', source: 'fbl' });
    expect(await listAll(token)).toEqual({ total: 1, suppressions: [{ ...first, reason: 'COMPLAINT', source: 'fbl' }] });
  });

  it('refuses malformed addresses, unknown reasons and missing fields with 400 {code, message}', async () => {
    const { token } = await createTeam('Supp Add Bad');
    const bodies: unknown[] = [
      { email: 'not-an-email', reason: 'MANUAL' },
      { email: 'two@@example.com', reason: 'MANUAL' },
      { email: 'user@localhost', reason: 'MANUAL' },
      { email: 'a@example.com', reason: 'manual' },
      { email: 'a@example.com', reason: 'SOFT_BOUNCE' },
      { email: 'a@example.com' },
      { reason: 'MANUAL' },
      { email: 42, reason: 'MANUAL' },
      { email: 'a@example.com', reason: 'MANUAL', source: 's'.repeat(501) },
    ];
    for (const body of bodies) {
      const res = await api('POST', '/v1/suppressions', { token, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject({ code: 'BAD_REQUEST', message: expect.any(String) });
    }
    const invalid = await api('POST', '/v1/suppressions', { token, body: { email: 'not-an-email', reason: 'MANUAL' } });
    expect(invalid.body).toEqual({ code: 'BAD_REQUEST', message: 'Invalid email address: not-an-email' });
    expect((await listAll(token)).total).toBe(0);
  });
});

describe('GET /v1/suppressions', () => {
  let token: string;
  const added: string[] = [];
  beforeAll(async () => {
    ({ token } = await createTeam('Supp List'));
    const entries: [string, string][] = [
      ['user+tag@example.com', 'MANUAL'], ['usertag@example.com', 'MANUAL'], ['a.b@example.com', 'HARD_BOUNCE'],
      ['axb@example.com', 'COMPLAINT'], ['reader@news.example.org', 'UNSUBSCRIBE'],
    ];
    for (const [email, reason] of entries) {
      expect((await api('POST', '/v1/suppressions', { token, body: { email, reason } })).status).toBe(200);
      added.push(email);
      await tick();
    }
  });

  it('lists newest first with page 1 and limit 20 by default', async () => {
    const res = await api('GET', '/v1/suppressions', { token });
    expect(res.status).toBe(200);
    const body = res.body as ListBody;
    expect(body.total).toBe(5);
    expect(body.suppressions.map((s) => s.email)).toEqual([...added].reverse());
    expect(Object.keys(body.suppressions[0]!).sort()).toEqual(['createdAt', 'email', 'id', 'reason', 'source']);
  });

  it('pages with page and limit; total counts every match; a page past the end is empty', async () => {
    const pages = await Promise.all([1, 2, 3].map(async (page) => (await api('GET', `/v1/suppressions?page=${page}&limit=2`, { token })).body as ListBody));
    expect(pages.map((p) => p.total)).toEqual([5, 5, 5]);
    expect(pages.flatMap((p) => p.suppressions.map((s) => s.email))).toEqual([...added].reverse());
    expect((await api('GET', '/v1/suppressions?page=4&limit=2', { token })).body).toEqual({ suppressions: [], total: 5 });
    expect(((await api('GET', '/v1/suppressions?limit=100', { token })).body as ListBody).suppressions).toHaveLength(5);
  });

  it('filters by reason', async () => {
    const manual = (await api('GET', '/v1/suppressions?reason=MANUAL', { token })).body as ListBody;
    expect(manual.total).toBe(2);
    expect(manual.suppressions.every((s) => s.reason === 'MANUAL')).toBe(true);
    expect(((await api('GET', '/v1/suppressions?reason=UNSUBSCRIBE', { token })).body as ListBody).suppressions.map((s) => s.email)).toEqual(['reader@news.example.org']);
    const paged = (await api('GET', '/v1/suppressions?reason=MANUAL&limit=1&page=2', { token })).body as ListBody;
    expect(paged).toMatchObject({ total: 2, suppressions: [{ email: 'user+tag@example.com' }] });
  });

  it('searches addresses by literal, case-insensitive substring', async () => {
    const search = async (q: string, extra = '') =>
      ((await api('GET', `/v1/suppressions?search=${encodeURIComponent(q)}${extra}`, { token })).body as ListBody).suppressions.map((s) => s.email).sort();
    expect(await search('+tag')).toEqual(['user+tag@example.com']);
    expect(await search('a.b')).toEqual(['a.b@example.com']);
    expect(await search('.')).toEqual([...added].sort());
    expect(await search('.*')).toEqual([]);
    expect(await search('(')).toEqual([]);
    expect(await search('[a-z]')).toEqual([]);
    expect(await search('NEWS.EXAMPLE')).toEqual(['reader@news.example.org']);
    expect(await search('tag', '&reason=MANUAL')).toEqual(['user+tag@example.com', 'usertag@example.com']);
    expect(await search('nobody')).toEqual([]);
    expect((await api('GET', '/v1/suppressions?search=', { token })).body).toMatchObject({ total: 5 });
    // A literal + in a query string is a space; encoded it is a plus.
    expect(((await api('GET', '/v1/suppressions?search=%2Btag', { token })).body as ListBody).total).toBe(1);
  });

  it('answers 400 {code, message} for out-of-range paging and unknown reasons', async () => {
    for (const q of ['page=0', 'page=-1', 'limit=0', 'limit=101', 'page=abc', 'limit=ten', 'page=1.5', 'limit=2.5', 'reason=SPAM', 'reason=manual', 'page=1&page=2', 'page=', 'limit=', 'search=' + 'x'.repeat(321)]) {
      const res = await api('GET', `/v1/suppressions?${q}`, { token });
      expect(res.status, q).toBe(400);
      expect(res.body, q).toMatchObject({ code: 'BAD_REQUEST', message: expect.any(String) });
    }
    expect((await api('GET', '/v1/suppressions?page=1&limit=100', { token })).status).toBe(200);
  });

  it('shows only the caller\'s team and is also served under /api/v1', async () => {
    const other = await createTeam('Supp List Other');
    expect((await api('GET', '/v1/suppressions', { token: other.token })).body).toEqual({ suppressions: [], total: 0 });
    expect(((await api('GET', '/api/v1/suppressions', { token })).body as ListBody).total).toBe(5);
    expect((await api('GET', '/v1/suppressions')).status).toBe(401);
  });
});

describe('DELETE /v1/suppressions/email/{email}', () => {
  it('removes a URL-encoded address case-insensitively, so it can be emailed again', async () => {
    const { token, teamId } = await createTeam('Supp Delete');
    await api('POST', '/v1/suppressions', { token, body: { email: 'a+b@x.com', reason: 'MANUAL' } });
    expect(await isSuppressed(teamId, 'A+B@x.com')).toBe(true);

    const res = await api('DELETE', `/v1/suppressions/email/${encodeURIComponent('A+B@X.com')}`, { token });
    expect(res).toMatchObject({ status: 200, body: { success: true } });
    expect(res.body).toEqual({ success: true });
    expect(await isSuppressed(teamId, 'a+b@x.com')).toBe(false);
    expect((await listAll(token)).total).toBe(0);

    const again = await api('DELETE', '/v1/suppressions/email/a%2Bb%40x.com', { token });
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ success: false, error: 'No suppression for a+b@x.com' });
  });

  it('handles addresses with a slash and an unencoded @', async () => {
    const { token } = await createTeam('Supp Delete Slash');
    await api('POST', '/v1/suppressions', { token, body: { email: 'dept/sales@example.com', reason: 'MANUAL' } });
    await api('POST', '/v1/suppressions', { token, body: { email: 'plain@example.com', reason: 'MANUAL' } });
    expect((await api('DELETE', `/v1/suppressions/email/${encodeURIComponent('dept/sales@example.com')}`, { token })).body).toEqual({ success: true });
    expect((await api('DELETE', '/v1/suppressions/email/plain@example.com', { token })).body).toEqual({ success: true });
    expect((await listAll(token)).total).toBe(0);
  });

  it('answers 404 {success: false, error} for another team\'s address and 400 in the same form for a malformed one', async () => {
    const a = await createTeam('Supp Delete A');
    const b = await createTeam('Supp Delete B');
    await api('POST', '/v1/suppressions', { token: a.token, body: { email: 'mine@example.com', reason: 'MANUAL' } });
    const foreign = await api('DELETE', '/v1/suppressions/email/mine%40example.com', { token: b.token });
    expect(foreign).toMatchObject({ status: 404, body: { success: false, error: 'No suppression for mine@example.com' } });
    expect(await isSuppressed(a.teamId, 'mine@example.com')).toBe(true);

    const bad = await api('DELETE', '/v1/suppressions/email/not-an-address', { token: a.token });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ success: false, error: 'Invalid email address: not-an-address' });
  });
});

describe('automatic suppression from platform events (real JetStream)', () => {
  it('a hard bounce suppresses the address as HARD_BOUNCE; after DELETE it may be sent to again', async () => {
    const { token, teamId } = await createTeam('Supp Bounce');
    // What the emails service publishes when the mailbox simulator answers with a permanent failure.
    const emailId = `em_e2e_${Date.now()}`;
    await publish(createEvent('email.bounced', teamId, {
      id: emailId, status: 'BOUNCED', from: 'app@sender.example', to: ['Bounce@Simulator.Example'], subject: 'hello', occurredAt: new Date().toISOString(),
      bounce: { type: 'Permanent', subType: 'General', message: '550 5.1.1 mailbox does not exist' },
    }));
    await publish(createEvent('email.bounced', teamId, {
      id: `${emailId}_soft`, status: 'BOUNCED', from: 'app@sender.example', to: ['full@simulator.example'], subject: 'hello',
      bounce: { type: 'Transient', subType: 'MailboxFull', message: '452 mailbox full' },
    }));

    const s = await waitForSuppression(token, 'bounce@simulator.example');
    expect(s).toMatchObject({ email: 'bounce@simulator.example', reason: 'HARD_BOUNCE', source: emailId });
    expect(await isSuppressed(teamId, 'bounce@simulator.example')).toBe(true);
    expect(((await api('GET', '/v1/suppressions?reason=HARD_BOUNCE', { token })).body as ListBody).suppressions.map((x) => x.email)).toEqual(['bounce@simulator.example']);

    expect((await api('DELETE', '/v1/suppressions/email/bounce%40simulator.example', { token })).body).toEqual({ success: true });
    expect(await isSuppressed(teamId, 'bounce@simulator.example')).toBe(false);
    expect((await listAll(token)).total).toBe(0);
  });

  it('a complaint suppresses as COMPLAINT and a contact\'s own unsubscribe as UNSUBSCRIBE, in the right team only', async () => {
    const { token, teamId } = await createTeam('Supp Complaint');
    const bystander = await createTeam('Supp Bystander');
    await publish(createEvent('email.complained', teamId, { id: 'em_spam_e2e', status: 'COMPLAINED', from: 'a@sender.example', to: ['angry@example.net'], subject: 'deal' }));
    await publish(createEvent('contact.unsubscribed', teamId, {
      contactId: 'ct_e2e', contactBookId: 'cb_e2e', email: 'Leaver@Example.net', reason: 'UNSUBSCRIBE', source: 'em_campaign_e2e',
    }));
    expect(await waitForSuppression(token, 'angry@example.net')).toMatchObject({ reason: 'COMPLAINT', source: 'em_spam_e2e' });
    expect(await waitForSuppression(token, 'leaver@example.net')).toMatchObject({ reason: 'UNSUBSCRIBE', source: 'em_campaign_e2e' });
    expect((await api('GET', '/v1/suppressions', { token: bystander.token })).body).toEqual({ suppressions: [], total: 0 });
  });
});

describe('through the mailbox simulator (real sends, issue 6 acceptance)', () => {
  /** Every email.suppressed event the emails service publishes from now on, read from JetStream. */
  async function suppressedEvents(): Promise<{ seen: EventEnvelope[]; stop: () => void }> {
    const seen: EventEnvelope[] = [];
    const consumer = await js.consumers.get('MAILFLEET_EVENTS', { filter_subjects: ['mailfleet.email.suppressed'], deliver_policy: 'new' } as never);
    const messages = await consumer.consume();
    void (async () => {
      for await (const m of messages) seen.push(decodeEvent(m.data));
    })().catch(() => undefined);
    return { seen, stop: () => void messages.close() };
  }
  async function send(s: Sender, to: string): Promise<{ emailId: string }> {
    const res = await api('POST', '/v1/emails', { token: s.token, body: { from: `shop@${s.domain}`, to, subject: 'Hello', text: 'Plain' } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as { emailId: string };
  }
  const sinkCount = async (address: string) => (await readMailDir(inject('mailDir'))).filter((m) => m.envelope.rcptTo.includes(address)).length;

  it('a hard bounce suppresses the address; the next send is email.suppressed with nothing in the sink; after DELETE it goes out again', async () => {
    const s = await newSender('SuppSim');
    const bounce = `bounce+${Date.now().toString(36)}@inbox.mailfleet-e2e.test`;
    const first = await send(s, bounce);
    await waitStatus(s, first.emailId, 'BOUNCED');
    const listed = await until(async () => ((await api('GET', `/v1/suppressions?reason=HARD_BOUNCE&search=${encodeURIComponent(bounce)}`, { token: s.token })).body as ListBody).suppressions[0], 30_000, 'suppressed');
    expect(listed).toMatchObject({ email: bounce, reason: 'HARD_BOUNCE', source: first.emailId });

    const events = await suppressedEvents();
    try {
      const second = await send(s, bounce);
      const r = await waitStatus(s, second.emailId, 'SUPPRESSED');
      expect(r.emailEvents.map((e) => e.status)).toEqual(['SUPPRESSED']);
      const event = await until(async () => events.seen.find((e) => (e.data as { id: string }).id === second.emailId), 30_000, 'email.suppressed');
      expect(event).toMatchObject({ type: 'email.suppressed', teamId: s.teamId, data: { to: [bounce] } });
    } finally {
      events.stop();
    }
    // The simulator refuses bounce@ at RCPT: nothing of either send is in the sink.
    expect(await sinkCount(bounce)).toBe(0);

    // After DELETE the address is sent to again: the relay is asked (and, this being bounce@, refuses again).
    expect((await api('DELETE', `/v1/suppressions/email/${encodeURIComponent(bounce)}`, { token: s.token })).body).toEqual({ success: true });
    const third = await send(s, bounce);
    const r3 = await waitStatus(s, third.emailId, 'BOUNCED');
    expect(r3.emailEvents.find((e) => e.status === 'BOUNCED')?.data).toMatchObject({ bounce: { type: 'Permanent' } });
  });

  it('a complaint suppresses the address; after DELETE mail to it is delivered again', async () => {
    const s = await newSender('SuppSimComplaint');
    const complainer = `complaint+${Date.now().toString(36)}@inbox.mailfleet-e2e.test`;
    const first = await send(s, complainer);
    await waitStatus(s, first.emailId, 'COMPLAINED');
    await until(async () => ((await api('GET', `/v1/suppressions?reason=COMPLAINT&search=${encodeURIComponent(complainer)}`, { token: s.token })).body as ListBody).total === 1, 30_000, 'suppressed');
    const second = await send(s, complainer);
    await waitStatus(s, second.emailId, 'SUPPRESSED');
    expect(await sinkCount(complainer)).toBe(1);

    expect((await api('DELETE', `/v1/suppressions/email/${encodeURIComponent(complainer)}`, { token: s.token })).body).toEqual({ success: true });
    const third = await send(s, complainer);
    // Delivered (the simulator then complains again, so DELIVERED need not stay the latest status).
    await until(async () => (await detail(s, third.emailId)).emailEvents.some((e) => e.status === 'DELIVERED'), 30_000, 'delivered again');
    await mailTo(complainer);
    expect(await sinkCount(complainer)).toBe(2);
  });
});

describe('OpenAPI', () => {
  it('documents the three suppression routes', async () => {
    const doc = (await api('GET', '/v1/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
    expect(Object.keys(doc.paths['/v1/suppressions'] ?? {}).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/v1/suppressions/email/{email}'] ?? {})).toEqual(['delete']);
  });
});

