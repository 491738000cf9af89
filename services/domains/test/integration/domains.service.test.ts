import { createPrivateKey, createPublicKey } from 'node:crypto';
import { status, type ServiceError } from '@grpc/grpc-js';
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  createGrpcClient, createLogger, decodeEvent, startService, type EventEnvelope, type RunningService, type UpstreamClient,
} from '@mailfleet/kit';
import { domainsV1 } from '@mailfleet/proto';
import { startDnsServer, testMongoUrl, testNatsUrl, uniqueDbName, type DnsServer } from '@mailfleet/testkit';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDnsClient } from '../../src/clients/dns.client.js';
import { loadDomainsConfig } from '../../src/config.js';
import { createKeySealer } from '../../src/domain/dkim-keys.js';
import { buildRecords } from '../../src/domain/records.js';
import { createDomainsRepository } from '../../src/repositories/domains.repository.js';
import { verificationStartPatch } from '../../src/rpc/domains.rpc.js';
import { createDomainsServer } from '../../src/server.js';
import { createVerificationWorker } from '../../src/workers/verification.worker.js';

const logger = createLogger({ service: 'domains-test', level: 'silent' });
const dbName = uniqueDbName('domains');
const MASTER_KEY = 'c0ffee'.repeat(10) + 'abcd';
const { DomainStatus } = domainsV1;

let dns: DnsServer;
let svc: RunningService;
let domains: UpstreamClient<domainsV1.DomainsServiceClient>;
let nc: NatsConnection;
const events: EventEnvelope[] = [];

function configEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: testMongoUrl(), MONGO_DB: dbName, NATS_URL: testNatsUrl(),
    LOG_LEVEL: 'silent', DKIM_MASTER_KEY: MASTER_KEY, DNS_SERVERS: dns.address, DNS_TIMEOUT_MS: '500', DNS_TRIES: '1',
    BOUNCE_DOMAIN: 'bounce.mailfleet.test', SPF_INCLUDE: '_spf.mailfleet.test',
    DOMAIN_VERIFY_POLL_INTERVAL_MS: '100', DOMAIN_VERIFY_RETRY_ATTEMPTS: '3', DOMAIN_VERIFY_RETRY_BASE_MS: '200', DOMAIN_VERIFY_RETRY_MAX_MS: '400',
    DOMAIN_VERIFY_TEMP_RETRY_BASE_MS: '200', DOMAIN_VERIFY_TEMP_RETRY_MAX_MS: '400', DOMAIN_VERIFY_RECHECK_INTERVAL_MS: '1000',
    ...extra,
  };
}

beforeAll(async () => {
  dns = await startDnsServer();
  const config = loadDomainsConfig(configEnv());
  svc = await startService({ name: 'domains', config, env: {}, logger, build: (infra) => createDomainsServer({ config, infra }) });
  domains = createGrpcClient({ name: 'domains', address: `127.0.0.1:${svc.grpc.port}`, ctor: domainsV1.DomainsServiceClient, logger });

  nc = await connect({ servers: testNatsUrl() });
  const consumer = await jetstream(nc).consumers.get('MAILFLEET_EVENTS', { filter_subjects: ['mailfleet.domain.>'], deliver_policy: 'new' as never });
  const messages = await consumer.consume();
  void (async () => {
    for await (const m of messages) {
      events.push(decodeEvent(m.data));
      m.ack();
    }
  })();
});

afterAll(async () => {
  domains?.close();
  await nc?.close();
  await svc?.infra.mongo.db.dropDatabase();
  await svc?.shutdown('test over');
  await dns?.close();
});

const code = (p: Promise<unknown>) => p.then(() => 'OK', (e: ServiceError) => status[e.code]);
const message = (p: Promise<unknown>) => p.then(() => '', (e: ServiceError) => e.details);
let teamSeq = 0;
const newTeam = () => `team_it${Date.now().toString(36)}${teamSeq++}`;
let nameSeq = 0;
const newName = (label: string) => `${label}${nameSeq++}-${Date.now().toString(36)}.example.test`;

async function create(teamId: string, name: string): Promise<domainsV1.Domain> {
  return (await domains.call.createDomain({ teamId, name, region: 'us-east-1' }, { deadlineMs: 30_000 })).domain!;
}

/** Publishes every record the domain asks for, as a DNS admin would. */
function publish(d: domainsV1.Domain, overrides: { dkimValue?: string } = {}): void {
  for (const r of d.dnsRecords) {
    if (r.type === 'MX') dns.setRecords(r.name, 'MX', [{ priority: Number(r.priority), exchange: r.value }]);
    else dns.setRecords(r.name, 'TXT', [r.name.includes('._domainkey.') && overrides.dkimValue ? overrides.dkimValue : r.value]);
  }
}

async function statusOf(teamId: string, id: string): Promise<domainsV1.Domain> {
  return (await domains.call.getDomain({ teamId, domainId: id })).domain!;
}

function eventsOf(id: string): EventEnvelope[] {
  return events.filter((e) => (e.data as { id?: string }).id === id);
}

const PAYLOAD_KEYS = ['clickTracking', 'createdAt', 'dkimStatus', 'dmarcAdded', 'id', 'name', 'openTracking', 'region', 'spfDetails', 'status', 'updatedAt'];

describe('create, read, list', () => {
  it('creates a NOT_STARTED domain with its DNS records and an encrypted DKIM key', async () => {
    const teamId = newTeam();
    const name = newName('create');
    const d = (await domains.call.createDomain({ teamId, name: `  ${name.toUpperCase()}. `, region: 'us-east-1' }, { deadlineMs: 30_000 })).domain!;
    expect(d).toMatchObject({
      name, teamId, status: DomainStatus.DOMAIN_STATUS_NOT_STARTED, region: 'us-east-1', clickTracking: false, openTracking: false,
      dkimStatus: undefined, spfDetails: undefined, dmarcAdded: false, isVerifying: false, lastCheckedTime: undefined,
      errorMessage: undefined, verificationError: undefined, subdomain: name.split('.')[0],
    });
    expect(d.id).toMatch(/^dom_/);
    const key = createPublicKey({ key: Buffer.from(d.publicKey, 'base64'), format: 'der', type: 'spki' });
    expect(key.asymmetricKeyDetails?.modulusLength).toBe(2048);

    const byKind = d.dnsRecords.map((r) => [r.type, r.name, r.status, r.recommended, r.ttl, r.priority ?? null]);
    expect(byKind).toEqual([
      ['TXT', `_mailfleet.${name}`, 'NOT_STARTED', false, 'Auto', null],
      ['TXT', `bounces.${name}`, 'NOT_STARTED', false, 'Auto', null],
      ['TXT', expect.stringMatching(new RegExp(`^mf[a-z0-9]{8}\\._domainkey\\.${name.replace(/\./g, '\\.')}$`)), 'NOT_STARTED', false, 'Auto', null],
      ['MX', `bounces.${name}`, 'NOT_STARTED', true, 'Auto', '10'],
      ['TXT', `_dmarc.${name}`, 'NOT_STARTED', true, 'Auto', null],
    ]);
    expect(d.dnsRecords[0]!.value).toMatch(/^mailfleet-verification=[0-9A-Za-z]{32}$/);
    expect(d.dnsRecords[1]!.value).toBe('v=spf1 include:_spf.mailfleet.test ~all');
    expect(d.dnsRecords[2]!.value).toBe(`k=rsa; p=${d.publicKey}`);
    expect(d.dnsRecords[3]!.value).toBe('bounce.mailfleet.test');
    expect(d.dnsRecords[4]!.value).toBe('v=DMARC1; p=none;');

    // At rest: only ciphertext, no PEM and no base64 body of the private key.
    const client = new MongoClient(testMongoUrl());
    try {
      const doc = await client.db(dbName).collection('domains').findOne({ _id: d.id as never });
      const dump = JSON.stringify(doc);
      expect(dump).not.toContain('PRIVATE KEY');
      expect(doc?.dkimKey).toMatchObject({ v: 1, kid: expect.any(String), iv: expect.any(String), tag: expect.any(String), ct: expect.any(String) });
    } finally {
      await client.close();
    }

    await expect.poll(() => eventsOf(d.id).map((e) => e.type), { timeout: 10_000 }).toEqual(['domain.created']);
    const created = eventsOf(d.id)[0]!;
    expect(created.teamId).toBe(teamId);
    expect(Object.keys(created.data).sort()).toEqual(PAYLOAD_KEYS);
    expect(created.data).toMatchObject({ id: d.id, name, status: 'NOT_STARTED', region: 'us-east-1', dkimStatus: null, spfDetails: null, dmarcAdded: false });
  });

  it('refuses duplicates per team, bad names and regions, and hides other teams\' domains', async () => {
    const teamId = newTeam();
    const name = newName('dup');
    const d = await create(teamId, name);
    expect(await code(create(teamId, name.toUpperCase()))).toBe('ALREADY_EXISTS');
    expect(await message(create(teamId, name))).toBe(`Domain ${name} already exists in this team`);
    // Another team may register the same name (it proves ownership through DNS).
    expect((await create(newTeam(), name)).name).toBe(name);
    expect(await code(domains.call.createDomain({ teamId, name: 'not a domain', region: 'us-east-1' }))).toBe('INVALID_ARGUMENT');
    expect(await message(domains.call.createDomain({ teamId, name: 'ok.example.test', region: 'eu-west-1' }))).toContain('Region eu-west-1 is not supported');
    expect(await code(domains.call.createDomain({ teamId: '', name: 'x.example.test', region: 'us-east-1' }))).toBe('INVALID_ARGUMENT');

    expect(await code(domains.call.getDomain({ teamId: newTeam(), domainId: d.id }))).toBe('NOT_FOUND');
    expect(await code(domains.call.verifyDomain({ teamId: newTeam(), domainId: d.id }))).toBe('NOT_FOUND');
    expect(await code(domains.call.deleteDomain({ teamId: newTeam(), domainId: d.id }))).toBe('NOT_FOUND');
    expect(await code(domains.call.updateDomain({ teamId: newTeam(), domainId: d.id, openTracking: true }))).toBe('NOT_FOUND');
  });

  it('lists newest first, or only the restricted domain', async () => {
    const teamId = newTeam();
    const a = await create(teamId, newName('lista'));
    const b = await create(teamId, newName('listb'));
    expect((await domains.call.listDomains({ teamId })).domains.map((d) => d.id)).toEqual([b.id, a.id]);
    expect((await domains.call.listDomains({ teamId, domainId: a.id })).domains.map((d) => d.id)).toEqual([a.id]);
    expect((await domains.call.listDomains({ teamId: newTeam(), domainId: a.id })).domains).toEqual([]);
  });
});

describe('verification', () => {
  it('reaches SUCCESS from published records, asynchronously, with domain.updated and domain.verified', async () => {
    const teamId = newTeam();
    const d = await create(teamId, newName('ok'));
    publish(d);
    const res = await domains.call.verifyDomain({ teamId, domainId: d.id });
    expect(res.message).toContain(d.name);

    await expect.poll(async () => (await statusOf(teamId, d.id)).status, { timeout: 15_000 }).toBe(DomainStatus.DOMAIN_STATUS_SUCCESS);
    const ok = await statusOf(teamId, d.id);
    expect(ok).toMatchObject({ dkimStatus: 'Success', spfDetails: 'Success', dmarcAdded: true, isVerifying: false, errorMessage: undefined, verificationError: undefined });
    expect(ok.lastCheckedTime).toBeInstanceOf(Date);
    expect(ok.dnsRecords.map((r) => r.status)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS']);

    await expect.poll(() => eventsOf(d.id).map((e) => e.type), { timeout: 10_000 }).toEqual(['domain.created', 'domain.updated', 'domain.updated', 'domain.verified']);
    const [, pending, updated, verified] = eventsOf(d.id);
    expect(pending!.data).toMatchObject({ status: 'PENDING', dkimStatus: 'Pending' });
    expect(updated!.data).toMatchObject({ status: 'SUCCESS', dkimStatus: 'Success', spfDetails: 'Success', dmarcAdded: true });
    expect(verified!.data).toEqual(updated!.data);
    expect(Object.keys(verified!.data).sort()).toEqual(PAYLOAD_KEYS);
  });

  it('ends FAILED with a message naming the wrong DKIM record', async () => {
    const teamId = newTeam();
    const d = await create(teamId, newName('wrongdkim'));
    publish(d, { dkimValue: 'k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAwrongwrongwrong' });
    await domains.call.verifyDomain({ teamId, domainId: d.id });
    await expect.poll(async () => (await statusOf(teamId, d.id)).status, { timeout: 15_000 }).toBe(DomainStatus.DOMAIN_STATUS_FAILED);
    const failed = await statusOf(teamId, d.id);
    const dkimName = d.dnsRecords[2]!.name;
    expect(failed.errorMessage).toContain(`DKIM record ${dkimName}`);
    expect(failed.errorMessage).toContain('does not match');
    expect(failed).toMatchObject({ dkimStatus: 'Failed', spfDetails: 'Success', isVerifying: false });
    expect(failed.dnsRecords.find((r) => r.name === dkimName)?.status).toBe('FAILED');
    expect(failed.dnsRecords[0]!.status).toBe('SUCCESS');
    await expect.poll(() => eventsOf(d.id).at(-1)?.data, { timeout: 10_000 }).toMatchObject({ status: 'FAILED', dkimStatus: 'Failed' });
    expect(eventsOf(d.id).some((e) => e.type === 'domain.verified')).toBe(false);

    // Fixed in DNS and verified again: SUCCESS.
    publish(d);
    await domains.call.verifyDomain({ teamId, domainId: d.id });
    await expect.poll(async () => (await statusOf(teamId, d.id)).status, { timeout: 15_000 }).toBe(DomainStatus.DOMAIN_STATUS_SUCCESS);
  });

  it('is TEMPORARY_FAILURE while DNS answers SERVFAIL and reaches SUCCESS on its own once it answers', async () => {
    const teamId = newTeam();
    const d = await create(teamId, newName('servfail'));
    publish(d);
    dns.setFailure(d.name, 'servfail');
    try {
      await domains.call.verifyDomain({ teamId, domainId: d.id });
      await expect.poll(async () => (await statusOf(teamId, d.id)).status, { timeout: 15_000 }).toBe(DomainStatus.DOMAIN_STATUS_TEMPORARY_FAILURE);
      const temp = await statusOf(teamId, d.id);
      expect(temp).toMatchObject({ isVerifying: true, dkimStatus: 'TemporaryFailure', spfDetails: 'TemporaryFailure' });
      expect(temp.errorMessage).toContain('SERVFAIL');
      // It keeps retrying: more lookups arrive with no client call.
      const asked = dns.queries().filter((q) => q.name === `_mailfleet.${d.name}`).length;
      await expect.poll(() => dns.queries().filter((q) => q.name === `_mailfleet.${d.name}`).length, { timeout: 10_000 }).toBeGreaterThan(asked);
    } finally {
      dns.setFailure(d.name, null);
    }
    await expect.poll(async () => (await statusOf(teamId, d.id)).status, { timeout: 15_000 }).toBe(DomainStatus.DOMAIN_STATUS_SUCCESS);
    expect((await statusOf(teamId, d.id)).errorMessage).toBeUndefined();
    await expect.poll(() => eventsOf(d.id).map((e) => e.data.status), { timeout: 10_000 })
      .toEqual(['NOT_STARTED', 'PENDING', 'TEMPORARY_FAILURE', 'SUCCESS', 'SUCCESS']);
  });

  it('re-checks verified domains: a removed record is noticed and the domain ends FAILED', async () => {
    const teamId = newTeam();
    const d = await create(teamId, newName('recheck'));
    publish(d);
    await domains.call.verifyDomain({ teamId, domainId: d.id });
    await expect.poll(async () => (await statusOf(teamId, d.id)).status, { timeout: 15_000 }).toBe(DomainStatus.DOMAIN_STATUS_SUCCESS);
    const firstCheck = (await statusOf(teamId, d.id)).lastCheckedTime!;
    await expect.poll(async () => (await statusOf(teamId, d.id)).lastCheckedTime!.getTime(), { timeout: 10_000 }).toBeGreaterThan(firstCheck.getTime());

    dns.removeRecords(d.dnsRecords[0]!.name);
    await expect.poll(async () => (await statusOf(teamId, d.id)).status, { timeout: 20_000 }).toBe(DomainStatus.DOMAIN_STATUS_FAILED);
    expect((await statusOf(teamId, d.id)).errorMessage).toContain(`Verification record _mailfleet.${d.name} (TXT) was not found`);
    expect(await code(domains.call.getSendingIdentity({ teamId, domainName: d.name }))).toBe('FAILED_PRECONDITION');
  });

  it('a verified domain stays SUCCESS through a DNS outage', async () => {
    const teamId = newTeam();
    const d = await create(teamId, newName('outage'));
    publish(d);
    await domains.call.verifyDomain({ teamId, domainId: d.id });
    await expect.poll(async () => (await statusOf(teamId, d.id)).status, { timeout: 15_000 }).toBe(DomainStatus.DOMAIN_STATUS_SUCCESS);
    dns.setFailure(d.name, 'servfail');
    try {
      await expect.poll(async () => (await statusOf(teamId, d.id)).verificationError ?? '', { timeout: 15_000 }).toContain('SERVFAIL');
      expect((await statusOf(teamId, d.id)).status).toBe(DomainStatus.DOMAIN_STATUS_SUCCESS);
    } finally {
      dns.setFailure(d.name, null);
    }
  });
});

describe('sending identity', () => {
  it('returns the decrypted key and selector of a verified domain only', async () => {
    const teamId = newTeam();
    const d = await create(teamId, newName('identity'));
    expect(await code(domains.call.getSendingIdentity({ teamId, domainName: `me@${d.name}` }))).toBe('FAILED_PRECONDITION');
    expect(await message(domains.call.getSendingIdentity({ teamId, domainName: d.name }))).toContain('is not verified (status NOT_STARTED)');
    expect(await code(domains.call.getSendingIdentity({ teamId, domainName: 'nobody@unknown.example.test' }))).toBe('NOT_FOUND');
    expect(await code(domains.call.getSendingIdentity({ teamId: newTeam(), domainName: d.name }))).toBe('NOT_FOUND');

    publish(d);
    await domains.call.verifyDomain({ teamId, domainId: d.id });
    await expect.poll(async () => (await statusOf(teamId, d.id)).status, { timeout: 15_000 }).toBe(DomainStatus.DOMAIN_STATUS_SUCCESS);
    await domains.call.updateDomain({ teamId, domainId: d.id, clickTracking: true });

    const id = await domains.call.getSendingIdentity({ teamId, domainName: `Sender <Hello@${d.name.toUpperCase()}>` });
    const selector = d.dnsRecords[2]!.name.split('.')[0]!;
    expect(id).toMatchObject({
      domainId: d.id, domainName: d.name, status: DomainStatus.DOMAIN_STATUS_SUCCESS, dkimSelector: selector,
      clickTracking: true, openTracking: false, mailFromDomain: `bounces.${d.name}`,
    });
    const publicOfPrivate = createPublicKey(createPrivateKey(id.dkimPrivateKeyPem)).export({ type: 'spki', format: 'der' }).toString('base64');
    expect(publicOfPrivate).toBe(d.publicKey);
  });
});

describe('tracking flags and deletion', () => {
  it('changes tracking flags with domain.updated, and nothing for a no-op', async () => {
    const teamId = newTeam();
    const d = await create(teamId, newName('flags'));
    const changed = (await domains.call.updateDomain({ teamId, domainId: d.id, openTracking: true })).domain!;
    expect(changed).toMatchObject({ openTracking: true, clickTracking: false });
    expect(changed.updatedAt!.getTime()).toBeGreaterThanOrEqual(d.updatedAt!.getTime());
    const same = (await domains.call.updateDomain({ teamId, domainId: d.id, openTracking: true })).domain!;
    expect(same.updatedAt).toEqual(changed.updatedAt);
    expect(await code(domains.call.updateDomain({ teamId, domainId: d.id }))).toBe('INVALID_ARGUMENT');
    await expect.poll(() => eventsOf(d.id).map((e) => e.type), { timeout: 10_000 }).toEqual(['domain.created', 'domain.updated']);
    expect(eventsOf(d.id)[1]!.data).toMatchObject({ openTracking: true, clickTracking: false, status: 'NOT_STARTED' });
  });

  it('deletes permanently with domain.deleted; the name is free again at once', async () => {
    const teamId = newTeam();
    const name = newName('gone');
    const d = await create(teamId, name);
    const res = await domains.call.deleteDomain({ teamId, domainId: d.id });
    expect(res.message).toContain(name);
    expect(await code(domains.call.getDomain({ teamId, domainId: d.id }))).toBe('NOT_FOUND');
    expect(await code(domains.call.deleteDomain({ teamId, domainId: d.id }))).toBe('NOT_FOUND');
    expect((await domains.call.listDomains({ teamId })).domains).toEqual([]);
    expect(await code(domains.call.getSendingIdentity({ teamId, domainName: name }))).toBe('NOT_FOUND');
    const again = await create(teamId, name);
    expect(again.id).not.toBe(d.id);
    await expect.poll(() => eventsOf(d.id).map((e) => e.type), { timeout: 10_000 }).toEqual(['domain.created', 'domain.deleted']);
    expect(eventsOf(d.id)[1]).toMatchObject({ teamId, data: { id: d.id, name, status: 'NOT_STARTED' } });
    expect(Object.keys(eventsOf(d.id)[1]!.data).sort()).toEqual(PAYLOAD_KEYS);
    // The tombstone goes once its event is out, key material at once.
    const client = new MongoClient(testMongoUrl());
    try {
      await expect.poll(() => client.db(dbName).collection('domains').countDocuments({ _id: d.id as never }), { timeout: 10_000 }).toBe(0);
    } finally {
      await client.close();
    }
  });
});

describe('verification claims', () => {
  it('two replicas checking at once never check one domain twice', async () => {
    const client = new MongoClient(testMongoUrl());
    const other = new MongoClient(testMongoUrl());
    const db = uniqueDbName('domains_claims');
    try {
      const repoA = createDomainsRepository(client.db(db));
      const repoB = createDomainsRepository(other.db(db));
      await repoA.ensureIndexes();
      const sealer = createKeySealer(MASTER_KEY);
      const teamId = newTeam();
      const names: string[] = [];
      for (let i = 0; i < 12; i++) {
        const id = `dom_claim${i}`;
        const name = newName('claim');
        names.push(name);
        await repoA.create({
          id, teamId, name, region: 'us-east-1', subdomain: null, publicKey: 'AAAA', dkimSelector: 'mftest0000', sealedKey: sealer.seal('k', id),
          verificationToken: 'tok', mailFromHost: `bounces.${name}`,
          records: buildRecords(name, { verificationToken: 'tok', selector: 'mftest0000', publicKey: 'AAAA' }, { spfInclude: 'spf.test', mailFromSubdomain: 'bounces' }),
        });
        await repoA.change(teamId, id, (cur) => verificationStartPatch(cur, new Date()));
      }
      const resolver = await createDnsClient({ servers: [{ host: '127.0.0.1', port: dns.port }], timeoutMs: 500, tries: 1, logger });
      const timings = { retryAttempts: 5, retryBaseMs: 60_000, retryMaxMs: 60_000, tempRetryBaseMs: 60_000, tempRetryMaxMs: 60_000, tempFailureMaxMs: 3_600_000, recheckIntervalMs: 3_600_000 };
      const worker = (repo: typeof repoA) => createVerificationWorker({ repo, dns: resolver, timings, pollIntervalMs: 1_000, leaseMs: 30_000, concurrency: 3, logger });
      const [a, b] = await Promise.all([worker(repoA).runOnce(), worker(repoB).runOnce()]);
      expect(a + b).toBe(12);
      for (const name of names) {
        expect(dns.queries().filter((q) => q.name === `_mailfleet.${name}`)).toHaveLength(1);
      }
      const after = await repoA.list(teamId);
      expect(after.every((d) => d.status === 'PENDING' && d.lastCheckedTime !== null && d.verificationError?.includes('was not found'))).toBe(true);

      // A PUT verify during a check wins: the stale result is dropped and the new run is due at once.
      await repoA.change(teamId, 'dom_claim0', (cur) => verificationStartPatch(cur, new Date()));
      const claim = (await repoA.claimDue(new Date(), 30_000))!;
      expect(claim.record.id).toBe('dom_claim0');
      expect(await repoB.claimDue(new Date(), 30_000)).toBeUndefined();
      await repoB.change(teamId, 'dom_claim0', (cur) => verificationStartPatch(cur, new Date()));
      expect(await repoA.completeCheck(claim, () => ({ status: 'FAILED', errorMessage: 'stale' }))).toBeUndefined();
      expect((await repoA.get(teamId, 'dom_claim0'))).toMatchObject({ status: 'PENDING', errorMessage: null });
      const retaken = (await repoB.claimDue(new Date(), 50))!;
      expect(retaken.record.id).toBe('dom_claim0');
      // A replica that died mid-check holds its claim only until the lease ends.
      await new Promise((r) => setTimeout(r, 80));
      expect((await repoA.claimDue(new Date(), 30_000))?.record.id).toBe('dom_claim0');
    } finally {
      await client.db(db).dropDatabase();
      await client.close();
      await other.close();
    }
  });
});
