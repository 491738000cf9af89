// The SMTP sink's raw accept rate, measured the way `npm run bench` measures it (a nodemailer pool of 5,
// 10 senders, null envelope sender, one recipient each), against a sink process started here:
//   node deploy/scripts/sink-accept-rate.mjs [messages=20000] [--reports]
// --reports: real envelope senders and a counting SMTP listener as the simulator's report target, so the
// delivery reports are part of the load; the script waits until every report arrived.
// SINK_NODE_ARGS: extra node flags for the sink process (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`).
// Prints one JSON line. Does not touch a running platform.
import { spawn } from 'node:child_process';
import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import nodemailer from 'nodemailer';

const args = process.argv.slice(2);
const messages = Number(args.find((a) => /^\d+$/.test(a)) ?? 20000);
const withReports = args.includes('--reports');
const here = path.dirname(fileURLToPath(import.meta.url));
const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-sink-rate-'));

// A counting report target: answers every command, counts completed DATA sections.
let reports = 0;
const target = net.createServer((socket) => {
  let inData = false;
  let buf = '';
  socket.write('220 counter\r\n');
  socket.on('data', (chunk) => {
    buf += chunk.toString('latin1');
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (inData) {
        if (line === '.') { inData = false; reports += 1; socket.write('250 ok\r\n'); }
      } else if (/^DATA$/i.test(line)) { inData = true; socket.write('354 go\r\n'); }
      else if (/^QUIT/i.test(line)) socket.end('221 bye\r\n');
      else if (/^EHLO/i.test(line)) socket.write('250-counter\r\n250 PIPELINING\r\n');
      else socket.write('250 ok\r\n');
    }
  });
  socket.on('error', () => undefined);
});
await new Promise((resolve) => target.listen(0, '127.0.0.1', resolve));

const nodeArgs = (process.env['SINK_NODE_ARGS'] ?? '').split(' ').filter(Boolean);
const child = spawn(process.execPath, [...nodeArgs, path.join(here, '../dist/smtp-sink.main.js')], {
  env: {
    ...process.env, SMTP_SINK_PORT: '0', SMTP_SINK_DIR: dir,
    SIMULATOR_REPORT_TARGET: `127.0.0.1:${target.address().port}`,
  },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const url = await new Promise((resolve, reject) => {
  let out = '';
  child.stdout.on('data', (c) => {
    out += c;
    const m = /listening on (smtp:\/\/\S+)/.exec(out);
    if (m) resolve(m[1]);
  });
  child.once('exit', (code) => reject(new Error(`sink exited ${code}`)));
});
child.stdout.resume();

const u = new URL(url);
const maxConnections = 5;
const transport = nodemailer.createTransport({
  host: u.hostname, port: Number(u.port), secure: false, ignoreTLS: true, pool: true, maxConnections, maxMessages: Infinity,
});
const html = `<p>${'Hello from the mailfleet bench. '.repeat(16)}</p>`;
let next = 0;
let accepted = 0;
let failed = 0;
const start = performance.now();
await Promise.all(
  Array.from({ length: maxConnections * 2 }, async () => {
    while (next < messages) {
      const i = next++;
      try {
        await transport.sendMail({
          envelope: { from: withReports ? 'bounces@mailfleet-bench.test' : '', to: [`reader+${i}@inbox.mailfleet-bench.test`] },
          from: 'bench@mailfleet-bench.test', to: `reader+${i}@inbox.mailfleet-bench.test`, subject: `bench ${i}`, html,
        });
        accepted += 1;
      } catch {
        failed += 1;
      }
    }
  }),
);
const seconds = (performance.now() - start) / 1000;
transport.close();
let reportsS = null;
if (withReports) {
  const limit = Date.now() + 120_000;
  while (reports < accepted && Date.now() < limit) await new Promise((r) => setTimeout(r, 50));
  reportsS = Math.round((performance.now() - start) / 10) / 100;
}
const stored = (await fsp.readdir(dir)).filter((f) => f.endsWith('.json')).length;
child.kill('SIGTERM');
await new Promise((r) => child.once('exit', r));
target.close();
await fsp.rm(dir, { recursive: true, force: true });
console.log(JSON.stringify({
  messages, accepted, failed, stored, durationS: Math.round(seconds * 100) / 100, perMinute: Math.round((accepted / seconds) * 60),
  ...(withReports ? { reports, reportsDoneAfterS: reportsS } : {}),
}));
