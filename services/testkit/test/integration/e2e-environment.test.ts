import fs from 'node:fs';
import { Resolver } from 'node:dns/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canConnect } from '@mailfleet/deploy';
import { controlRequest, loadTestCa, startE2eEnvironment, startHttpsReceiver, type E2eEnvironment } from '@mailfleet/testkit';
import { createFakeRepo, isAlive, readChildEnv } from './fixtures/fake-platform.js';

// The e2e global setup's environment, run against stand-in services.
describe('startE2eEnvironment', () => {
  let repo: string;
  let env: E2eEnvironment;
  const control = <T>(path: string, body: object = {}): Promise<T> => controlRequest<T>(path, body, env.provided.infraControlUrl);

  beforeAll(async () => {
    repo = await createFakeRepo();
    env = await startE2eEnvironment({ repoRoot: repo, console: false });
  });
  afterAll(async () => {
    await env?.stop();
    fs.rmSync(repo, { recursive: true, force: true });
  });

  it('provides the addresses of a running platform', async () => {
    const p = env.provided;
    expect((await fetch(`${p.gatewayUrl}/v1/health`)).status).toBe(200);
    expect(p.mailDir).toBe(`${p.platformDataDir}/mail`);
    expect(p.platformPorts.services.auth.grpc).toBeGreaterThan(0);
    expect(fs.existsSync(`${p.platformLogDir}/gateway.log`)).toBe(true);
  });

  it('points the platform at its DNS server and CA', async () => {
    const childEnv = await readChildEnv(env.provided.platformDataDir, 'domains');
    expect(childEnv['DNS_SERVERS']).toBe(env.provided.dnsServer);
    expect(childEnv['WEBHOOK_ALLOW_PRIVATE_NETWORKS']).toBe('true');
    expect(fs.readFileSync(childEnv['NODE_EXTRA_CA_CERTS']!, 'utf8')).toContain('BEGIN CERTIFICATE');
  });

  it('sets DNS records through the control endpoint', async () => {
    await control('/dns/records', { name: 'verify.example.test', type: 'TXT', values: ['mailfleet-verification=abc'] });
    const resolver = new Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers([env.provided.dnsServer]);
    expect(await resolver.resolveTxt('verify.example.test')).toEqual([['mailfleet-verification=abc']]);
    await control('/dns/clear');
    await expect(resolver.resolveTxt('verify.example.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  it('signs HTTPS receivers with the CA the platform trusts', async () => {
    const ca = await loadTestCa(env.provided.testCaDir);
    const receiver = await startHttpsReceiver({ ca });
    try {
      expect(receiver.caFile).toBe((await readChildEnv(env.provided.platformDataDir, 'webhooks'))['NODE_EXTRA_CA_CERTS']);
    } finally {
      await receiver.close();
    }
    expect(fs.existsSync(ca.caFile)).toBe(true);
  });

  it('kills, starts and restarts platform children through the control endpoint', async () => {
    const before = await readChildEnv(env.provided.platformDataDir, 'emails');
    await control('/platform/kill', { name: 'emails' });
    expect(isAlive(Number(before['PID']))).toBe(false);
    await control('/platform/start', { name: 'emails' });
    expect((await readChildEnv(env.provided.platformDataDir, 'emails'))['PID']).not.toBe(before['PID']);
    const logs = await control<string[]>('/platform/logs', { name: 'emails' });
    expect(logs.join('\n')).toContain('"service":"emails"');

    const natsPort = env.provided.platformPorts.nats!;
    await control('/nats/stop');
    expect(await canConnect(natsPort)).toBe(false);
    expect(await control('/nats/start')).toEqual({ url: env.provided.natsUrl });
    expect(await canConnect(natsPort)).toBe(true);
  });
});
