import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { setDnsRecords, waitForMail, type ReceivedMail } from '@mailfleet/testkit';
import { expect, inject } from 'vitest';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

export function gatewayUrl(): string {
  return inject('gatewayUrl');
}

export function upstreamEnv(): Record<string, string> {
  const ports = inject('platformPorts');
  const env: Record<string, string> = {};
  for (const [name, p] of Object.entries(ports.services)) env[`${name.toUpperCase()}_GRPC_ADDR`] = `127.0.0.1:${p.grpc}`;
  return env;
}

/** Runs the operator CLI exactly as a user would (`npx mailfleet ...` resolves to this bin). */
export async function mailfleet(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [`${repoRoot}services/auth/bin/mailfleet.mjs`, ...args], { env: { ...process.env, ...upstreamEnv() } }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

export async function createTeam(name: string): Promise<{ teamId: string; token: string }> {
  const r = await mailfleet(['team', 'create', '--name', name, '--json']);
  if (r.code !== 0) throw new Error(`team create failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as { teamId: string; token: string };
}

export interface Api {
  (method: string, path: string, opts?: { token?: string; body?: unknown; headers?: Record<string, string> }): Promise<{ status: number; body: unknown; headers: Headers }>;
}

export function apiAt(base: string): Api {
  return async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${base}${path}`, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: res.status, body, headers: res.headers };
  };
}

async function freePort(): Promise<number> {
  const srv = createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const port = (srv.address() as { port: number }).port;
  srv.close();
  return port;
}

/** A second gateway process on the same services and NATS: what a second replica in a cluster is. */
export async function startSecondGateway(): Promise<{ url: string; stop(): Promise<void>; proc: ChildProcess }> {
  const port = await freePort();
  const metricsPort = await freePort();
  const proc = spawn(process.execPath, [`${repoRoot}gateway/dist/server.js`], {
    env: {
      ...process.env, ...upstreamEnv(), PORT: String(port), METRICS_PORT: String(metricsPort), HOST: '127.0.0.1', NATS_URL: inject('natsUrl'), LOG_LEVEL: 'warn',
      // Folds as often as the platform's gateway does (the e2e environment's RATE_LIMIT_SYNC_MS).
      RATE_LIMIT_SYNC_MS: '200',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/v1/health`)).ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline || proc.exitCode !== null) throw new Error('second gateway did not start');
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    proc,
    async stop() {
      if (proc.exitCode !== null) return;
      proc.kill('SIGTERM');
      await once(proc, 'exit');
    },
  };
}

// ---------------------------------------------------------------------------
// Sending through the platform: teams with verified domains, and waiting for what the mail does.

/** Polls `check` every 200 ms until it returns something truthy; throws naming `what` after `timeoutMs`. */
export async function until<T>(check: () => Promise<T | false | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export interface Sender { token: string; teamId: string; domain: string; domainId: string }

interface DnsRecord { type: string; name: string; value: string; priority: string | null }

/**
 * Adds a domain to the team of `token`, publishes its DNS records in the test
 * DNS and waits until it is verified; with `tracking`, turns on open and/or
 * click tracking. Returns the domain's name and id.
 */
export async function addVerifiedDomain(token: string, label: string, tracking: { open?: boolean; click?: boolean } = {}): Promise<{ domain: string; domainId: string }> {
  const api = apiAt(gatewayUrl());
  const domain = `${label.toLowerCase()}-${randomBytes(4).toString('hex')}.mailfleet-e2e.test`;
  const created = await api('POST', '/v1/domains', { token, body: { name: domain, region: 'us-east-1' } });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const d = created.body as { id: string; dnsRecords: DnsRecord[] };
  for (const r of d.dnsRecords) {
    if (r.type === 'MX') await setDnsRecords(r.name, 'MX', [{ priority: Number(r.priority), exchange: r.value }]);
    else await setDnsRecords(r.name, 'TXT', [r.value]);
  }
  expect((await api('PUT', `/v1/domains/${d.id}/verify`, { token })).status).toBe(200);
  await until(async () => ((await api('GET', `/v1/domains/${d.id}`, { token })).body as { status: string }).status === 'SUCCESS', 30_000, `domain ${domain} verified`);
  if (tracking.open || tracking.click) {
    const patched = await api('PATCH', `/v1/domains/${d.id}`, { token, body: { openTracking: Boolean(tracking.open), clickTracking: Boolean(tracking.click) } });
    expect(patched.status).toBe(200);
  }
  return { domain, domainId: d.id };
}

/** The limits `newSender` gives a team unless told otherwise: nothing a test would run into. */
export const GENEROUS_LIMITS = ['--daily', '100000', '--monthly=-1', '--rate-limit', 'BATCH_EMAIL=100000', '--rate-limit', 'SEND_EMAIL=100000'];

/**
 * A new team (real CLI) with one verified domain. `limits` are the
 * `mailfleet team update` arguments (default GENEROUS_LIMITS; `[]` keeps the
 * plan's quotas and the default rate limits); `tracking` turns on open and
 * click tracking on the domain.
 */
export async function newSender(label: string, opts: { tracking?: boolean; limits?: string[] } = {}): Promise<Sender> {
  const { token, teamId } = await createTeam(`E2E ${label}`);
  const limits = opts.limits ?? GENEROUS_LIMITS;
  if (limits.length > 0) {
    const update = await mailfleet(['team', 'update', '--team', teamId, ...limits]);
    expect(update.code, update.stderr).toBe(0);
  }
  const { domain, domainId } = await addVerifiedDomain(token, label, opts.tracking ? { open: true, click: true } : {});
  return { token, teamId, domain, domainId };
}

export interface EmailEvent { emailId: string; status: string; createdAt: string; data: Record<string, unknown> }
export interface EmailDetail {
  id: string; teamId: string; to: string[]; from: string; subject: string; html: string | null; text: string | null; latestStatus: string;
  scheduledAt: string | null; domainId: string; replyTo: string[] | null; cc: string[] | null; bcc: string[] | null; emailEvents: EmailEvent[];
}

/** GET /v1/emails/{id} as the sender's team (must be 200). */
export async function detail(s: Pick<Sender, 'token'>, id: string): Promise<EmailDetail> {
  const res = await apiAt(gatewayUrl())('GET', `/v1/emails/${id}`, { token: s.token });
  expect(res.status).toBe(200);
  return res.body as EmailDetail;
}

/** Waits until the email's latestStatus is `status`; the error names where it got to. */
export async function waitStatus(s: Pick<Sender, 'token'>, id: string, status: string, timeoutMs = 30_000): Promise<EmailDetail> {
  let last: EmailDetail | undefined;
  try {
    return await until(async () => {
      last = await detail(s, id);
      return last.latestStatus === status && last;
    }, timeoutMs, `email ${id} ${status}`);
  } catch (err) {
    throw new Error(`${(err as Error).message}; it is ${last?.latestStatus} with ${last?.emailEvents.map((e) => e.status).join(', ')}`);
  }
}

/**
 * Waits until the email's events are exactly `statuses` (in any order: reports
 * and pixels can overtake the worker's own write) — its final state, with
 * nothing missing and nothing extra.
 */
export async function waitEvents(s: Pick<Sender, 'token'>, id: string, statuses: readonly string[], timeoutMs = 60_000): Promise<EmailDetail> {
  const want = [...statuses].sort().join(', ');
  let last: EmailDetail | undefined;
  try {
    return await until(async () => {
      last = await detail(s, id);
      return last.emailEvents.map((e) => e.status).sort().join(', ') === want && last;
    }, timeoutMs, `email ${id} with events ${want}`);
  } catch (err) {
    throw new Error(`${(err as Error).message}; it has ${last?.emailEvents.map((e) => e.status).join(', ')}`);
  }
}

/** The first message the SMTP sink received for `address`. */
export function mailTo(address: string, timeoutMs = 30_000): Promise<ReceivedMail> {
  return waitForMail(inject('mailDir'), (m) => m.envelope.rcptTo.includes(address), timeoutMs);
}

/** The open pixel and the first rewritten link of a tracked HTML body (undefined where absent). */
export function trackingLinks(html: string): { pixel: string | undefined; click: string | undefined } {
  return {
    pixel: /<img src="([^"]+\/v1\/track\/open\?t=[^"]+)"/.exec(html)?.[1],
    click: /href="([^"]+\/v1\/track\/click\?t=[^"]+)"/.exec(html)?.[1],
  };
}
