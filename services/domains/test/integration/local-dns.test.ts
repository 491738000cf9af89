import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createGrpcClient, createLogger, startService, type RunningService, type UpstreamClient } from '@mailfleet/kit';
import { domainsV1 } from '@mailfleet/proto';
import { startLocalDns, type LocalDns } from '@mailfleet/deploy';
import { testMongoUrl, testNatsUrl, uniqueDbName } from '@mailfleet/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDomainsConfig } from '../../src/config.js';
import { createDomainsServer } from '../../src/server.js';

/**
 * Local mode end to end at the service level: with LOCAL_DNS_CONTROL_URL the service publishes a
 * domain's records to the local DNS server and verification, asking that server over DNS
 * (DNS_SERVERS), reaches SUCCESS. Without it (local mode off: SMTP_URL or DNS_SERVERS given),
 * nothing is published, and a domain whose records nobody published stays unverified even
 * against the very same server.
 */
const logger = createLogger({ service: 'domains-local-dns-test', level: 'silent' });
const { DomainStatus } = domainsV1;

let dataDir: string;
let localDns: LocalDns;
const running: Array<{ svc: RunningService; client: UpstreamClient<domainsV1.DomainsServiceClient> }> = [];

async function startDomains(extra: Record<string, string>): Promise<UpstreamClient<domainsV1.DomainsServiceClient>> {
  const config = loadDomainsConfig({
    GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: testMongoUrl(), MONGO_DB: uniqueDbName('domains'), NATS_URL: testNatsUrl(),
    LOG_LEVEL: 'silent', DKIM_MASTER_KEY: 'c0ffee'.repeat(10) + 'abcd', DNS_SERVERS: localDns.address, DNS_TIMEOUT_MS: '500', DNS_TRIES: '1',
    DOMAIN_VERIFY_POLL_INTERVAL_MS: '100', DOMAIN_VERIFY_RETRY_ATTEMPTS: '2', DOMAIN_VERIFY_RETRY_BASE_MS: '100', DOMAIN_VERIFY_RETRY_MAX_MS: '200',
    ...extra,
  });
  const svc = await startService({ name: 'domains', config, env: {}, logger, build: (infra) => createDomainsServer({ config, infra }) });
  const client = createGrpcClient({ name: 'domains', address: `127.0.0.1:${svc.grpc.port}`, ctor: domainsV1.DomainsServiceClient, logger });
  running.push({ svc, client });
  return client;
}

async function waitForStatus(client: UpstreamClient<domainsV1.DomainsServiceClient>, teamId: string, domainId: string, want: domainsV1.DomainStatus[]): Promise<domainsV1.Domain> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const d = (await client.call.getDomain({ teamId, domainId })).domain!;
    if (want.includes(d.status)) return d;
    if (Date.now() > deadline) throw new Error(`domain ${domainId} still ${DomainStatus[d.status]}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-local-dns-'));
  localDns = await startLocalDns({ dataDir });
});

afterAll(async () => {
  for (const { svc, client } of running) {
    client.close();
    await svc.infra.mongo.db.dropDatabase();
    await svc.shutdown('test over');
  }
  await localDns?.close();
  await fsp.rm(dataDir, { recursive: true, force: true });
});

describe('local mode (LOCAL_DNS_CONTROL_URL set)', () => {
  it('publishes the records on creation, verifies against them over DNS, removes them on delete', async () => {
    const client = await startDomains({ LOCAL_DNS_CONTROL_URL: localDns.controlUrl });
    const teamId = `team_local${Date.now().toString(36)}`;
    const created = (await client.call.createDomain({ teamId, name: 'first-email.example.test', region: 'us-east-1' }, { deadlineMs: 30_000 })).domain!;
    const published = localDns.records()[created.id];
    expect(published?.map((r) => [r.type, r.name]).sort()).toEqual(
      created.dnsRecords.map((r) => [r.type, r.name]).sort(),
    );

    await client.call.verifyDomain({ teamId, domainId: created.id });
    const verified = await waitForStatus(client, teamId, created.id, [DomainStatus.DOMAIN_STATUS_SUCCESS, DomainStatus.DOMAIN_STATUS_FAILED]);
    expect(DomainStatus[verified.status]).toBe('DOMAIN_STATUS_SUCCESS');

    // A restart of `npm start` keeps them: the zone is on disk.
    const zone = JSON.parse(await fsp.readFile(path.join(dataDir, 'dns', 'zone.json'), 'utf8')) as Record<string, unknown>;
    expect(Object.keys(zone)).toContain(created.id);

    await client.call.deleteDomain({ teamId, domainId: created.id });
    expect(localDns.records()[created.id]).toBeUndefined();
  });
});

describe('local mode off (no LOCAL_DNS_CONTROL_URL: SMTP_URL or DNS_SERVERS was set)', () => {
  it('publishes nothing, and a domain whose records are not published stays unverified', async () => {
    const client = await startDomains({});
    const teamId = `team_off${Date.now().toString(36)}`;
    const created = (await client.call.createDomain({ teamId, name: 'unpublished.example.test', region: 'us-east-1' }, { deadlineMs: 30_000 })).domain!;
    expect(localDns.records()[created.id]).toBeUndefined();

    await client.call.verifyDomain({ teamId, domainId: created.id });
    const checked = await waitForStatus(client, teamId, created.id, [DomainStatus.DOMAIN_STATUS_SUCCESS, DomainStatus.DOMAIN_STATUS_FAILED]);
    expect(DomainStatus[checked.status]).toBe('DOMAIN_STATUS_FAILED');
    expect(localDns.records()[created.id]).toBeUndefined();
  });
});
