import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { consoleLogSink, DOMAIN_VERIFY_TEST_CLOCK, fileLogSink, startPlatform, teeLogSink, type Platform, type PlatformPorts } from '@mailfleet/deploy';
import { startControlServer, type ControlServer } from './control-server.js';
import { startDnsServer, type DnsFailureMode, type DnsRecordType, type DnsRecordValues, type DnsServer } from './dns-server.js';
import { createTestCa } from './test-ca.js';

/** What the e2e global setup provides to tests (keys of vitest's ProvidedContext). */
export interface E2eProvided {
  gatewayUrl: string;
  mongoUrl: string;
  natsUrl: string;
  smtpUrl: string;
  mailDir: string;
  dnsServer: string;
  testCaDir: string;
  platformPorts: PlatformPorts;
  platformDataDir: string;
  platformLogDir: string;
  infraControlUrl: string;
}

export interface E2eEnvironment {
  readonly provided: E2eProvided;
  readonly platform: Platform;
  readonly dns: DnsServer;
  stop(): Promise<void>;
}

export interface StartE2eEnvironmentOptions {
  /** Default: the real repository. Tests of this harness point it at stand-in programs. */
  repoRoot?: string;
  /** Also print child output (default: MAILFLEET_E2E_LOGS is set). Files under <dataDir>/logs are always written. */
  console?: boolean;
  /** Keep the temp data dir after stop (default: MAILFLEET_KEEP_TEST_DATA is set). */
  keepData?: boolean;
  readyTimeoutMs?: number;
}

/**
 * The platform on free ports with data in a temp dir, a DNS server it asks
 * (DNS_SERVERS), a test CA it trusts (NODE_EXTRA_CA_CERTS, webhooks to private
 * addresses allowed), and the loopback control endpoint that lets test workers
 * set DNS records and run fault drills.
 */
export async function startE2eEnvironment(opts: StartE2eEnvironmentOptions = {}): Promise<E2eEnvironment> {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-e2e-'));
  const logDir = path.join(dataDir, 'logs');
  const toConsole = opts.console ?? Boolean(process.env['MAILFLEET_E2E_LOGS']);
  const log = toConsole ? teeLogSink(fileLogSink(logDir), consoleLogSink({ out: process.stderr })) : fileLogSink(logDir);
  const keepData = opts.keepData ?? Boolean(process.env['MAILFLEET_KEEP_TEST_DATA']);
  let dns: DnsServer | undefined;
  let platform: Platform | undefined;
  let control: ControlServer | undefined;

  const stop = async (): Promise<void> => {
    await control?.close();
    await platform?.stop();
    await dns?.close();
    if (!keepData) await fsp.rm(dataDir, { recursive: true, force: true });
  };

  try {
    const ca = await createTestCa({ dir: path.join(dataDir, 'ca') });
    dns = await startDnsServer();
    const dnsServer = dns;
    platform = await startPlatform({
      ports: 'free',
      dataDir,
      log,
      ...(opts.repoRoot ? { repoRoot: opts.repoRoot } : {}),
      ...(opts.readyTimeoutMs ? { readyTimeoutMs: opts.readyTimeoutMs } : {}),
      env: {
        DNS_SERVERS: dns.address,
        NODE_EXTRA_CA_CERTS: ca.caFile,
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        LOG_LEVEL: process.env['LOG_LEVEL'] ?? 'info',
        ...DOMAIN_VERIFY_TEST_CLOCK,
        // The emails send queue on a test clock: retries within a second or two, a lease after a crash of
        // seconds rather than minutes (an attempt against the local sink takes milliseconds).
        SEND_RETRY_BASE_MS: '500',
        SEND_RETRY_MAX_MS: '2000',
        SEND_MAX_ATTEMPTS: '4',
        SEND_POLL_INTERVAL_MS: '200',
        SMTP_TIMEOUT_MS: '5000',
        SEND_LEASE_MS: '20000',
        // Campaigns on a test clock: a batch window "minute" lasts a second (the test-only minimum the issue
        // allows), and the sender looks for due batches five times a second.
        CAMPAIGN_BATCH_WINDOW_UNIT_MS: '1000',
        CAMPAIGN_SENDER_POLL_MS: '200',
        CAMPAIGN_BATCH_RETRY_DELAY_MS: '500',
        // Webhooks on a test clock: retries within a second or two, FAILED after two events that failed
        // every attempt, and a claim lease short enough that a killed service's deliveries resume quickly.
        WEBHOOK_RETRY_BASE_MS: '200',
        WEBHOOK_RETRY_MAX_MS: '2000',
        WEBHOOK_MAX_ATTEMPTS: '4',
        WEBHOOK_FAILURE_THRESHOLD: '2',
        WEBHOOK_TIMEOUT_MS: '3000',
        WEBHOOK_CLAIM_LEASE_MS: '5000',
        WEBHOOK_POLL_INTERVAL_MS: '200',
        // Gateways fold their rate-limit counts into auth five times a second: a test sees the replicas' shared
        // count a few folds after its requests, with time to spare on a busy machine.
        RATE_LIMIT_SYNC_MS: '200',
      },
      onUnexpectedExit: (report) => {
        process.stderr.write(`[e2e platform] ${report.message}\n`);
      },
    });
    const running = platform;
    const name = (body: Record<string, unknown>): string => {
      if (typeof body['name'] !== 'string') throw new Error('body.name is required');
      return body['name'];
    };
    const natsName = (body: Record<string, unknown>): string => {
      if (body['instance']) throw new Error('named NATS instances exist in the integration project only');
      if (!running.names.includes('nats')) throw new Error('NATS_URL points at an external server: nothing to stop');
      return 'nats';
    };
    const signalOf = (body: Record<string, unknown>): NodeJS.Signals =>
      (body['signal'] as NodeJS.Signals | undefined) ?? 'SIGKILL';
    const killAndWait = async (child: string, signal: NodeJS.Signals): Promise<void> => {
      running.kill(child, signal);
      // Signals that end a process: answer once it is gone, so the test sees the outage.
      if (signal === 'SIGKILL' || signal === 'SIGTERM' || signal === 'SIGINT') await running.waitForExit(child);
    };
    control = await startControlServer({
      // NATS here is the platform's: stopping it is a fault drill for the whole platform.
      'POST /nats/stop': (body) => running.stopChild(natsName(body)),
      'POST /nats/start': async (body) => {
        await running.startChild(natsName(body));
        return { url: running.natsUrl };
      },
      'POST /nats/restart': (body) => running.restart(natsName(body)),
      'POST /nats/kill': (body) => killAndWait(natsName(body), signalOf(body)),
      'POST /nats/url': () => ({ url: running.natsUrl }),
      'POST /dns/records': (body) =>
        dnsServer.setRecords(String(body['name']), body['type'] as DnsRecordType, body['values'] as DnsRecordValues),
      'POST /dns/failure': (body) =>
        dnsServer.setFailure(String(body['name'] ?? '*'), (body['mode'] ?? null) as DnsFailureMode | null),
      'POST /dns/clear': () => dnsServer.clear(),
      'POST /platform/kill': (body) => killAndWait(name(body), signalOf(body)),
      'POST /platform/stop': (body) => running.stopChild(name(body)),
      'POST /platform/start': (body) => running.startChild(name(body)),
      'POST /platform/restart': (body) => running.restart(name(body)),
      'POST /platform/logs': (body) => running.logs(name(body)),
    });

    return {
      platform,
      dns,
      stop,
      provided: {
        gatewayUrl: platform.gatewayUrl,
        mongoUrl: platform.mongoUrl,
        natsUrl: platform.natsUrl,
        smtpUrl: platform.smtpUrl,
        mailDir: platform.mailDir ?? '',
        dnsServer: dns.address,
        testCaDir: ca.dir,
        platformPorts: platform.ports,
        platformDataDir: dataDir,
        platformLogDir: logDir,
        infraControlUrl: control.url,
      },
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
