import { Server, ServerCredentials, status, type ServiceError } from '@grpc/grpc-js';
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  bindService, createEvent, createGrpcClient, createLogger, decodeBookCursor, encodeBookCursor, encodeEvent, FailedPreconditionError, InvalidArgumentError, NotFoundError, settlementIdOf,
  startService, subjectFor,
  UnavailableError, type EventEnvelope, type RunningService, type UpstreamClient,
} from '@mailfleet/kit';
import { campaignsV1, contactsV1, domainsV1, emailsV1, suppressionsV1 } from '@mailfleet/proto';
import { testMongoUrl, testNatsUrl, uniqueDbName } from '@mailfleet/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCampaignsConfig } from '../../src/config.js';
import { createCampaignsServer } from '../../src/server.js';

/*
 * The campaigns service runs for real (its gRPC server, FerretDB, NATS, the
 * batch sender and the counters consumer) and calls its upstreams through
 * its real gRPC clients. The upstreams are one real gRPC server started
 * here — a network peer implementing the parts of emails.v1.EmailsService
 * (SendBatch, DeleteCampaignEmails), contacts.v1.ContactsService
 * (GetContactBook, ListBookContacts, UnsubscribeContact) and
 * domains.v1.DomainsService (GetSendingIdentity) the campaigns service uses,
 * over in-memory data, and recording every call. It stands in for services
 * that run in their own processes; none of the campaigns service's own code
 * is replaced. Like the real emails service, the peer replays a SendBatch
 * whose idempotency key it has seen instead of sending again.
 */

const logger = createLogger({ service: 'campaigns-test', level: 'silent' });
const dbName = uniqueDbName('campaigns');
const SIGNING_KEY = 'campaigns-integration-signing-key-0123456789';
const TEAM = 'team_a';
const OTHER_TEAM = 'team_b';
const WINDOW_UNIT_MS = 300; // one "minute" of batchWindowMinutes lasts 300 ms here

interface PeerContact { id: string; email: string; firstName?: string; subscribed: boolean; properties: Record<string, string> }

/** The peer's state: books, verified domains and what was asked of it. */
const books = new Map<string, { teamId: string; contacts: PeerContact[] }>();
/** The suppression list the suppressions peer answers from (addresses lower-cased). */
const suppressed = new Set<string>();
const sendCalls: emailsV1.SendBatchRequest[] = [];
const sentByKey = new Map<string, string[]>();
const unsubscribeCalls: contactsV1.UnsubscribeContactRequest[] = [];
const deleteCalls: emailsV1.DeleteCampaignEmailsRequest[] = [];
/** SendBatch calls that accept the chunk and then answer UNAVAILABLE (a lost response). */
let failAfterAccepting = 0;
/** Campaigns whose chunks the emails peer refuses as the real one refuses a from domain that is no longer verified. */
const refusedCampaigns = new Set<string>();
/** SendBatch calls answered UNAVAILABLE without accepting anything (an emails service that is down). */
let unavailableCalls = 0;
/** How long the emails peer takes to answer a SendBatch, and the most calls it had at once. */
let sendDelayMs = 0;
let sendsInFlight = 0;
let maxSendsInFlight = 0;

function peerHandlers<S>(impl: Partial<Record<string, (req: never) => Promise<unknown>>>): never {
  return new Proxy(impl, {
    get: (t, k: string) => t[k] ?? (async () => {
      throw new FailedPreconditionError(`${k} is not implemented by the test peer`);
    }),
  }) as never as S as never;
}

const CREATED = new Date('2026-01-01T00:00:00Z');
/** Every ListBookContacts call: on FerretDB each one is a scan of the contacts. */
const bookReads: { book: string; limit: number }[] = [];

function bookContacts(req: contactsV1.ListBookContactsRequest): contactsV1.ListBookContactsResponse {
  const book = books.get(req.contactBookId);
  if (!book || book.teamId !== req.teamId) throw new NotFoundError('book not found');
  // The contacts service's cursor (creation time, then id); here every contact has the same time, so the id orders.
  bookReads.push({ book: req.contactBookId, limit: req.limit });
  const after = req.cursor ? decodeBookCursor(req.cursor).id : '';
  const live = book.contacts.filter((c) => c.subscribed && c.id > after);
  const page = live.slice(0, req.limit);
  const last = page[page.length - 1];
  return {
    contacts: page.map((c) => ({
      id: c.id, email: c.email, firstName: c.firstName, lastName: undefined, subscribed: true, properties: c.properties,
      contactBookId: req.contactBookId, createdAt: CREATED, updatedAt: CREATED,
    })),
    nextCursor: live.length > page.length && last ? encodeBookCursor({ createdAt: CREATED, id: last.id }) : undefined,
  };
}

let peer: Server;
let svc: RunningService;
let client: UpstreamClient<campaignsV1.CampaignsServiceClient>;
let nc: NatsConnection;

beforeAll(async () => {
  peer = new Server();
  const bindings = [
    bindService<emailsV1.EmailsServiceServer>({
      name: 'emails-peer', definition: emailsV1.EmailsServiceService, logger,
      handlers: peerHandlers<emailsV1.EmailsServiceServer>({
        sendBatch: async (req: emailsV1.SendBatchRequest) => {
          sendCalls.push(req);
          sendsInFlight += 1;
          maxSendsInFlight = Math.max(maxSendsInFlight, sendsInFlight);
          try {
            if (sendDelayMs > 0) await new Promise((r) => setTimeout(r, sendDelayMs));
          } finally {
            sendsInFlight -= 1;
          }
          if (refusedCampaigns.has(req.emails[0]?.campaignId ?? '')) {
            throw new InvalidArgumentError('emails[0]: from: the domain news.example.com is not verified; verify its DNS records first');
          }
          // Like the real emails service: one bad recipient refuses the whole chunk, naming its index.
          const bad = req.emails.findIndex((e) => e.to[0]?.startsWith('bad-'));
          if (bad >= 0) {
            throw new InvalidArgumentError(`emails[${bad}]: to: "${req.emails[bad]!.to[0]}" is not a valid email address`, { details: { index: bad, field: 'to' } });
          }
          if (unavailableCalls > 0) {
            unavailableCalls -= 1;
            throw new UnavailableError('emails is down');
          }
          const key = req.idempotencyKey ?? '';
          const seen = sentByKey.get(key);
          if (seen) return { emailIds: seen, replayed: true };
          const ids = req.emails.map((_, i) => `em_${sentByKey.size}_${i}`);
          sentByKey.set(key, ids);
          if (failAfterAccepting > 0) {
            failAfterAccepting -= 1;
            throw new UnavailableError('response lost');
          }
          return { emailIds: ids, replayed: false };
        },
        deleteCampaignEmails: async (req: emailsV1.DeleteCampaignEmailsRequest) => {
          deleteCalls.push(req);
          return { deletedCount: 3 };
        },
      }),
    }),
    bindService<contactsV1.ContactsServiceServer>({
      name: 'contacts-peer', definition: contactsV1.ContactsServiceService, logger,
      handlers: peerHandlers<contactsV1.ContactsServiceServer>({
        getContactBook: async (req: contactsV1.GetContactBookRequest) => {
          const b = books.get(req.contactBookId);
          if (!b || b.teamId !== req.teamId) throw new NotFoundError('book not found');
          return { contactBook: { id: req.contactBookId, name: 'B', emoji: '', teamId: b.teamId, properties: {}, createdAt: new Date(), updatedAt: new Date() } };
        },
        listBookContacts: async (req: contactsV1.ListBookContactsRequest) => bookContacts(req),
        unsubscribeContact: async (req: contactsV1.UnsubscribeContactRequest) => {
          unsubscribeCalls.push(req);
          const c = [...books.values()].flatMap((b) => b.contacts).find((x) => x.id === req.contactId);
          if (!c) throw new NotFoundError('contact not found');
          c.subscribed = false;
          return { contact: { id: c.id, email: c.email, subscribed: false, properties: {}, contactBookId: '', firstName: undefined, lastName: undefined, createdAt: undefined, updatedAt: undefined } };
        },
      }),
    }),
    bindService<suppressionsV1.SuppressionsServiceServer>({
      name: 'suppressions-peer', definition: suppressionsV1.SuppressionsServiceService, logger,
      handlers: peerHandlers<suppressionsV1.SuppressionsServiceServer>({
        checkSuppressed: async (req: suppressionsV1.CheckSuppressedRequest) => {
          // The real service's limit (suppressions MAX_CHECK_ADDRESSES).
          if (req.emails.length > 1000) throw new InvalidArgumentError(`at most 1000 addresses per call (got ${req.emails.length})`);
          return { suppressedEmails: req.emails.filter((e) => suppressed.has(e.toLowerCase())), suppressions: [] };
        },
      }),
    }),
    bindService<domainsV1.DomainsServiceServer>({
      name: 'domains-peer', definition: domainsV1.DomainsServiceService, logger,
      handlers: peerHandlers<domainsV1.DomainsServiceServer>({
        getSendingIdentity: async (req: domainsV1.GetSendingIdentityRequest) => {
          if (req.domainName !== 'news.example.com' && req.domainName !== 'pending.example.com') throw new NotFoundError('no such domain');
          return {
            domainId: 'dom_1', domainName: req.domainName, dkimSelector: 's', dkimPrivateKeyPem: '', clickTracking: false, openTracking: false, mailFromDomain: '',
            status: req.domainName === 'news.example.com' ? domainsV1.DomainStatus.DOMAIN_STATUS_SUCCESS : domainsV1.DomainStatus.DOMAIN_STATUS_PENDING,
          };
        },
      }),
    }),
  ];
  for (const b of bindings) peer.addService(b.definition, b.implementation);
  const peerPort = await new Promise<number>((resolve, reject) =>
    peer.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))));
  const peerAddr = `127.0.0.1:${peerPort}`;

  const config = loadCampaignsConfig({
    GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: testMongoUrl(), MONGO_DB: dbName, NATS_URL: testNatsUrl(), LOG_LEVEL: 'silent',
    CONTACTS_GRPC_ADDR: peerAddr, DOMAINS_GRPC_ADDR: peerAddr, EMAILS_GRPC_ADDR: peerAddr, SUPPRESSIONS_GRPC_ADDR: peerAddr, UPSTREAM_DEADLINE_MS: '5000',
    PUBLIC_URL: 'https://mail.example.test', TRACKING_SIGNING_KEY: SIGNING_KEY,
    CAMPAIGN_SENDER_POLL_MS: '50', CAMPAIGN_BATCH_LEASE_MS: '1000', CAMPAIGN_BATCH_RETRY_DELAY_MS: '200', CAMPAIGN_BATCH_WINDOW_UNIT_MS: String(WINDOW_UNIT_MS),
  });
  svc = await startService({ name: 'campaigns', config, env: {}, logger, build: (infra) => createCampaignsServer({ config, infra }) });
  client = createGrpcClient({ name: 'campaigns', address: `127.0.0.1:${svc.grpc.port}`, ctor: campaignsV1.CampaignsServiceClient, logger });
  nc = await connect({ servers: testNatsUrl() });
});

afterAll(async () => {
  client?.close();
  await nc?.close();
  await svc?.infra.mongo.db.dropDatabase();
  await svc?.shutdown('test over');
  peer?.forceShutdown();
});

const code = (p: Promise<unknown>) => p.then(() => 'OK', (e: ServiceError) => status[e.code]);
const message = (p: Promise<unknown>) => p.then(() => 'OK', (e: ServiceError) => e.details);

function makeBook(id: string, n: number, teamId = TEAM, unsubscribed: (i: number) => boolean = () => false): PeerContact[] {
  const contacts = Array.from({ length: n }, (_, i) => ({
    id: `${id}_c${String(i).padStart(5, '0')}`, email: `user${i}@${id}.test`, firstName: `User${i}`, subscribed: !unsubscribed(i), properties: { plan: i % 2 ? 'pro' : 'free' },
  }));
  books.set(id, { teamId, contacts });
  return contacts;
}

const base = (over: Partial<campaignsV1.CreateCampaignRequest> = {}): campaignsV1.CreateCampaignRequest => ({
  teamId: TEAM, name: 'Spring sale', from: 'News <hello@news.example.com>', subject: 'Hi {{firstName}}', contactBookId: 'book_small',
  html: '<p>Hello {{firstName}} ({{properties.plan}})</p><a href="{{ service_unsubscribe_url }}">Unsubscribe</a>', content: undefined,
  previewText: undefined, replyTo: ['reply@news.example.com'], cc: [], bcc: [], sendNow: false, scheduledAt: undefined,
  batchSize: undefined, batchWindowMinutes: undefined, ...over,
});

async function waitFor<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const get = async (id: string, teamId = TEAM) => (await client.call.getCampaign({ teamId, campaignId: id })).campaign!;
const callsOf = (campaignId: string) => sendCalls.filter((c) => c.emails[0]?.campaignId === campaignId);
/** A batch's chunks are handed over several at once, so they may arrive in any order: in (batch, chunk) order. */
const chunkOrder = (key: string | undefined) => (/:batch:(\d+):chunk:(\d+)$/.exec(key ?? '') ?? []).slice(1).map(Number);
const callsInChunkOrder = (campaignId: string) => [...callsOf(campaignId)].sort((a, b) => {
  const [x, y] = [chunkOrder(a.idempotencyKey), chunkOrder(b.idempotencyKey)];
  return (x[0]! - y[0]!) || (x[1]! - y[1]!);
});
const recipientsOf = (campaignId: string) => {
  // One entry per distinct chunk (a replay of a key hands nothing new over).
  const byKey = new Map(callsOf(campaignId).map((c) => [c.idempotencyKey, c.emails.map((e) => e.to[0])]));
  return [...byKey.values()].flat();
};

describe('creating and managing campaigns', () => {
  beforeAll(() => {
    makeBook('book_small', 3);
  });

  it('saves a draft with defaults and the full shape', async () => {
    const c = (await client.call.createCampaign(base())).campaign!;
    expect(c).toMatchObject({
      teamId: TEAM, name: 'Spring sale', status: campaignsV1.CampaignStatus.CAMPAIGN_STATUS_DRAFT, scheduledAt: undefined, batchSize: 100,
      batchWindowMinutes: 5, total: 0, sent: 0, replyTo: ['reply@news.example.com'], cc: [], bcc: [], contactBookId: 'book_small',
    });
    expect(c.id).toMatch(/^cmp_/);
  });

  it('refuses content without the unsubscribe placeholder, naming it', async () => {
    const p = client.call.createCampaign(base({ html: '<p>no link</p>' }));
    expect(await code(p)).toBe('INVALID_ARGUMENT');
    expect(await message(client.call.createCampaign(base({ html: '<p>no link</p>' })))).toContain('{{service_unsubscribe_url}}');
    expect(await code(client.call.createCampaign(base({ html: undefined, content: 'Bye: {{service_unsubscribe_url}}' })))).toBe('OK');
  });

  it('checks the From domain, the book, the batch size and the schedule', async () => {
    expect(await message(client.call.createCampaign(base({ from: 'a@pending.example.com' })))).toMatch(/not a verified domain/);
    expect(await code(client.call.createCampaign(base({ from: 'a@unknown.example.com' })))).toBe('INVALID_ARGUMENT');
    expect(await code(client.call.createCampaign(base({ contactBookId: 'book_missing' })))).toBe('NOT_FOUND');
    expect(await code(client.call.createCampaign(base({ teamId: OTHER_TEAM })))).toBe('NOT_FOUND');
    expect(await code(client.call.createCampaign(base({ batchSize: 0 })))).toBe('INVALID_ARGUMENT');
    expect(await code(client.call.createCampaign(base({ batchSize: 100_001 })))).toBe('INVALID_ARGUMENT');
    expect(await code(client.call.createCampaign(base({ scheduledAt: 'at some point' })))).toBe('INVALID_ARGUMENT');
    expect(await code(client.call.createCampaign(base({ scheduledAt: 'yesterday at 9am' })))).toBe('INVALID_ARGUMENT');
  });

  it('schedules from natural language and ISO, resolved to the timestamp', async () => {
    const before = Date.now();
    const c = (await client.call.createCampaign(base({ scheduledAt: 'in 2 hours' }))).campaign!;
    expect(c.status).toBe(campaignsV1.CampaignStatus.CAMPAIGN_STATUS_SCHEDULED);
    const at = c.scheduledAt!.getTime();
    expect(at).toBeGreaterThanOrEqual(before + 2 * 3600_000 - 1000);
    expect(at).toBeLessThanOrEqual(Date.now() + 2 * 3600_000 + 1000);
    const tomorrow = (await client.call.createCampaign(base({ scheduledAt: 'tomorrow at 9am' }))).campaign!;
    const d = new Date();
    expect(tomorrow.scheduledAt?.toISOString()).toBe(new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1, 9)).toISOString());
    const iso = (await client.call.createCampaign(base({ scheduledAt: '2099-01-02T03:04:05Z' }))).campaign!;
    expect(iso.scheduledAt?.toISOString()).toBe('2099-01-02T03:04:05.000Z');
  });

  it('lists newest first, gets, scopes by team, lists a book\'s campaigns, reschedules, refuses wrong transitions, deletes', async () => {
    makeBook('book_list', 2);
    const first = (await client.call.createCampaign(base({ name: 'First', contactBookId: 'book_list' }))).campaign!;
    const second = (await client.call.createCampaign(base({ name: 'Second', contactBookId: 'book_list' }))).campaign!;
    const listed = (await client.call.listCampaigns({ teamId: TEAM })).campaigns;
    expect(listed[0]).toMatchObject({ id: second.id, name: 'Second', subject: 'Hi {{firstName}}', status: campaignsV1.CampaignStatus.CAMPAIGN_STATUS_DRAFT, sent: 0 });
    expect(listed.map((c) => c.id).indexOf(first.id)).toBe(1);
    expect((await client.call.listCampaigns({ teamId: OTHER_TEAM })).campaigns).toEqual([]);
    expect(await code(client.call.getCampaign({ teamId: OTHER_TEAM, campaignId: first.id }))).toBe('NOT_FOUND');
    expect((await client.call.listCampaignsForBook({ teamId: TEAM, contactBookId: 'book_list' })).campaigns.map((c) => c.name)).toEqual(['Second', 'First']);

    expect(await code(client.call.pauseCampaign({ teamId: TEAM, campaignId: first.id }))).toBe('FAILED_PRECONDITION');
    expect(await code(client.call.resumeCampaign({ teamId: TEAM, campaignId: first.id }))).toBe('FAILED_PRECONDITION');
    const s = (await client.call.scheduleCampaign({ teamId: TEAM, campaignId: first.id, scheduledAt: 'in 3 hours', batchSize: 7, batchWindowMinutes: 1 })).campaign!;
    expect(s).toMatchObject({ status: campaignsV1.CampaignStatus.CAMPAIGN_STATUS_SCHEDULED, batchSize: 7, batchWindowMinutes: 1 });
    expect(await code(client.call.scheduleCampaign({ teamId: TEAM, campaignId: first.id, batchSize: 0 }))).toBe('INVALID_ARGUMENT');
    expect(await code(client.call.scheduleCampaign({ teamId: OTHER_TEAM, campaignId: first.id }))).toBe('NOT_FOUND');

    expect(await code(client.call.deleteCampaign({ teamId: OTHER_TEAM, campaignId: first.id }))).toBe('NOT_FOUND');
    await client.call.deleteCampaign({ teamId: TEAM, campaignId: first.id });
    expect(deleteCalls).toContainEqual({ teamId: TEAM, campaignId: first.id });
    expect(await code(client.call.getCampaign({ teamId: TEAM, campaignId: first.id }))).toBe('NOT_FOUND');
  });
});

describe('sending', () => {
  it('sends every subscribed contact exactly once in batches, rendered, with unsubscribe headers, then completes', async () => {
    const contacts = makeBook('book_send', 250, TEAM, (i) => i % 10 === 3);
    const subscribed = contacts.filter((c) => c.subscribed);
    // Two suppressed addresses: handed over like the rest (the emails service refuses them), not in the total.
    suppressed.add(subscribed[5]!.email);
    suppressed.add(subscribed[200]!.email);
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_send', sendNow: true, batchSize: 120, batchWindowMinutes: 1 }))).campaign!;
    expect(c.status).toBe(campaignsV1.CampaignStatus.CAMPAIGN_STATUS_SENDING);
    const done = await waitFor('completion', async () => {
      const g = await get(c.id);
      return g.status === campaignsV1.CampaignStatus.CAMPAIGN_STATUS_COMPLETED ? g : undefined;
    });
    expect(done.total).toBe(subscribed.length - 2);
    const to = recipientsOf(c.id);
    expect(to.length).toBe(subscribed.length);
    expect(new Set(to)).toEqual(new Set(subscribed.map((x) => x.email)));
    const calls = callsInChunkOrder(c.id);
    expect(calls.every((k) => k.emails.length <= 100 && k.teamId === TEAM)).toBe(true);
    // Batches of 120 in chunks of at most 100: 100 + 20, 100 + 5.
    expect(calls.map((k) => k.emails.length)).toEqual([100, 20, 100, 5]);
    expect(new Set(calls.map((k) => k.idempotencyKey)).size).toBe(calls.length);

    const first = calls[0]!.emails[0]!;
    const contact = subscribed[0]!;
    expect(first).toMatchObject({ to: [contact.email], from: 'News <hello@news.example.com>', subject: `Hi ${contact.firstName}`, campaignId: c.id, contactId: contact.id, replyTo: ['reply@news.example.com'] });
    const link = /href="([^"]+)"/.exec(first.html ?? '')?.[1];
    expect(link).toMatch(/^https:\/\/mail\.example\.test\/v1\/campaigns\/unsubscribe\?token=[\w-]+\.[\w-]+$/);
    expect(first.html).toContain(`Hello ${contact.firstName} (free)`);
    expect(first.headers).toEqual({ 'List-Unsubscribe': `<${link}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' });
  });

  it('counts a book larger than one suppression check (1,000 addresses) without being refused', async () => {
    const contacts = makeBook('book_large', 2300);
    suppressed.add(contacts[10]!.email);
    suppressed.add(contacts[2100]!.email);
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_large', sendNow: true, batchSize: 5000, batchWindowMinutes: 0 }))).campaign!;
    const done = await waitFor('completion', async () => {
      const g = await get(c.id);
      return g.status === campaignsV1.CampaignStatus.CAMPAIGN_STATUS_COMPLETED ? g : undefined;
    });
    expect(done.total).toBe(2300 - 2);
    expect(recipientsOf(c.id)).toHaveLength(2300);
  });

  it('counts the book in pages of 5,000, sends the first batch from the count\'s read, in chunks of 100', async () => {
    const contacts = makeBook('book_ahead', 450);
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_ahead', sendNow: true, batchSize: 1000, batchWindowMinutes: 0 }))).campaign!;
    await waitFor('completion', async () => ((await get(c.id)).status === campaignsV1.CampaignStatus.CAMPAIGN_STATUS_COMPLETED ? true : undefined));
    expect(callsInChunkOrder(c.id).map((k) => k.emails.length)).toEqual([100, 100, 100, 100, 50]);
    const to = recipientsOf(c.id);
    expect(to).toHaveLength(450);
    expect(new Set(to)).toEqual(new Set(contacts.map((x) => x.email)));
    // One read counts the total and serves the sending: not one per chunk, not a second one to send.
    expect(bookReads.filter((r) => r.book === 'book_ahead')).toEqual([{ book: 'book_ahead', limit: 5000 }]);
  });

  it('hands several chunks of a batch over at once, and still moves the cursor over them in order', async () => {
    const contacts = makeBook('book_window', 950);
    sendDelayMs = 100;
    maxSendsInFlight = 0;
    try {
      const c = (await client.call.createCampaign(base({ contactBookId: 'book_window', sendNow: true, batchSize: 1000, batchWindowMinutes: 0 }))).campaign!;
      await waitFor('completion', async () => ((await get(c.id)).status === campaignsV1.CampaignStatus.CAMPAIGN_STATUS_COMPLETED ? true : undefined));
      expect(maxSendsInFlight).toBeGreaterThan(1);
      const keys = callsOf(c.id).map((k) => k.idempotencyKey);
      expect(keys).toHaveLength(10);
      expect(new Set(keys).size).toBe(10);
      const to = recipientsOf(c.id);
      expect(to).toHaveLength(950);
      expect(new Set(to)).toEqual(new Set(contacts.map((x) => x.email)));
    } finally {
      sendDelayMs = 0;
    }
  });

  it('pause stops between batches; resume continues from the cursor without repeats', async () => {
    const contacts = makeBook('book_pause', 300);
    // Batches 3 s apart: the pause lands well before the second is due.
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_pause', sendNow: true, batchSize: 100, batchWindowMinutes: 10 }))).campaign!;
    await waitFor('first batch', () => (callsOf(c.id).length >= 1 ? true : undefined));
    await client.call.pauseCampaign({ teamId: TEAM, campaignId: c.id });
    expect((await get(c.id)).status).toBe(campaignsV1.CampaignStatus.CAMPAIGN_STATUS_PAUSED);
    const afterPause = recipientsOf(c.id).length;
    expect(afterPause).toBe(100);
    await new Promise((r) => setTimeout(r, 10 * WINDOW_UNIT_MS + 600));
    expect(recipientsOf(c.id).length).toBe(afterPause);
    expect(await code(client.call.pauseCampaign({ teamId: TEAM, campaignId: c.id }))).toBe('FAILED_PRECONDITION');

    await client.call.resumeCampaign({ teamId: TEAM, campaignId: c.id });
    await waitFor('completion', async () => ((await get(c.id)).status === campaignsV1.CampaignStatus.CAMPAIGN_STATUS_COMPLETED ? true : undefined));
    const to = recipientsOf(c.id);
    expect(to.length).toBe(300);
    expect(new Set(to).size).toBe(300);
    expect(new Set(to)).toEqual(new Set(contacts.map((x) => x.email)));
  });

  it('a lost SendBatch response is retried with the same idempotency key: nobody is sent twice or skipped', async () => {
    const contacts = makeBook('book_retry', 150);
    failAfterAccepting = 1;
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_retry', sendNow: true, batchSize: 150, batchWindowMinutes: 0 }))).campaign!;
    await waitFor('completion', async () => ((await get(c.id)).status === campaignsV1.CampaignStatus.CAMPAIGN_STATUS_COMPLETED ? true : undefined));
    const calls = callsOf(c.id);
    // Both chunks were handed over at once and the first call to arrive lost its answer: the cursor stayed
    // before that chunk, and the retry asked it again with its key (a replay), and the other chunk too
    // when it came later in the book (a replay as well). Never a third time, never under a new key.
    const keys = calls.map((k) => k.idempotencyKey);
    expect(new Set(keys).size).toBe(2);
    expect(keys.filter((k) => k === keys[0])).toHaveLength(2);
    expect(keys.filter((k) => k !== keys[0]).length).toBeLessThanOrEqual(2);
    const to = recipientsOf(c.id);
    expect(to.length).toBe(150);
    expect(new Set(to)).toEqual(new Set(contacts.map((x) => x.email)));
  });

  it('a scheduled campaign starts by itself when its time comes', async () => {
    makeBook('book_sched', 5);
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_sched', scheduledAt: new Date(Date.now() + 5_000).toISOString() }))).campaign!;
    expect(c.status).toBe(campaignsV1.CampaignStatus.CAMPAIGN_STATUS_SCHEDULED);
    expect(callsOf(c.id)).toEqual([]);
    await waitFor('completion', async () => ((await get(c.id)).status === campaignsV1.CampaignStatus.CAMPAIGN_STATUS_COMPLETED ? true : undefined));
    expect(recipientsOf(c.id).length).toBe(5);
  });
});

describe('counters and unsubscribes', () => {
  it('counts email events once each, opens and clicks once per email, ignoring other campaigns', async () => {
    makeBook('book_count', 1);
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_count' }))).campaign!;
    const js = jetstream(nc);
    const publish = (e: EventEnvelope<unknown>, msgId = e.id) => js.publish(subjectFor(e.type), encodeEvent(e), { msgID: msgId });
    const data = (id: string, extra: Record<string, unknown> = {}) => ({ id, status: 'X', from: 'a', to: ['x@y.z'], subject: 's', occurredAt: new Date().toISOString(), campaignId: c.id, ...extra });
    const sent = createEvent('email.sent', TEAM, data('em1'));
    await publish(sent);
    await publish(sent, `${sent.id}-again`); // redelivered under another message id: still counted once
    await publish(createEvent('email.sent', TEAM, data('em2')));
    await publish(createEvent('email.delivered', TEAM, data('em1')));
    await publish(createEvent('email.opened', TEAM, data('em1')));
    await publish(createEvent('email.opened', TEAM, data('em1'))); // second open of the same email
    await publish(createEvent('email.clicked', TEAM, data('em2')));
    await publish(createEvent('email.bounced', TEAM, data('em2', { bounce: { type: 'Permanent', subType: 'General', message: '550' } })));
    await publish(createEvent('email.bounced', TEAM, data('em3', { bounce: { type: 'Transient', subType: 'General', message: '450' } })));
    await publish(createEvent('email.complained', TEAM, data('em1')));
    await publish(createEvent('email.sent', TEAM, { ...data('em9'), campaignId: 'cmp_other' }));
    // em3 bounced without an email.sent (refused outright): a bounce counts as sent; em2's bounce does not count it twice.
    const expected = { sent: 3, delivered: 1, opened: 1, clicked: 1, bounced: 2, hardBounced: 1, complained: 1, unsubscribed: 0 };
    const counted = await waitFor('counters', async () => {
      const g = await get(c.id);
      return g.complained === 1 && g.bounced === 2 && g.sent === 3 && g.clicked === 1 ? g : undefined;
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(await get(c.id)).toMatchObject(expected);
    expect(counted).toMatchObject(expected);
  });

  it('a counting cut short by a crash is finished by the redelivery: never lost, never repeated', async () => {
    makeBook('book_crash', 1);
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_crash' }))).campaign!;
    const db = svc.infra.mongo.db;
    const js = jetstream(nc);
    const data = (id: string) => ({ id, status: 'X', from: 'a', to: ['x@y.z'], subject: 's', occurredAt: new Date().toISOString(), campaignId: c.id });
    const delivered = createEvent('email.delivered', TEAM, data('em_c1'));
    const sent = createEvent('email.sent', TEAM, data('em_c1'));
    const markOf = (e: EventEnvelope<unknown>) => `count:${c.id}:${e.type.slice('email.'.length)}:em_c1`;
    // What a process killed part way leaves (its lease short, so the redelivery may take over soon):
    // for `delivered` the key claimed and nothing added (the old code lost this count for good);
    // for `sent` the count added, the mark not yet finished.
    const mark = (e: EventEnvelope<unknown>) => ({ _id: markOf(e), eventId: e.id, target: c.id, pending: true, until: new Date(Date.now() + 300), createdAt: new Date() });
    await db.collection('once_keys').insertMany([mark(delivered), mark(sent)] as never[]);
    await db.collection('campaigns').updateOne({ _id: c.id as never }, { $inc: { sent: 1 }, $push: { pending: markOf(sent) } as never });
    expect(await get(c.id)).toMatchObject({ sent: 1, delivered: 0 });
    await new Promise((r) => setTimeout(r, 350));

    await js.publish(subjectFor(delivered.type), encodeEvent(delivered), { msgID: delivered.id });
    await js.publish(subjectFor(sent.type), encodeEvent(sent), { msgID: sent.id });
    // A mark is finished by itself (pending false) or, counted by a batch, by its batch's settlement on the campaign.
    const finished = async (m: Record<string, unknown>) => m.pending === false
      || (typeof m.batchId === 'string' && (await db.collection('once_keys').countDocuments({ _id: settlementIdOf(m.batchId, c.id) as never })) === 1);
    await waitFor('the redeliveries', async () => {
      const marks = await db.collection('once_keys').find({ _id: { $in: [markOf(delivered), markOf(sent)] } as never }).toArray();
      return marks.length === 2 && (await Promise.all(marks.map(finished))).every(Boolean) ? true : undefined;
    });
    expect(await get(c.id)).toMatchObject({ sent: 1, delivered: 1 });
    // The last step (unpend) follows the finished mark: wait for it rather than race it.
    await waitFor('the pending list emptied', async () => {
      const doc = await db.collection('campaigns').findOne({ _id: c.id as never });
      return ((doc?.pending ?? []) as string[]).length === 0 ? true : undefined;
    });
    expect(await get(c.id)).toMatchObject({ sent: 1, delivered: 1 });
  });

  it('the signed link unsubscribes the contact through contacts, counts once, and forged tokens are NOT_FOUND', async () => {
    makeBook('book_unsub', 2);
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_unsub', sendNow: true }))).campaign!;
    await waitFor('completion', async () => ((await get(c.id)).status === campaignsV1.CampaignStatus.CAMPAIGN_STATUS_COMPLETED ? true : undefined));
    const email = callsOf(c.id)[0]!.emails[0]!;
    const token = /unsubscribe\?token=([^"]+)"/.exec(email.html ?? '')?.[1] ?? '';
    const res = await client.call.unsubscribeFromCampaign({ token });
    expect(res).toEqual({ teamId: TEAM, campaignId: c.id, contactId: email.contactId, email: email.to[0] });
    await client.call.unsubscribeFromCampaign({ token, reason: 'one-click' });
    expect(unsubscribeCalls.filter((u) => u.campaignId === c.id)).toHaveLength(2);
    expect(unsubscribeCalls.find((u) => u.campaignId === c.id)).toMatchObject({
      teamId: TEAM, contactId: email.contactId, reasonCode: contactsV1.UnsubscribeReason.UNSUBSCRIBE_REASON_UNSUBSCRIBE, source: c.id,
    });
    expect((await get(c.id)).unsubscribed).toBe(1);
    expect(await code(client.call.unsubscribeFromCampaign({ token: `${token.split('.')[0]}.AAAA` }))).toBe('NOT_FOUND');
    expect(await code(client.call.unsubscribeFromCampaign({ token: 'nonsense' }))).toBe('NOT_FOUND');
  });
});

describe('campaigns never hang', () => {
  const SCHEDULED = campaignsV1.CampaignStatus.CAMPAIGN_STATUS_SCHEDULED;
  const PAUSED = campaignsV1.CampaignStatus.CAMPAIGN_STATUS_PAUSED;
  const COMPLETED = campaignsV1.CampaignStatus.CAMPAIGN_STATUS_COMPLETED;

  it('pausing and resuming a scheduled campaign keeps it scheduled for the same time', async () => {
    makeBook('book_keep', 2);
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_keep', scheduledAt: 'in 2 hours' }))).campaign!;
    expect((await client.call.pauseCampaign({ teamId: TEAM, campaignId: c.id })).campaign!.status).toBe(PAUSED);
    const resumed = (await client.call.resumeCampaign({ teamId: TEAM, campaignId: c.id })).campaign!;
    expect(resumed.status).toBe(SCHEDULED);
    expect(resumed.scheduledAt?.toISOString()).toBe(c.scheduledAt?.toISOString());
    // Several sender passes later it still waits, and nothing was handed over.
    await new Promise((r) => setTimeout(r, 500));
    expect((await get(c.id)).status).toBe(SCHEDULED);
    expect(callsOf(c.id)).toEqual([]);
  });

  it('refuses Reply-To, Cc and Bcc that are not addresses, naming the field', async () => {
    expect(await code(client.call.createCampaign(base({ replyTo: ['not an address'], sendNow: true })))).toBe('INVALID_ARGUMENT');
    expect(await message(client.call.createCampaign(base({ replyTo: ['not an address'] })))).toMatch(/^replyTo: /);
    expect(await message(client.call.createCampaign(base({ cc: ['ok@example.org', 'bad@'] })))).toMatch(/^cc: /);
    expect(await message(client.call.createCampaign(base({ bcc: ['x@example.org\r\nBcc: y@example.org'] })))).toMatch(/^bcc: /);
    expect(await code(client.call.createCampaign(base({ replyTo: ['"Last, First" <a@example.org>, b@example.org'], cc: ['C <c@example.org>'] })))).toBe('OK');
  });

  it('a permanent refusal of SendBatch pauses the campaign with the reason instead of retrying forever', async () => {
    makeBook('book_refused', 3);
    // Due a few seconds on: the peer refuses it from before it is due, however slow the create was.
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_refused', scheduledAt: new Date(Date.now() + 5_000).toISOString() }))).campaign!;
    refusedCampaigns.add(c.id);
    const paused = await waitFor('paused', async () => {
      const g = await get(c.id);
      return g.status === PAUSED ? g : undefined;
    });
    expect(paused.pausedReason).toMatch(/not verified/);
    const asked = callsOf(c.id).length;
    expect(asked).toBe(1);
    await new Promise((r) => setTimeout(r, 800));
    expect(callsOf(c.id).length).toBe(asked);

    // Once the cause is gone, a resume sends the same chunk (same key) and completes; the reason is cleared.
    refusedCampaigns.delete(c.id);
    expect((await client.call.resumeCampaign({ teamId: TEAM, campaignId: c.id })).campaign!.pausedReason).toBeUndefined();
    await waitFor('completion', async () => ((await get(c.id)).status === COMPLETED ? true : undefined));
    expect(recipientsOf(c.id)).toHaveLength(3);
  });

  it('a contact book deleted after scheduling pauses the campaign; schedule and resume then refuse it, naming the book', async () => {
    makeBook('book_gone', 2);
    // Due a few seconds on: the book is gone before it is due, however slow the create was.
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_gone', scheduledAt: new Date(Date.now() + 5_000).toISOString() }))).campaign!;
    books.delete('book_gone');
    const paused = await waitFor('paused', async () => {
      const g = await get(c.id);
      return g.status === PAUSED ? g : undefined;
    });
    expect(paused.pausedReason).toMatch(/book not found/);
    expect(callsOf(c.id)).toEqual([]);
    expect(await code(client.call.resumeCampaign({ teamId: TEAM, campaignId: c.id }))).toBe('FAILED_PRECONDITION');
    expect(await message(client.call.resumeCampaign({ teamId: TEAM, campaignId: c.id }))).toMatch(/^contactBookId: /);
    expect(await message(client.call.scheduleCampaign({ teamId: TEAM, campaignId: c.id, scheduledAt: 'in 1 hour' }))).toMatch(/^contactBookId: /);
    expect((await get(c.id)).status).toBe(PAUSED);
  });

  it('a contact whose address the emails service refuses is left out; the rest of the chunk and the campaign go on', async () => {
    const contacts = makeBook('book_badaddr', 5);
    contacts[1]!.email = 'bad-one@book_badaddr.test';
    contacts[3]!.email = 'bad-two@book_badaddr.test';
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_badaddr', sendNow: true }))).campaign!;
    await waitFor('completion', async () => ((await get(c.id)).status === COMPLETED ? true : undefined));
    expect(recipientsOf(c.id).sort()).toEqual([contacts[0]!.email, contacts[2]!.email, contacts[4]!.email].sort());
    // The full chunk, then without the first bad one, then without both: one key throughout.
    expect(callsOf(c.id).map((k) => k.emails.length)).toEqual([5, 4, 3]);
    expect(new Set(callsOf(c.id).map((k) => k.idempotencyKey)).size).toBe(1);
  });

  it('a transient failure keeps being retried with backoff until it passes', async () => {
    makeBook('book_down', 2);
    unavailableCalls = 3;
    const c = (await client.call.createCampaign(base({ contactBookId: 'book_down', sendNow: true }))).campaign!;
    await waitFor('completion', async () => ((await get(c.id)).status === COMPLETED ? true : undefined));
    // Three refusals then the accepted call, all with the chunk's one key.
    expect(callsOf(c.id).map((k) => k.idempotencyKey)).toEqual(Array(4).fill(callsOf(c.id)[0]!.idempotencyKey));
    expect(recipientsOf(c.id)).toHaveLength(2);
  });
});
