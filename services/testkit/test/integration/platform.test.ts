import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  canConnect,
  createHealthProbe,
  SERVICE_NAMES,
  startPlatform,
  type ChildExitReport,
  type LogSink,
  type Platform,
} from '@mailfleet/deploy';
import { testMongoUrl, testNatsUrl, waitForMail } from '@mailfleet/testkit';
import { createFakeRepo, isAlive, readChildEnv, waitForChildEnv } from './fixtures/fake-platform.js';
import { createLogger, newId } from '@mailfleet/kit';
import { verpAddress } from '../../../emails/src/domain/verp.js';
import { startInboundSmtpServer } from '../../../emails/src/inbound/inbound-server.js';
import type { InboundReport } from '../../../emails/src/inbound/reports.js';

const quiet: LogSink = () => undefined;

async function tempDir(prefix: string): Promise<string> {
  return fsp.mkdtemp(path.join(os.tmpdir(), prefix));
}

describe('startPlatform (with stand-in services)', () => {
  let repo: string;
  let dataDir: string;
  let platform: Platform;
  const lines: string[] = [];
  const unexpected: ChildExitReport[] = [];

  beforeAll(async () => {
    repo = await createFakeRepo();
    dataDir = await tempDir('mailfleet-platform-test-');
    platform = await startPlatform({
      repoRoot: repo,
      ports: 'free',
      dataDir,
      log: (name, line) => lines.push(`${name}: ${line}`),
      env: { DNS_SERVERS: '127.0.0.1:5353', BOUNCE_DOMAIN: 'bounces.example.test', LOG_LEVEL: 'debug' },
      onUnexpectedExit: (report) => unexpected.push(report),
      stopTimeoutMs: 5000,
    });
  });
  afterAll(async () => {
    await platform?.stop();
    await fsp.rm(repo, { recursive: true, force: true });
    await fsp.rm(dataDir, { recursive: true, force: true });
  });

  it('starts embedded infrastructure, every service and the gateway, and says where they are', async () => {
    expect(platform.names).toEqual(['ferretdb', 'nats', 'smtp-sink', ...SERVICE_NAMES, 'gateway']);
    expect(platform.gatewayUrl).toBe(`http://127.0.0.1:${platform.ports.gateway}`);
    expect((await fetch(`${platform.gatewayUrl}/v1/health`)).status).toBe(200);
    expect(platform.mongoUrl).toBe(`mongodb://127.0.0.1:${platform.ports.ferretdb}/`);
    expect(platform.natsUrl).toBe(`nats://127.0.0.1:${platform.ports.nats}`);
    expect(platform.smtpUrl).toBe(`smtp://127.0.0.1:${platform.ports.smtpSink}`);
    expect(platform.mailDir).toBe(path.join(dataDir, 'mail'));
    const all = [
      platform.ports.gateway,
      platform.ports.gatewayMetrics,
      platform.ports.inboundSmtp,
      ...SERVICE_NAMES.flatMap((n) => [platform.ports.services[n].grpc, platform.ports.services[n].metrics]),
    ];
    expect(new Set(all).size).toBe(all.length);
  });

  it('gives each service the env contract', async () => {
    const env = await readChildEnv(dataDir, 'emails');
    expect(env).toMatchObject({
      SERVICE_NAME: 'emails',
      GRPC_PORT: String(platform.ports.services.emails.grpc),
      METRICS_PORT: String(platform.ports.services.emails.metrics),
      MONGO_URL: platform.mongoUrl,
      NATS_URL: platform.natsUrl,
      SMTP_URL: platform.smtpUrl,
      LOG_LEVEL: 'debug',
      MAILFLEET_DATA_DIR: dataDir,
      INBOUND_SMTP_PORT: String(platform.ports.inboundSmtp),
      PUBLIC_URL: platform.gatewayUrl,
      DNS_SERVERS: '127.0.0.1:5353',
      BOUNCE_DOMAIN: 'bounces.example.test',
    });
    for (const name of SERVICE_NAMES) {
      expect(env[`${name.toUpperCase()}_GRPC_ADDR`]).toBe(`127.0.0.1:${platform.ports.services[name].grpc}`);
    }
    expect(env['PORT']).toBeUndefined();
    const gateway = await readChildEnv(dataDir, 'gateway');
    expect(gateway).toMatchObject({
      SERVICE_NAME: 'gateway',
      PORT: String(platform.ports.gateway),
      HOST: '127.0.0.1',
      METRICS_PORT: String(platform.ports.gatewayMetrics),
      AUTH_GRPC_ADDR: `127.0.0.1:${platform.ports.services.auth.grpc}`,
    });
  });

  it('prefixes child output with the child name', () => {
    expect(lines).toContain('gateway: gateway listening');
    expect(lines.some((l) => l.startsWith('auth: {"level":30,"msg":"listening"'))).toBe(true);
  });

  it('runs an SMTP sink that stores mail under <dataDir>/mail', async () => {
    const transport = nodemailer.createTransport({ url: platform.smtpUrl } as nodemailer.TransportOptions);
    await transport.sendMail({ from: 'a@example.test', to: 'b@example.test', subject: 'to the sink', text: 'hi' });
    transport.close();
    const mail = await waitForMail(platform.mailDir!, (m) => m.parsed.subject === 'to the sink', 5000);
    expect(mail.envelope.rcptTo).toEqual(['b@example.test']);
  });

  it("runs the mailbox simulator: bounce@ is refused, other mail is reported to the inbound SMTP port", async () => {
    // The stand-in emails service does not listen there; the real listener does, as the emails service would.
    const secret = 'platform-test-secret-0123456789abcdef';
    const reports: Array<[string, InboundReport]> = [];
    const inbound = await startInboundSmtpServer({
      port: platform.ports.inboundSmtp,
      host: '127.0.0.1',
      bounceDomain: 'bounces.example.test',
      secret,
      logger: createLogger({ service: 'platform-test', level: 'silent' }),
      onReport: async (emailId, report) => void reports.push([emailId, report]),
    });
    try {
      const emailId = newId('em');
      const returnPath = verpAddress({ secret, emailId, bounceDomain: 'bounces.example.test' });
      const transport = nodemailer.createTransport({ url: platform.smtpUrl } as nodemailer.TransportOptions);
      const refused = await transport
        .sendMail({ envelope: { from: returnPath, to: 'bounce@example.test' }, raw: 'Subject: x\r\n\r\nx\r\n' })
        .catch((e: { responseCode?: number }) => e);
      expect(refused).toMatchObject({ responseCode: 550 });
      await transport.sendMail({ envelope: { from: returnPath, to: 'c@example.test' }, from: 'a@example.test', to: 'c@example.test', subject: 'reported', text: 'hi' });
      transport.close();
      await expect.poll(() => reports, { timeout: 10_000 }).toHaveLength(1);
      expect(reports[0]?.[0]).toBe(emailId);
      expect(reports[0]?.[1]).toMatchObject({ kind: 'dsn', recipients: [{ recipient: 'c@example.test', action: 'delivered', status: '2.0.0' }] });
    } finally {
      await inbound.close();
    }
  });

  it('kills and restarts one service with the same port', async () => {
    const before = await readChildEnv(dataDir, 'contacts');
    platform.kill('contacts', 'SIGKILL');
    await platform.waitForExit('contacts');
    expect(platform.isRunning('contacts')).toBe(false);
    expect(isAlive(Number(before['PID']))).toBe(false);
    await platform.startChild('contacts');
    const after = await readChildEnv(dataDir, 'contacts');
    expect(after['PID']).not.toBe(before['PID']);
    const probe = createHealthProbe(`127.0.0.1:${platform.ports.services.contacts.grpc}`);
    expect(await probe.check()).toBe('SERVING');
    probe.close();
    // Asked for: not reported as unexpected.
    expect(unexpected).toEqual([]);
  });

  it('restarts NATS on the same URL', async () => {
    await platform.restart('nats');
    expect(await canConnect(platform.ports.nats!)).toBe(true);
  });

  it('reports a child that dies on its own, with its last lines', async () => {
    const env = await readChildEnv(dataDir, 'analytics');
    process.kill(Number(env['PID']), 'SIGKILL');
    await platform.waitForExit('analytics');
    await expect.poll(() => unexpected.length).toBe(1);
    expect(unexpected[0]).toMatchObject({ name: 'analytics', signal: 'SIGKILL' });
    expect(unexpected[0]?.message).toContain('analytics was killed by SIGKILL');
    await platform.startChild('analytics');
  });

  it('stop() ends every process, gateway first', async () => {
    const pids = await Promise.all([...SERVICE_NAMES, 'gateway'].map(async (n) => Number((await readChildEnv(dataDir, n))['PID'])));
    lines.length = 0;
    await platform.stop();
    for (const pid of pids) expect(isAlive(pid)).toBe(false);
    for (const port of [platform.ports.nats!, platform.ports.ferretdb!, platform.ports.smtpSink!, platform.ports.gateway]) {
      expect(await canConnect(port)).toBe(false);
    }
    await platform.stop(); // idempotent
  });
});

describe('startPlatform failures', () => {
  it('names every program that is not built, before starting anything', async () => {
    const repo = await createFakeRepo({ without: ['emails', 'webhooks', 'gateway'] });
    try {
      const error = await startPlatform({ repoRoot: repo, ports: 'free', log: quiet }).catch((e: Error) => e);
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toMatch(/3 program\(s\) not built/);
      expect((error as Error).message).toContain('emails: services/emails/dist/main.js does not exist');
      expect((error as Error).message).toContain('webhooks: services/webhooks/dist/main.js does not exist');
      expect((error as Error).message).toContain('gateway: gateway/dist/server.js does not exist');
    } finally {
      await fsp.rm(repo, { recursive: true, force: true });
    }
  });

  it('fails startup when a child exits, with its name, exit code and output, and leaves nothing running', async () => {
    const repo = await createFakeRepo();
    const dataDir = await tempDir('mailfleet-platform-fail-');
    try {
      const error = await startPlatform({
        repoRoot: repo,
        ports: 'free',
        dataDir,
        log: quiet,
        env: { FAKE_FAIL: 'contacts' },
      }).catch((e: Error) => e);
      expect((error as Error).message).toMatch(/platform failed to start: contacts exited with code 3/);
      expect((error as Error).message).toContain('boom: contacts cannot start');
      for (const name of SERVICE_NAMES.filter((n) => n !== 'contacts')) {
        const env = await readChildEnv(dataDir, name).catch(() => undefined);
        if (env) expect(isAlive(Number(env['PID']))).toBe(false);
      }
    } finally {
      await fsp.rm(repo, { recursive: true, force: true });
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  it('times out naming who is not ready, with external infrastructure', async () => {
    const repo = await createFakeRepo();
    const dataDir = await tempDir('mailfleet-platform-timeout-');
    try {
      const error = await startPlatform({
        repoRoot: repo,
        ports: 'free',
        dataDir,
        log: quiet,
        mongoUrl: testMongoUrl(),
        natsUrl: testNatsUrl(),
        smtpUrl: 'smtp://127.0.0.1:9',
        // Long enough for the stand-in services to start on a loaded two-core machine; only domains never gets ready.
        readyTimeoutMs: 12_000,
        env: { FAKE_NOT_SERVING: 'domains', BOUNCE_DOMAIN: undefined },
      }).catch((e: Error) => e);
      const message = (error as Error).message;
      expect(message).toMatch(/platform not ready after 12 s; not ready: domains\n/);
      expect(message).toContain('--- domains: grpc.health.v1 Check: NOT_SERVING ---');
      expect(message).toContain('"service":"domains"');
      const env = await readChildEnv(dataDir, 'auth');
      expect(env['MONGO_URL']).toBe(testMongoUrl());
      // The return-path domain local runs use when BOUNCE_DOMAIN is not set.
      expect(env['BOUNCE_DOMAIN']).toBe('bounces.mailfleet.local');
      expect(isAlive(Number(env['PID']))).toBe(false);
    } finally {
      await fsp.rm(repo, { recursive: true, force: true });
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  it('stops what it started when aborted', async () => {
    const repo = await createFakeRepo();
    const dataDir = await tempDir('mailfleet-platform-abort-');
    const controller = new AbortController();
    try {
      const starting = startPlatform({ repoRoot: repo, ports: 'free', dataDir, log: quiet, signal: controller.signal, env: { FAKE_NOT_SERVING: 'auth' } });
      // Abort once the gateway has started (it records its environment first thing), not after a fixed
      // time: on a loaded machine the infrastructure may take longer than any fixed time to come up.
      const env = await waitForChildEnv(dataDir, 'gateway', 120_000);
      controller.abort();
      await expect(starting).rejects.toThrow('platform start aborted');
      expect(isAlive(Number(env['PID']))).toBe(false);
    } finally {
      await fsp.rm(repo, { recursive: true, force: true });
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
});
