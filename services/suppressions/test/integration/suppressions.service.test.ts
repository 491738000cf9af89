import { status, type ServiceError } from '@grpc/grpc-js';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  createEvent, createGrpcClient, createLogger, encodeEvent, startService, subjectFor, type EventEnvelope, type RunningService,
  type UpstreamClient,
} from '@mailfleet/kit';
import { suppressionsV1 } from '@mailfleet/proto';
import { durablesIdle, isolatedNats, stopNats, testMongoUrl, uniqueDbName } from '@mailfleet/testkit';
import { MongoClient, type Document } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSuppressionsConfig } from '../../src/config.js';
import { AUTO_SUPPRESSION_DURABLE } from '../../src/events/auto-suppression.consumer.js';
import { createSuppressionsRepository, suppressionId } from '../../src/repositories/suppressions.repository.js';
import { createSuppressionsServer } from '../../src/server.js';

const R = suppressionsV1.SuppressionReason;
const logger = createLogger({ service: 'suppressions-test', level: 'silent' });
const dbName = uniqueDbName('supp');
let natsInstance: string;
let natsUrl: string;
let svc: RunningService | undefined;
let client: UpstreamClient<suppressionsV1.SuppressionsServiceClient>;
let nc: NatsConnection;
let js: JetStreamClient;
let jsm: JetStreamManager;

async function startSuppressions(): Promise<RunningService> {
  const config = loadSuppressionsConfig({
    GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: testMongoUrl(), MONGO_DB: dbName, NATS_URL: natsUrl, LOG_LEVEL: 'silent',
  });
  const s = await startService({ name: 'suppressions', config, env: {}, logger, build: (infra) => createSuppressionsServer({ config, infra }) });
  client?.close();
  client = createGrpcClient({ name: 'suppressions', address: `127.0.0.1:${s.grpc.port}`, ctor: suppressionsV1.SuppressionsServiceClient, logger });
  return s;
}

beforeAll(async () => {
  // A NATS of this file's own: the durable's pending count then reflects only the events published here.
  ({ instance: natsInstance, url: natsUrl } = await isolatedNats());
  svc = await startSuppressions();
  nc = await connect({ servers: natsUrl });
  js = jetstream(nc);
  jsm = await jetstreamManager(nc);
});
afterAll(async () => {
  client?.close();
  await nc?.close();
  await svc?.infra.mongo.db.dropDatabase();
  await svc?.shutdown('test over');
  await stopNats({ instance: natsInstance }).catch(() => undefined);
});

/** Entries added in the same millisecond tie on createdAt; a test that asserts newest-first order spaces them out. */
const tick = () => new Promise((r) => setTimeout(r, 3));
const code = (p: Promise<unknown>) => p.then(() => 'OK', (e: ServiceError) => status[e.code]);
let teamSeq = 0;
const newTeam = () => `team_it_${Date.now().toString(36)}_${++teamSeq}`;

async function publish(e: EventEnvelope<unknown>, msgID = e.id): Promise<void> {
  await js.publish(subjectFor(e.type), encodeEvent(e), { msgID });
}

/** Resolves once the durable has handled every event published so far. */
const consumerIdle = (timeoutMs = 20_000): Promise<void> => durablesIdle(jsm, [AUTO_SUPPRESSION_DURABLE], { timeoutMs });

async function list(teamId: string, req: Partial<suppressionsV1.ListSuppressionsRequest> = {}) {
  return client.call.listSuppressions({ teamId, page: 1, limit: 100, reason: 0, ...req });
}

const bounce = (teamId: string, emailId: string, to: string[], type = 'Permanent') =>
  createEvent('email.bounced', teamId, { id: emailId, to, from: 'app@sender.test', subject: 'hi', status: 'BOUNCED', bounce: { type, subType: 'General', message: '550 5.1.1 no such user' } });

describe('the suppression list over gRPC', () => {
  it('adds with normalisation, updates instead of duplicating, lists newest first, removes', async () => {
    const teamId = newTeam();
    const a = await client.call.addSuppression({ teamId, email: '  Alice@Example.COM ', reason: R.SUPPRESSION_REASON_MANUAL });
    expect(a.suppression).toMatchObject({ teamId, email: 'alice@example.com', reason: R.SUPPRESSION_REASON_MANUAL, source: undefined });
    expect(a.suppression!.id).toMatch(/^sup_/);
    await tick();
    await client.call.addSuppression({ teamId, email: 'bob@example.com', reason: R.SUPPRESSION_REASON_COMPLAINT, source: 'em_1' });

    const again = await client.call.addSuppression({ teamId, email: 'alice@example.com', reason: R.SUPPRESSION_REASON_UNSUBSCRIBE, source: 'form' });
    expect(again.suppression).toMatchObject({ id: a.suppression!.id, reason: R.SUPPRESSION_REASON_UNSUBSCRIBE, source: 'form' });
    expect(again.suppression!.createdAt).toEqual(a.suppression!.createdAt);
    const cleared = await client.call.addSuppression({ teamId, email: 'ALICE@example.com', reason: R.SUPPRESSION_REASON_MANUAL });
    expect(cleared.suppression).toMatchObject({ id: a.suppression!.id, reason: R.SUPPRESSION_REASON_MANUAL, source: undefined });

    const listed = await list(teamId);
    expect(listed.total).toBe(2);
    expect(listed.suppressions.map((s) => s.email)).toEqual(['bob@example.com', 'alice@example.com']);

    expect(await code(client.call.removeSuppression({ teamId, email: 'Alice@Example.com' }))).toBe('OK');
    expect(await code(client.call.removeSuppression({ teamId, email: 'alice@example.com' }))).toBe('NOT_FOUND');
    expect(await code(client.call.removeSuppression({ teamId, email: 'not an address' }))).toBe('INVALID_ARGUMENT');
    expect((await list(teamId)).suppressions.map((s) => s.email)).toEqual(['bob@example.com']);
  });

  it('keeps teams apart', async () => {
    const a = newTeam();
    const b = newTeam();
    await client.call.addSuppression({ teamId: a, email: 'shared@example.com', reason: R.SUPPRESSION_REASON_MANUAL });
    expect((await list(b)).total).toBe(0);
    expect(await code(client.call.removeSuppression({ teamId: b, email: 'shared@example.com' }))).toBe('NOT_FOUND');
    expect((await client.call.checkSuppressed({ teamId: b, emails: ['shared@example.com'] })).suppressedEmails).toEqual([]);
    expect((await client.call.checkSuppressed({ teamId: a, emails: ['shared@example.com'] })).suppressedEmails).toEqual(['shared@example.com']);
  });

  it('holds one entry per address when many replicas add it at once (one derived id)', async () => {
    const teamId = newTeam();
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) =>
      client.call.addSuppression({ teamId, email: i % 2 ? 'race@example.com' : 'RACE@example.com', reason: R.SUPPRESSION_REASON_MANUAL, source: `s${i}` })));
    expect(new Set(results.map((r) => r.suppression!.id)).size).toBe(1);
    const listed = await list(teamId);
    expect(listed.total).toBe(1);
    expect(listed.suppressions[0]!.email).toBe('race@example.com');
  });

  it('pages, filters by reason, and searches literally (regex metacharacters match themselves)', async () => {
    const teamId = newTeam();
    const entries: [string, suppressionsV1.SuppressionReason][] = [
      ['user+tag@example.com', R.SUPPRESSION_REASON_MANUAL],
      ['usertag@example.com', R.SUPPRESSION_REASON_MANUAL],
      ['a.b@example.com', R.SUPPRESSION_REASON_HARD_BOUNCE],
      ['axb@example.com', R.SUPPRESSION_REASON_COMPLAINT],
      ['zed@other.org', R.SUPPRESSION_REASON_UNSUBSCRIBE],
      ['first-last@ex-ample.com', R.SUPPRESSION_REASON_UNSUBSCRIBE],
      ['slash/ed@example.com', R.SUPPRESSION_REASON_MANUAL],
    ];
    for (const [email, reason] of entries) {
      await client.call.addSuppression({ teamId, email, reason });
      await tick();
    }

    const emails = async (req: Partial<suppressionsV1.ListSuppressionsRequest>) => (await list(teamId, req)).suppressions.map((s) => s.email).sort();
    expect(await emails({ search: '+tag' })).toEqual(['user+tag@example.com']);
    expect(await emails({ search: 'a.b' })).toEqual(['a.b@example.com']);
    expect(await emails({ search: '.' })).toEqual(entries.map(([e]) => e).sort());
    expect(await emails({ search: 'b@' })).toEqual(['a.b@example.com', 'axb@example.com']);
    expect(await emails({ search: '.*' })).toEqual([]);
    expect(await emails({ search: '[a-z]' })).toEqual([]);
    expect(await emails({ search: '(' })).toEqual([]);
    expect(await emails({ search: 'OTHER.ORG' })).toEqual(['zed@other.org']);
    expect(await emails({ search: '-last@ex-' })).toEqual(['first-last@ex-ample.com']);
    expect(await emails({ search: 'h/e' })).toEqual(['slash/ed@example.com']);
    expect(await emails({ search: '^zed' })).toEqual([]);
    expect(await emails({ search: 'org$' })).toEqual([]);
    expect(await emails({ search: '\\' })).toEqual([]);
    expect(await emails({ reason: R.SUPPRESSION_REASON_MANUAL })).toEqual(['slash/ed@example.com', 'user+tag@example.com', 'usertag@example.com']);
    expect(await emails({ reason: R.SUPPRESSION_REASON_MANUAL, search: '+' })).toEqual(['user+tag@example.com']);
    expect((await list(teamId, { reason: R.SUPPRESSION_REASON_HARD_BOUNCE })).total).toBe(1);

    const pages = await Promise.all([1, 2, 3, 4].map((page) => list(teamId, { page, limit: 2 })));
    expect(pages.map((p) => p.total)).toEqual([7, 7, 7, 7]);
    expect(pages.map((p) => p.suppressions.length)).toEqual([2, 2, 2, 1]);
    expect(pages.flatMap((p) => p.suppressions.map((s) => s.email))).toEqual(entries.map(([e]) => e).reverse());
    expect(await list(teamId, { page: 5, limit: 2 })).toEqual({ suppressions: [], total: 7 });
    expect(await list(teamId, { page: 2_147_483_647, limit: 100 })).toEqual({ suppressions: [], total: 7 });
    const defaults = await client.call.listSuppressions({ teamId, page: 0, limit: 0, reason: 0 });
    expect(defaults.suppressions).toHaveLength(7);

    expect(await code(list(teamId, { page: -1 }))).toBe('INVALID_ARGUMENT');
    expect(await code(list(teamId, { limit: 101 }))).toBe('INVALID_ARGUMENT');
    expect(await code(list(teamId, { search: 'x'.repeat(321) }))).toBe('INVALID_ARGUMENT');
  });

  it('checks up to 1000 addresses in one call, case-insensitively, and refuses more', async () => {
    const teamId = newTeam();
    await client.call.addSuppression({ teamId, email: 'u7@example.com', reason: R.SUPPRESSION_REASON_HARD_BOUNCE, source: 'em_9' });
    await client.call.addSuppression({ teamId, email: 'u999@example.com', reason: R.SUPPRESSION_REASON_MANUAL });
    const emails = Array.from({ length: 1000 }, (_, i) => (i === 7 ? 'U7@EXAMPLE.COM' : `u${i}@example.com`));
    const res = await client.call.checkSuppressed({ teamId, emails });
    expect(res.suppressedEmails).toEqual(['U7@EXAMPLE.COM', 'u999@example.com']);
    expect(res.suppressions.map((s) => [s.email, s.reason, s.source])).toEqual([
      ['u7@example.com', R.SUPPRESSION_REASON_HARD_BOUNCE, 'em_9'], ['u999@example.com', R.SUPPRESSION_REASON_MANUAL, undefined],
    ]);
    expect(await code(client.call.checkSuppressed({ teamId, emails: [...emails, 'one@more.com'] }))).toBe('INVALID_ARGUMENT');
    expect(await code(client.call.checkSuppressed({ teamId: '', emails: ['a@example.com'] }))).toBe('INVALID_ARGUMENT');
  });

  it('reads a check\'s entries by their derived _id, not by a scan of (teamId, email)', async () => {
    const teamId = newTeam();
    await client.call.addSuppression({ teamId, email: 'kept@example.com', reason: R.SUPPRESSION_REASON_MANUAL });
    const mongo = new MongoClient(testMongoUrl(), { monitorCommands: true });
    const finds: Document[] = [];
    mongo.on('commandStarted', (e) => {
      if (e.commandName === 'find') finds.push(e.command);
    });
    try {
      const repo = createSuppressionsRepository(mongo.db(dbName));
      const found = await repo.findByEmails(teamId, ['kept@example.com', 'other@example.com']);
      expect(found.map((f) => [f.id, f.email])).toEqual([[suppressionId(teamId, 'kept@example.com'), 'kept@example.com']]);
      expect(finds).toHaveLength(1);
      expect(finds[0]!['filter']).toEqual({
        _id: { $in: [suppressionId(teamId, 'kept@example.com'), suppressionId(teamId, 'other@example.com')] }, teamId,
      });
    } finally {
      await mongo.close();
    }
  });

  it('moves entries stored under a random id to their derived one at start; a copy already there wins', async () => {
    const teamId = newTeam();
    const mongo = new MongoClient(testMongoUrl());
    try {
      const col = mongo.db(dbName).collection<{ _id: string } & Document>('suppressions');
      const at = new Date('2026-01-02T03:04:05Z');
      const legacy = (id: string, email: string, reason: string) => ({ _id: id, teamId, email, reason, source: 'old', createdAt: at, updatedAt: at });
      // As the older version stored them; the last as a crash in the middle of a move leaves it: both copies.
      await col.insertMany([
        legacy('sup_legacyA', 'a@example.com', 'HARD_BOUNCE'),
        legacy('sup_legacyB', 'b@example.com', 'COMPLAINT'),
        legacy('sup_legacyC', 'c@example.com', 'MANUAL'),
        { ...legacy(suppressionId(teamId, 'c@example.com'), 'c@example.com', 'UNSUBSCRIBE'), source: 'new' },
      ]);
      // Before the restart a check reads by derived id only, so the entries under random ids are not seen.
      expect((await client.call.checkSuppressed({ teamId, emails: ['a@example.com'] })).suppressedEmails).toEqual([]);

      await svc!.shutdown('restart');
      svc = await startSuppressions();

      const ids = (await col.find({ teamId }).toArray()).map((d) => d._id).sort();
      expect(ids).toEqual(['a', 'b', 'c'].map((x) => suppressionId(teamId, `${x}@example.com`)).sort());
      const check = await client.call.checkSuppressed({ teamId, emails: ['A@example.com', 'b@example.com', 'c@example.com', 'd@example.com'] });
      expect(check.suppressedEmails).toEqual(['A@example.com', 'b@example.com', 'c@example.com']);
      expect(check.suppressions.map((x) => [x.email, x.reason, x.source, new Date(x.createdAt as Date).toISOString()])).toEqual([
        ['a@example.com', R.SUPPRESSION_REASON_HARD_BOUNCE, 'old', at.toISOString()],
        ['b@example.com', R.SUPPRESSION_REASON_COMPLAINT, 'old', at.toISOString()],
        ['c@example.com', R.SUPPRESSION_REASON_UNSUBSCRIBE, 'new', at.toISOString()],
      ]);
      expect((await list(teamId)).total).toBe(3);
      expect(await code(client.call.removeSuppression({ teamId, email: 'b@example.com' }))).toBe('OK');
      expect((await client.call.checkSuppressed({ teamId, emails: ['b@example.com'] })).suppressedEmails).toEqual([]);
    } finally {
      await mongo.close();
    }
  });

  it('removes an entry a replica of the older version wrote under a random id, beside the derived one', async () => {
    const teamId = newTeam();
    await client.call.addSuppression({ teamId, email: 'both@example.com', reason: R.SUPPRESSION_REASON_MANUAL });
    const mongo = new MongoClient(testMongoUrl());
    try {
      const col = mongo.db(dbName).collection<{ _id: string } & Document>('suppressions');
      await col.insertOne({ _id: 'sup_olderReplica', teamId, email: 'both@example.com', reason: 'MANUAL', createdAt: new Date(), updatedAt: new Date() });
      expect(await code(client.call.removeSuppression({ teamId, email: 'both@example.com' }))).toBe('OK');
      expect(await col.countDocuments({ teamId })).toBe(0);
    } finally {
      await mongo.close();
    }
  });
});

describe('automatic suppression from events (real JetStream)', () => {
  it('suppresses hard-bounced recipients and complainers, ignores soft bounces', async () => {
    const teamId = newTeam();
    await publish(bounce(teamId, 'em_hard', ['Hard@Example.com', 'Also <also@example.com>']));
    await publish(bounce(teamId, 'em_soft', ['soft@example.com'], 'Transient'));
    await publish(createEvent('email.complained', teamId, { id: 'em_spam', to: ['spam@example.com'], status: 'COMPLAINED' }));
    await consumerIdle();

    const listed = await list(teamId);
    expect(listed.suppressions.map((s) => [s.email, s.reason, s.source]).sort()).toEqual([
      ['also@example.com', R.SUPPRESSION_REASON_HARD_BOUNCE, 'em_hard'],
      ['hard@example.com', R.SUPPRESSION_REASON_HARD_BOUNCE, 'em_hard'],
      ['spam@example.com', R.SUPPRESSION_REASON_COMPLAINT, 'em_spam'],
    ]);
    const check = await client.call.checkSuppressed({ teamId, emails: ['hard@example.com', 'soft@example.com', 'spam@example.com'] });
    expect(check.suppressedEmails).toEqual(['hard@example.com', 'spam@example.com']);
  });

  it('suppresses contacts that unsubscribed themselves, not ones a team marked by hand', async () => {
    const teamId = newTeam();
    const data = { contactId: 'ct_1', contactBookId: 'cb_1', email: 'Reader@Example.com', reason: 'UNSUBSCRIBE', source: 'em_campaign_1' };
    await publish(createEvent('contact.unsubscribed', teamId, data));
    await publish(createEvent('contact.unsubscribed', teamId, { ...data, contactId: 'ct_2', email: 'handmade@example.com', reason: 'MANUAL', source: 'api' }));
    await consumerIdle();
    expect((await list(teamId)).suppressions.map((s) => [s.email, s.reason, s.source])).toEqual([
      ['reader@example.com', R.SUPPRESSION_REASON_UNSUBSCRIBE, 'em_campaign_1'],
    ]);
  });

  it('a re-subscribed contact lifts its UNSUBSCRIBE (Unicode address, any case); MANUAL entries stay', async () => {
    const teamId = newTeam();
    const contact = (email: string) => ({ id: 'ct_r', email, firstName: null, lastName: null, subscribed: true, properties: {}, contactBookId: 'cb_1' });
    await publish(createEvent('contact.unsubscribed', teamId, { contactId: 'ct_r', contactBookId: 'cb_1', email: 'Jürgen@Example.com', reason: 'UNSUBSCRIBE', source: null }));
    await client.call.addSuppression({ teamId, email: 'kept@example.com', reason: R.SUPPRESSION_REASON_MANUAL });
    await consumerIdle();
    expect((await client.call.checkSuppressed({ teamId, emails: ['JÜRGEN@example.com'] })).suppressedEmails).toEqual(['JÜRGEN@example.com']);
    await publish(createEvent('contact.resubscribed', teamId, contact('jürgen@example.com')));
    await publish(createEvent('contact.resubscribed', teamId, contact('kept@example.com')));
    await consumerIdle();
    expect((await list(teamId)).suppressions.map((s) => [s.email, s.reason])).toEqual([['kept@example.com', R.SUPPRESSION_REASON_MANUAL]]);
  });

  it('updates an existing entry to the latest automatic reason rather than adding another', async () => {
    const teamId = newTeam();
    const manual = await client.call.addSuppression({ teamId, email: 'kept@example.com', reason: R.SUPPRESSION_REASON_MANUAL });
    await publish(bounce(teamId, 'em_42', ['kept@example.com']));
    // The consumer can look idle before it took the event: wait for the entry to change, then for quiet.
    const deadline = Date.now() + 20_000;
    while ((await list(teamId)).suppressions[0]?.reason !== R.SUPPRESSION_REASON_HARD_BOUNCE && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    await consumerIdle();
    const listed = await list(teamId);
    expect(listed.total).toBe(1);
    expect(listed.suppressions[0]).toMatchObject({ id: manual.suppression!.id, reason: R.SUPPRESSION_REASON_HARD_BOUNCE, source: 'em_42' });
  });

  it('is idempotent on the event id: a republish after a DELETE does not bring the address back', async () => {
    const teamId = newTeam();
    const e = bounce(teamId, 'em_once', ['once@example.com']);
    await publish(e);
    await consumerIdle();
    expect((await list(teamId)).total).toBe(1);
    await client.call.removeSuppression({ teamId, email: 'once@example.com' });
    // Same event id under another message id: past JetStream's duplicate window, only the consumer can tell.
    await publish(e, `${e.id}-republished`);
    await consumerIdle();
    expect((await list(teamId)).total).toBe(0);
    expect((await client.call.checkSuppressed({ teamId, emails: ['once@example.com'] })).suppressedEmails).toEqual([]);
  });

  it('terminates malformed events without holding up the ones behind them', async () => {
    const teamId = newTeam();
    await publish(createEvent('email.bounced', teamId, { id: 'em_bad', to: 'not-an-array', bounce: { type: 'Permanent' } }));
    await js.publish(subjectFor('email.complained'), new TextEncoder().encode('{not json'));
    await publish(createEvent('email.complained', teamId, { id: 'em_good', to: ['after@example.com'] }));
    await consumerIdle();
    expect((await list(teamId)).suppressions.map((s) => s.email)).toEqual(['after@example.com']);
  });

  it('applies events published while the service was down once it is back (durable consumer)', async () => {
    const teamId = newTeam();
    await svc!.shutdown('restart drill');
    svc = undefined;
    await publish(bounce(teamId, 'em_offline', ['offline@example.com']));
    svc = await startSuppressions();
    await consumerIdle();
    expect((await client.call.checkSuppressed({ teamId, emails: ['offline@example.com'] })).suppressedEmails).toEqual(['offline@example.com']);
  });
});
