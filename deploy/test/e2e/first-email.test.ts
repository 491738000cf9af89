import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileLogSink, repoRoot, startPlatform, type Platform } from '@mailfleet/deploy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The README's "First email" block, exactly as written, against a platform booted as `npm start`
 * boots it (local mode: its own SMTP sink, no DNS_SERVERS), so the README cannot rot.
 */
const root = repoRoot();

/** The one `sh` block of the README section "First email". */
export function firstEmailBlock(readme: string): string {
  const section = /^## First email\n([\s\S]*?)(?=^## )/m.exec(readme)?.[1];
  if (!section) throw new Error('README.md has no "## First email" section');
  const blocks = [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
  if (blocks.length !== 1) throw new Error(`the "First email" section must hold exactly one sh block, found ${blocks.length}`);
  return blocks[0]!;
}

let platform: Platform;
let dataDir: string;

beforeAll(async () => {
  dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-first-email-'));
  platform = await startPlatform({
    ports: 'free',
    dataDir,
    localMode: true,
    log: fileLogSink(path.join(dataDir, 'logs')),
    // As on a laptop: nothing points elsewhere.
    env: { SMTP_URL: undefined, DNS_SERVERS: undefined, MONGO_URL: undefined, NATS_URL: undefined },
  });
}, 180_000);

afterAll(async () => {
  await platform?.stop();
  if (dataDir && !process.env['MAILFLEET_KEEP_TEST_DATA']) await fsp.rm(dataDir, { recursive: true, force: true });
});

describe('README "First email" in local mode', () => {
  it('local mode is on and said so in GET /v1/version', async () => {
    expect(platform.localDns?.address).toMatch(/^127\.0\.0\.1:\d+$/);
    const version = (await (await fetch(`${platform.gatewayUrl}/v1/version`)).json()) as { environment: string };
    expect(version.environment).toBe('local');
  });

  it('runs under bash -e and ends with the message in the dev inbox, dkim=pass', async () => {
    const block = firstEmailBlock(fs.readFileSync(path.join(root, 'README.md'), 'utf8'));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORT: String(platform.ports.gateway),
      AUTH_GRPC_ADDR: `127.0.0.1:${platform.ports.services.auth.grpc}`,
      DOMAINS_GRPC_ADDR: `127.0.0.1:${platform.ports.services.domains.grpc}`,
      MAILFLEET_DATA_DIR: dataDir,
    };
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn('bash', ['-e', '-c', block], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (err += c.toString()));
      child.once('error', reject);
      child.once('close', (c) => resolve({ code: c, stdout: out, stderr: err }));
    });
    expect({ code, stderr: code === 0 ? '' : stderr, stdout: code === 0 ? '' : stdout }).toEqual({ code: 0, stderr: '', stdout: '' });
    const lines = stdout.trimEnd().split('\n');
    expect(lines).toContain('example.com: SUCCESS');
    const last = lines[lines.length - 1]!;
    expect(last).toContain('My first email');
    expect(last).toMatch(/dkim=pass \(d=example\.com\)/);
  }, 240_000);
});
