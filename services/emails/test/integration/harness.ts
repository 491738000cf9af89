import { once } from 'node:events';
import fsp from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createSmtpSink, type SmtpSink } from '@mailfleet/deploy';
import {
  createGrpcClient, createLogger, decodeEvent, startService, type EventEnvelope, type RunningService, type UpstreamClient,
} from '@mailfleet/kit';
import { authV1, domainsV1, emailsV1, suppressionsV1 } from '@mailfleet/proto';
import { isolatedNats, readMailDir, startDnsServer, testMongoUrl, uniqueDbName, type DnsServer, type ReceivedMail } from '@mailfleet/testkit';
import { loadAuthConfig } from '../../../auth/src/config.js';
import { createAuthServer } from '../../../auth/src/server.js';
import { loadDomainsConfig } from '../../../domains/src/config.js';
import { createDomainsServer } from '../../../domains/src/server.js';
import { loadSuppressionsConfig } from '../../../suppressions/src/config.js';
import { createSuppressionsServer } from '../../../suppressions/src/server.js';
import { loadEmailsConfig } from '../../src/config.js';
import { createEmailsServer, type EmailsServerOverrides } from '../../src/server.js';

/**
 * The emails service on real servers, with the real services it calls: auth
 * (quotas), domains (sending identity, DKIM), suppressions, a DNS server the
 * domains service verifies against, and the platform's SMTP sink with its
 * mailbox simulator reporting back to the emails service's inbound listener.
 * A NATS server of its own, so the durable consumers here never take events
 * from another test file's services.
 */
export const TRACKING_KEY = 'integration-tracking-key-0123456789abcdef0123456789';
export const BOUNCE_DOMAIN = 'bounces.mailfleet.test';
const logger = createLogger({ service: 'emails-it', level: process.env['LOG_LEVEL'] === 'debug' ? 'debug' : process.env['LOG_LEVEL'] === 'warn' ? 'warn' : 'silent' });

async function freePort(): Promise<number> {
  const srv = createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

export interface EmailsReplica {
  readonly svc: RunningService;
  readonly client: UpstreamClient<emailsV1.EmailsServiceClient>;
  readonly inboundPort: number;
  stop(): Promise<void>;
}

export interface Harness {
  readonly auth: UpstreamClient<authV1.AuthServiceClient>;
  readonly domains: UpstreamClient<domainsV1.DomainsServiceClient>;
  readonly suppressions: UpstreamClient<suppressionsV1.SuppressionsServiceClient>;
  readonly emails: UpstreamClient<emailsV1.EmailsServiceClient>;
  readonly sink: SmtpSink;
  /** The relay goes away (connections refused) until startSink(). */
  stopSink(): Promise<void>;
  startSink(): Promise<void>;
  readonly dns: DnsServer;
  readonly events: EventEnvelope[];
  readonly primary: EmailsReplica;
  readonly emailsDb: string;
  /** Another emails process on the same database and NATS (a second replica); `overrides` as createEmailsServer's. */
  startReplica(env?: Record<string, string>, overrides?: EmailsServerOverrides): Promise<EmailsReplica>;
  /** A team with a verified domain (tracking as asked). */
  newSender(opts?: { openTracking?: boolean; clickTracking?: boolean; dailyLimit?: number }): Promise<{ teamId: string; domainId: string; domain: string }>;
  mail(): Promise<ReceivedMail[]>;
  /** Polls until the email shows `status` (or any of them). */
  waitForStatus(teamId: string, emailId: string, status: string | string[], timeoutMs?: number): Promise<emailsV1.GetEmailResponse>;
  close(): Promise<void>;
}

export function statusName(s: emailsV1.EmailStatus): string {
  return emailsV1.emailStatusToJSON(s).replace('EMAIL_STATUS_', '');
}

export async function startHarness(opts: { emailsEnv?: Record<string, string>; simulatorDelayMs?: number } = {}): Promise<Harness> {
  const nats = await isolatedNats();
  const mongo = testMongoUrl();
  const dns = await startDnsServer();
  const mailDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-emails-it-'));
  const base = { GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: mongo, NATS_URL: nats.url, LOG_LEVEL: 'silent' };
  const services: RunningService[] = [];
  const clients: { close(): void }[] = [];
  const start = async (name: 'auth' | 'domains' | 'suppressions', config: Parameters<typeof startService>[0]['config'], build: Parameters<typeof startService>[0]['build']) => {
    const svc = await startService({ name, config, env: {}, logger: logger.child({ svc: name }), build });
    services.push(svc);
    return svc;
  };

  const authConfig = loadAuthConfig({ ...base, MONGO_DB: uniqueDbName('auth'), API_KEY_HASH_SECRET: 'integration-hash-secret-0123456789abcdef' });
  const authSvc = await start('auth', authConfig, (infra) => createAuthServer({ config: authConfig, infra }));
  const domainsConfig = loadDomainsConfig({
    ...base, MONGO_DB: uniqueDbName('domains'), DKIM_MASTER_KEY: 'c0ffee'.repeat(10) + 'abcd', DNS_SERVERS: dns.address, DNS_TIMEOUT_MS: '500', DNS_TRIES: '1',
    BOUNCE_DOMAIN, DOMAIN_VERIFY_POLL_INTERVAL_MS: '100', DOMAIN_VERIFY_RETRY_BASE_MS: '200', DOMAIN_VERIFY_RETRY_MAX_MS: '400',
  });
  const domainsSvc = await start('domains', domainsConfig, (infra) => createDomainsServer({ config: domainsConfig, infra }));
  const suppConfig = loadSuppressionsConfig({ ...base, MONGO_DB: uniqueDbName('supp') });
  const suppSvc = await start('suppressions', suppConfig, (infra) => createSuppressionsServer({ config: suppConfig, infra }));

  const addr = (s: RunningService) => `127.0.0.1:${s.grpc.port}`;
  const auth = createGrpcClient({ name: 'auth', address: addr(authSvc), ctor: authV1.AuthServiceClient, logger });
  const domains = createGrpcClient({ name: 'domains', address: addr(domainsSvc), ctor: domainsV1.DomainsServiceClient, logger });
  const suppressions = createGrpcClient({ name: 'suppressions', address: addr(suppSvc), ctor: suppressionsV1.SuppressionsServiceClient, logger });
  clients.push(auth, domains, suppressions);

  // The simulator reports to whichever replica owns this port (the first one).
  const inboundPort = await freePort();
  const sinkOptions = (port: number) => ({
    port, host: '127.0.0.1', dir: mailDir,
    simulator: { reportTarget: `127.0.0.1:${inboundPort}`, reportDelayMs: opts.simulatorDelayMs ?? 50, reportRetryDelaysMs: [200, 500, 1000, 2000, 4000] },
  });
  let sink = await createSmtpSink(sinkOptions(0));
  const sinkPort = sink.port;
  const emailsDb = uniqueDbName('emails');

  const startReplica = async (env: Record<string, string> = {}, port = 0, overrides?: EmailsServerOverrides): Promise<EmailsReplica> => {
    const config = loadEmailsConfig({
      ...base, MONGO_DB: emailsDb, AUTH_GRPC_ADDR: addr(authSvc), DOMAINS_GRPC_ADDR: addr(domainsSvc), SUPPRESSIONS_GRPC_ADDR: addr(suppSvc),
      SMTP_URL: `smtp://127.0.0.1:${sinkPort}`, TRACKING_SIGNING_KEY: TRACKING_KEY, PUBLIC_URL: 'https://track.mailfleet.test', BOUNCE_DOMAIN,
      INBOUND_SMTP_PORT: String(port), INBOUND_SMTP_HOST: '127.0.0.1',
      SEND_POLL_INTERVAL_MS: '50', SEND_RETRY_BASE_MS: '200', SEND_RETRY_MAX_MS: '400', SEND_MAX_ATTEMPTS: '3', SEND_LEASE_MS: '10000', SMTP_TIMEOUT_MS: '3000',
      IDENTITY_CACHE_TTL_MS: '1000', ...opts.emailsEnv, ...env,
    });
    const svc = await startService({ name: 'emails', config, env: {}, logger: logger.child({ svc: 'emails' }), build: (infra) => createEmailsServer({ config, infra, overrides }) });
    const client = createGrpcClient({ name: 'emails', address: addr(svc), ctor: emailsV1.EmailsServiceClient, logger, deadlineMs: 20_000 });
    let stopped = false;
    return {
      svc, client, inboundPort: port,
      async stop() {
        if (stopped) return;
        stopped = true;
        client.close();
        await svc.shutdown('replica stopped');
      },
    };
  };
  const primary = await startReplica({}, inboundPort);

  const events: EventEnvelope[] = [];
  const nc: NatsConnection = await connect({ servers: nats.url });
  const consumer = await jetstream(nc).consumers.get('MAILFLEET_EVENTS', { filter_subjects: ['mailfleet.email.>'] });
  const messages = await consumer.consume();
  void (async () => {
    for await (const m of messages) events.push(decodeEvent(m.data));
  })().catch(() => undefined);

  let seq = 0;
  const replicas: EmailsReplica[] = [primary];

  const harness: Harness = {
    auth, domains, suppressions, emails: primary.client, dns, events, primary, emailsDb,
    get sink() {
      return sink;
    },
    async stopSink() {
      await sink.close();
    },
    async startSink() {
      sink = await createSmtpSink(sinkOptions(sinkPort));
    },
    async startReplica(env, overrides) {
      const r = await startReplica(env, 0, overrides);
      replicas.push(r);
      return r;
    },
    async newSender(o = {}) {
      const { team } = await auth.call.createTeam({ name: `Emails IT ${seq}`, plan: authV1.Plan.PLAN_UNSPECIFIED });
      const teamId = team!.id;
      await auth.call.updateTeamLimits({ teamId, plan: 0, dailyEmailLimit: o.dailyLimit ?? 100_000, monthlyEmailLimit: -1, rateLimits: {} });
      const domain = `send${seq++}-${Date.now().toString(36)}.example.test`;
      const d = (await domains.call.createDomain({ teamId, name: domain, region: 'us-east-1' })).domain!;
      for (const r of d.dnsRecords) {
        if (r.type === 'MX') dns.setRecords(r.name, 'MX', [{ priority: Number(r.priority), exchange: r.value }]);
        else dns.setRecords(r.name, 'TXT', [r.value]);
      }
      await domains.call.verifyDomain({ teamId, domainId: d.id });
      const deadline = Date.now() + 20_000;
      for (;;) {
        const got = (await domains.call.getDomain({ teamId, domainId: d.id })).domain!;
        if (got.status === domainsV1.DomainStatus.DOMAIN_STATUS_SUCCESS) break;
        if (Date.now() > deadline) throw new Error(`domain ${domain} not verified: ${JSON.stringify(got.dnsRecords.map((r) => r.status))}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      if (o.openTracking || o.clickTracking) {
        await domains.call.updateDomain({ teamId, domainId: d.id, openTracking: o.openTracking ?? false, clickTracking: o.clickTracking ?? false });
      }
      return { teamId, domainId: d.id, domain };
    },
    mail: () => readMailDir(mailDir),
    async waitForStatus(teamId, emailId, status, timeoutMs = 15_000) {
      const wanted = Array.isArray(status) ? status : [status];
      const deadline = Date.now() + timeoutMs;
      let last: emailsV1.GetEmailResponse | undefined;
      for (;;) {
        last = await primary.client.call.getEmail({ teamId, emailId });
        if (wanted.includes(statusName(last.email!.latestStatus))) return last;
        if (Date.now() > deadline) {
          throw new Error(`email ${emailId} is ${statusName(last.email!.latestStatus)}, not ${wanted.join('/')}; events: ${last.events.map((e) => statusName(e.status)).join(', ')}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async close() {
      await messages.close().catch(() => undefined);
      await nc.close().catch(() => undefined);
      for (const r of replicas) await r.stop().catch(() => undefined);
      for (const c of clients) c.close();
      await sink.close();
      for (const s of services.reverse()) await s.shutdown('test over').catch(() => undefined);
      await dns.close();
      await fsp.rm(mailDir, { recursive: true, force: true });
    },
  };
  return harness;
}

/** Waits until `check` passes (returns truthy), polling. */
export async function eventually<T>(check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 15_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${timeoutMs} ms${lastErr ? `: ${String(lastErr)}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
