import { randomBytes } from 'node:crypto';
import { setDnsFailure, setDnsRecords } from '@mailfleet/testkit';
import { beforeAll, describe, expect, it } from 'vitest';
import { apiAt, createTeam, gatewayUrl } from './helpers.js';

const api = apiAt(gatewayUrl());

interface DnsRecord { type: string; name: string; value: string; ttl: string; priority: string | null; status: string; recommended: boolean }
interface Domain {
  id: string; name: string; teamId: string; status: string; region: string; clickTracking: boolean; openTracking: boolean; publicKey: string;
  dkimStatus: string | null; spfDetails: string | null; createdAt: string; updatedAt: string; dmarcAdded: boolean; isVerifying: boolean;
  errorMessage: string | null; subdomain: string | null; verificationError: string | null; lastCheckedTime: string | null; dnsRecords: DnsRecord[];
}

const uniqueName = (label: string) => `${label}-${randomBytes(4).toString('hex')}.mailfleet-e2e.test`;

let token: string;
beforeAll(async () => {
  token = (await createTeam('Domains Team')).token;
});

async function addDomain(name: string, as = token): Promise<Domain> {
  const res = await api('POST', '/v1/domains', { token: as, body: { name, region: 'us-east-1' } });
  expect(res.status).toBe(200);
  return res.body as Domain;
}

async function getDomain(id: string, as = token): Promise<Domain> {
  const res = await api('GET', `/v1/domains/${id}`, { token: as });
  expect(res.status).toBe(200);
  return res.body as Domain;
}

/** Publishes the records a domain asks for, as its owner would at their DNS provider. */
async function publish(d: Domain, opts: { dkimValue?: string } = {}): Promise<void> {
  for (const r of d.dnsRecords) {
    if (r.type === 'MX') await setDnsRecords(r.name, 'MX', [{ priority: Number(r.priority), exchange: r.value }]);
    else await setDnsRecords(r.name, 'TXT', [r.name.includes('._domainkey.') && opts.dkimValue ? opts.dkimValue : r.value]);
  }
}

const statusOf = async (id: string) => (await getDomain(id)).status;

describe('domains (SPEC 4.3)', () => {
  it('adds a domain in NOT_STARTED with the DNS records to publish', async () => {
    const name = uniqueName('new');
    const d = await addDomain(name.toUpperCase());
    expect(d).toMatchObject({
      name, status: 'NOT_STARTED', region: 'us-east-1', clickTracking: false, openTracking: false, dkimStatus: null, spfDetails: null,
      dmarcAdded: false, isVerifying: false, lastCheckedTime: null, errorMessage: null, verificationError: null,
    });
    expect(d.id).toMatch(/^dom_/);
    expect(Date.parse(d.createdAt)).not.toBeNaN();
    const dkim = d.dnsRecords.find((r) => r.name.includes('._domainkey.'))!;
    expect(dkim).toMatchObject({ type: 'TXT', value: `k=rsa; p=${d.publicKey}`, ttl: 'Auto', priority: null, status: 'NOT_STARTED', recommended: false });
    expect(dkim.name).toMatch(new RegExp(`^[a-z0-9]+\\._domainkey\\.${name.replace(/\./g, '\\.')}$`));
    expect(d.dnsRecords.find((r) => r.name === `_dmarc.${name}`)).toMatchObject({ type: 'TXT', recommended: true, status: 'NOT_STARTED' });
    expect(d.dnsRecords.some((r) => r.value.startsWith('v=spf1 include:'))).toBe(true);
    expect(d.dnsRecords.some((r) => r.value.startsWith('mailfleet-verification='))).toBe(true);
    expect(d.dnsRecords.every((r) => r.status === 'NOT_STARTED')).toBe(true);

    const list = await api('GET', '/v1/domains', { token });
    expect((list.body as Domain[]).map((x) => x.id)).toContain(d.id);
    expect(await getDomain(d.id)).toEqual(d);
  });

  it('refuses bad names, unsupported regions and duplicates with {error}', async () => {
    const bad = await api('POST', '/v1/domains', { token, body: { name: 'not a domain', region: 'us-east-1' } });
    expect(bad.status).toBe(400);
    expect((bad.body as { error: string }).error).toContain('not a domain name');
    const region = await api('POST', '/v1/domains', { token, body: { name: uniqueName('region'), region: 'eu-west-1' } });
    expect(region).toMatchObject({ status: 400, body: { error: 'Region eu-west-1 is not supported; supported: us-east-1' } });
    const missing = await api('POST', '/v1/domains', { token, body: { region: 'us-east-1' } });
    expect(missing.status).toBe(400);
    expect(typeof (missing.body as { error: unknown }).error).toBe('string');

    const name = uniqueName('dup');
    await addDomain(name);
    const dup = await api('POST', '/v1/domains', { token, body: { name, region: 'us-east-1' } });
    expect(dup).toMatchObject({ status: 409, body: { error: `Domain ${name} already exists in this team` } });

    expect(await api('GET', '/v1/domains/dom_missing', { token })).toMatchObject({ status: 404, body: { error: 'Domain not found' } });
    expect(await api('PUT', '/v1/domains/dom_missing/verify', { token })).toMatchObject({ status: 404, body: { error: 'Domain not found' } });
    expect((await api('GET', '/v1/domains', {})).status).toBe(401);
  });

  it('verifies asynchronously: publish the records, PUT verify, poll until SUCCESS', async () => {
    const d = await addDomain(uniqueName('verify'));
    await publish(d);
    const res = await api('PUT', `/v1/domains/${d.id}/verify`, { token });
    expect(res.status).toBe(200);
    expect(typeof (res.body as { message: string }).message).toBe('string');

    await expect.poll(() => statusOf(d.id), { timeout: 20_000, interval: 200 }).toBe('SUCCESS');
    const ok = await getDomain(d.id);
    expect(ok).toMatchObject({ dkimStatus: 'Success', spfDetails: 'Success', dmarcAdded: true, isVerifying: false, errorMessage: null });
    expect(Date.parse(ok.lastCheckedTime!)).not.toBeNaN();
    expect(ok.dnsRecords.every((r) => r.status === 'SUCCESS')).toBe(true);
  });

  it('a wrong DKIM value ends FAILED with a message naming the record', async () => {
    const d = await addDomain(uniqueName('wrongkey'));
    await publish(d, { dkimValue: 'k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAnotthekeyyouarelookingfor' });
    expect((await api('PUT', `/v1/domains/${d.id}/verify`, { token })).status).toBe(200);
    await expect.poll(() => statusOf(d.id), { timeout: 20_000, interval: 200 }).toBe('FAILED');
    const failed = await getDomain(d.id);
    const dkimName = d.dnsRecords.find((r) => r.name.includes('._domainkey.'))!.name;
    expect(failed.errorMessage).toContain(dkimName);
    expect(failed).toMatchObject({ dkimStatus: 'Failed', isVerifying: false });
    expect(failed.dnsRecords.find((r) => r.name === dkimName)?.status).toBe('FAILED');
  });

  it('SERVFAIL gives TEMPORARY_FAILURE, and SUCCESS follows with no further client call once DNS answers', async () => {
    const d = await addDomain(uniqueName('servfail'));
    await publish(d);
    await setDnsFailure(d.name, 'servfail');
    try {
      expect((await api('PUT', `/v1/domains/${d.id}/verify`, { token })).status).toBe(200);
      await expect.poll(() => statusOf(d.id), { timeout: 20_000, interval: 200 }).toBe('TEMPORARY_FAILURE');
      const temp = await getDomain(d.id);
      expect(temp.isVerifying).toBe(true);
      expect(temp.errorMessage).toContain('SERVFAIL');
    } finally {
      await setDnsFailure(d.name, null);
    }
    // No PUT verify here: the service retries on its own.
    await expect.poll(() => statusOf(d.id), { timeout: 20_000, interval: 200 }).toBe('SUCCESS');
  });

  it('sets tracking flags with PATCH and documents it in the OpenAPI', async () => {
    const d = await addDomain(uniqueName('flags'));
    const res = await api('PATCH', `/v1/domains/${d.id}`, { token, body: { openTracking: true } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: d.id, openTracking: true, clickTracking: false });
    expect((await api('PATCH', `/v1/domains/${d.id}`, { token, body: { clickTracking: true } })).body).toMatchObject({ openTracking: true, clickTracking: true });
    expect((await api('PATCH', `/v1/domains/${d.id}`, { token, body: {} })).status).toBe(400);
    expect((await api('PATCH', `/v1/domains/${d.id}`, { token, body: { openTracking: 'sometimes' } })).status).toBe(400);
    const doc = (await api('GET', '/v1/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
    expect(Object.keys(doc.paths['/v1/domains/{id}'] ?? {})).toEqual(expect.arrayContaining(['get', 'patch', 'delete']));
  });

  it('serves analytics and stats of a domain (zeros for a domain that sent nothing)', async () => {
    const d = await addDomain(uniqueName('stats'));
    const a = await api('GET', `/v1/domains/${d.id}/analytics`, { token });
    expect(a).toMatchObject({ status: 200, body: { period: 'month', totalSent: 0, totalDelivered: 0, totalOpened: 0, totalClicked: 0, deliveryRate: 0, openRate: 0, clickRate: 0 } });
    expect((await api('GET', `/v1/domains/${d.id}/analytics?period=week`, { token })).body).toMatchObject({ period: 'week', totalSent: 0 });
    expect((await api('GET', `/v1/domains/${d.id}/analytics?period=year`, { token })).status).toBe(400);
    expect((await api('GET', '/v1/domains/dom_missing/analytics', { token })).status).toBe(404);

    const s = await api('GET', `/v1/domains/${d.id}/stats?startDate=2026-01-01&endDate=2026-12-31T23:59:59Z`, { token });
    expect(s.status).toBe(200);
    expect(s.body).toMatchObject({ totalSent: 0, totalDelivered: 0, totalBounced: 0, totalComplained: 0, deliveryRate: 0, bounceRate: 0, complaintRate: 0 });
    expect(await api('GET', `/v1/domains/${d.id}/stats?startDate=yesterday`, { token })).toMatchObject({ status: 400, body: { error: expect.stringContaining('startDate') } });
    expect((await api('GET', `/v1/domains/${d.id}/stats?startDate=2026-02-01&endDate=2026-01-01`, { token })).status).toBe(400);
  });

  it('deletes permanently', async () => {
    const d = await addDomain(uniqueName('delete'));
    const del = await api('DELETE', `/v1/domains/${d.id}`, { token });
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ success: true, message: expect.any(String) });
    expect((await api('GET', `/v1/domains/${d.id}`, { token })).status).toBe(404);
    expect((await api('DELETE', `/v1/domains/${d.id}`, { token })).status).toBe(404);
    // The name can be added again.
    expect((await addDomain(d.name)).id).not.toBe(d.id);
  });

  it('another team sees none of it', async () => {
    const d = await addDomain(uniqueName('private'));
    const other = (await createTeam('Other Domains Team')).token;
    expect(await api('GET', `/v1/domains/${d.id}`, { token: other })).toMatchObject({ status: 404, body: { error: 'Domain not found' } });
    expect((await api('DELETE', `/v1/domains/${d.id}`, { token: other })).status).toBe(404);
    expect(((await api('GET', '/v1/domains', { token: other })).body as Domain[]).map((x) => x.id)).not.toContain(d.id);
  });
});

describe('domain-restricted API keys (SPEC 4.3)', () => {
  it('see only their domain: list filtered, 404 on GET, 403 on verify, patch and delete of another', async () => {
    const mine = await addDomain(uniqueName('mine'));
    const theirs = await addDomain(uniqueName('theirs'));
    const created = await api('POST', '/v1/api-keys', { token, body: { name: 'restricted', domainId: mine.id } });
    expect(created.status).toBe(200);
    const restricted = (created.body as { token: string }).token;
    expect((await api('POST', '/v1/api-keys', { token, body: { name: 'bad', domainId: 'dom_missing' } })).status).toBe(400);

    const list = await api('GET', '/v1/domains', { token: restricted });
    expect(list.status).toBe(200);
    expect((list.body as Domain[]).map((d) => d.id)).toEqual([mine.id]);

    expect((await api('GET', `/v1/domains/${mine.id}`, { token: restricted })).status).toBe(200);
    expect(await api('GET', `/v1/domains/${theirs.id}`, { token: restricted })).toMatchObject({ status: 404, body: { error: 'Domain not found' } });
    expect((await api('GET', `/v1/domains/${theirs.id}/analytics`, { token: restricted })).status).toBe(404);

    const forbidden = { status: 403, body: { error: 'API key has no access to this domain' } };
    expect(await api('PUT', `/v1/domains/${theirs.id}/verify`, { token: restricted })).toMatchObject(forbidden);
    expect(await api('DELETE', `/v1/domains/${theirs.id}`, { token: restricted })).toMatchObject(forbidden);
    expect(await api('PATCH', `/v1/domains/${theirs.id}`, { token: restricted, body: { openTracking: true } })).toMatchObject(forbidden);
    expect((await api('POST', '/v1/domains', { token: restricted, body: { name: uniqueName('more'), region: 'us-east-1' } })).status).toBe(403);
    // Nothing happened to the other domain.
    expect(await getDomain(theirs.id)).toMatchObject({ status: 'NOT_STARTED', openTracking: false });

    // Its own domain it may verify and change.
    expect((await api('PUT', `/v1/domains/${mine.id}/verify`, { token: restricted })).status).toBe(200);
    expect((await api('PATCH', `/v1/domains/${mine.id}`, { token: restricted, body: { clickTracking: true } })).body).toMatchObject({ clickTracking: true });
  });
});
