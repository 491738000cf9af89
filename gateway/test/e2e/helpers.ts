import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';

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
    env: { ...process.env, ...upstreamEnv(), PORT: String(port), METRICS_PORT: String(metricsPort), HOST: '127.0.0.1', NATS_URL: inject('natsUrl'), LOG_LEVEL: 'warn' },
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
