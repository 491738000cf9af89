import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import nodemailer from 'nodemailer';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createSinkReader, createSmtpSink, findFreePort, listSinkMessages, type SmtpSink } from '@mailfleet/deploy';

const dirs: string[] = [];
const sinks: SmtpSink[] = [];
afterEach(async () => {
  for (const s of sinks.splice(0)) await s.close();
  for (const d of dirs.splice(0)) await fsp.rm(d, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const d = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-sink-store-'));
  dirs.push(d);
  return d;
}

async function sink(opts: Omit<Parameters<typeof createSmtpSink>[0], 'port'>): Promise<SmtpSink> {
  const s = await createSmtpSink({ port: 0, ...opts });
  sinks.push(s);
  return s;
}

/** `count` messages over a nodemailer pool (5 connections, 10 senders at once); resolves to the recipients. */
async function burst(port: number, count: number, from = ''): Promise<string[]> {
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, pool: true, maxConnections: 5 });
  const tos = Array.from({ length: count }, (_, i) => `reader+${i}@inbox.example.test`);
  let next = 0;
  try {
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (next < tos.length) {
          const to = tos[next++] as string;
          await transport.sendMail({ envelope: { from, to: [to] }, from: 'bench@example.test', to, subject: `for ${to}`, text: `.leading dot\n${to}` });
        }
      }),
    );
  } finally {
    transport.close();
  }
  return tos;
}

describe('SMTP sink storage', () => {
  it('a burst over pooled connections: every message in the log once, byte for byte, across segments', async () => {
    const dir = await tempDir();
    // Small segments, so the burst spans several.
    const s = await sink({ dir, segmentBytes: 8 * 1024 });
    const tos = await burst(s.port, 300);

    const messages = await listSinkMessages(dir);
    expect(messages.map((m) => m.rcptTo[0]).sort()).toEqual([...tos].sort());
    expect(new Set(messages.map((m) => m.id)).size).toBe(300);
    expect(messages.map((m) => m.id)).toEqual(messages.map((m) => m.id).sort());
    const segments = fs.readdirSync(dir).filter((n) => n.endsWith('.sinklog'));
    expect(segments.length).toBeGreaterThan(1);
    expect(fs.readdirSync(dir).filter((n) => n.endsWith('.eml') || n.endsWith('.json'))).toEqual([]);
    for (const m of messages) {
      // Dot-stuffing undone, the bytes as the client meant them.
      expect(m.raw.toString()).toContain(`\r\n.leading dot\r\n${m.rcptTo[0]}`);
      expect(fs.readFileSync(m.file).subarray(m.offset, m.offset + m.raw.length)).toEqual(m.raw);
    }
  });

  it('a reader returns each message once: what is new since its last read, never half a record', async () => {
    const dir = await tempDir();
    const s = await sink({ dir });
    const reader = createSinkReader(dir);
    expect(await reader.read()).toEqual([]);
    await burst(s.port, 5);
    expect(await reader.read()).toHaveLength(5);
    expect(await reader.read()).toEqual([]);

    // A record cut short (as a reader may catch one being written) is left for the next read.
    const [segment] = fs.readdirSync(dir).filter((n) => n.endsWith('.sinklog'));
    const raw = Buffer.from('Subject: by hand\r\n\r\nhello\r\n');
    const record = Buffer.concat([Buffer.from(`${JSON.stringify({ id: '9999999999999-ffffff000001', mailFrom: 'a@b.test', rcptTo: ['c@d.test'], receivedAt: new Date().toISOString(), bytes: raw.length })}\n`), raw, Buffer.from('\n')]);
    fs.appendFileSync(path.join(dir, segment as string), record.subarray(0, record.length - 10));
    expect(await reader.read()).toEqual([]);
    fs.appendFileSync(path.join(dir, segment as string), record.subarray(record.length - 10));
    const [late] = await reader.read();
    expect(late).toMatchObject({ id: '9999999999999-ffffff000001', rcptTo: ['c@d.test'] });
    expect(late?.raw).toEqual(raw);
    expect(await listSinkMessages(dir)).toHaveLength(6);
  });

  it("layout 'files': each message as <id>.eml plus its <id>.json envelope, read by the same reader", async () => {
    const dir = await tempDir();
    const s = await sink({ dir, layout: 'files' });
    const tos = await burst(s.port, 20, 'bounces@example.test');
    const messages = await listSinkMessages(dir);
    expect(messages.map((m) => m.rcptTo[0]).sort()).toEqual([...tos].sort());
    for (const m of messages) {
      expect(m.file).toBe(path.join(dir, `${m.id}.eml`));
      expect(fs.readFileSync(m.file)).toEqual(m.raw);
      expect(JSON.parse(fs.readFileSync(path.join(dir, `${m.id}.json`), 'utf8'))).toEqual({ mailFrom: 'bounces@example.test', rcptTo: m.rcptTo, receivedAt: m.receivedAt });
    }
  });

  it('a full report queue holds the answer to DATA back until there is room (here: until the sink closes)', async () => {
    const dir = await tempDir();
    const nobody = await findFreePort();
    const s = await createSmtpSink({
      port: 0, dir, simulator: { reportTarget: `127.0.0.1:${nobody}`, reportDelayMs: 0, reportRetryDelaysMs: [60_000], maxPendingReports: 1 },
    });
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: s.port, secure: false, ignoreTLS: true });
    try {
      await transport.sendMail({ envelope: { from: 'a@example.test', to: ['one@example.test'] }, raw: 'Subject: one\r\n\r\n1\r\n' });
      let answered = false;
      const second = transport.sendMail({ envelope: { from: 'a@example.test', to: ['two@example.test'] }, raw: 'Subject: two\r\n\r\n2\r\n' });
      void second.then(() => (answered = true));
      // Stored at once; only the answer waits.
      await expect.poll(async () => (await listSinkMessages(dir)).length).toBe(2);
      await new Promise((r) => setTimeout(r, 200));
      expect(answered).toBe(false);
      await s.close();
      expect((await second).response).toMatch(/^250 /);
    } finally {
      transport.close();
      await s.close();
    }
  });

  it('kill -9 of the sink process loses no acknowledged message, and a new process appends after it', { timeout: 60_000 }, async () => {
    const dir = await tempDir();
    const main = fileURLToPath(new URL('../../../../deploy/dist/smtp-sink.main.js', import.meta.url));
    const port = await findFreePort();
    const start = async () => {
      const child = spawn(process.execPath, [main], { env: { ...process.env, SMTP_SINK_PORT: String(port), SMTP_SINK_DIR: dir, MAILBOX_SIMULATOR: 'false' }, stdio: ['ignore', 'pipe', 'inherit'] });
      await new Promise<void>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          if (out.includes('listening on')) resolve();
        });
        child.once('exit', (code) => reject(new Error(`sink exited ${code}`)));
      });
      child.stdout.resume();
      return child;
    };
    const first = await start();
    const acknowledged: string[] = [];
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, pool: true, maxConnections: 5 });
    let i = 0;
    const senders = Array.from({ length: 10 }, async () => {
      for (;;) {
        const to = `killed+${i++}@inbox.example.test`;
        try {
          await transport.sendMail({ envelope: { from: '', to: [to] }, raw: `Subject: ${to}\r\n\r\nx\r\n` });
          acknowledged.push(to);
        } catch {
          return; // the sink is gone
        }
      }
    });
    await expect.poll(() => acknowledged.length, { timeout: 20_000 }).toBeGreaterThan(100);
    const exited = new Promise((r) => first.once('exit', r));
    first.kill('SIGKILL');
    await exited;
    await Promise.all(senders);
    transport.close();

    const second = await start();
    try {
      await burst(port, 10);
      const stored = (await listSinkMessages(dir)).map((m) => m.rcptTo[0] as string);
      const storedSet = new Set(stored);
      expect(acknowledged.filter((to) => !storedSet.has(to))).toEqual([]);
      expect(stored.length).toBe(storedSet.size);
      expect(stored.filter((to) => to.startsWith('reader+'))).toHaveLength(10);
      expect(fs.readdirSync(dir).filter((n) => n.endsWith('.sinklog'))).toHaveLength(2);
    } finally {
      second.kill('SIGKILL');
    }
  });
});
