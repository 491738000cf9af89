// The SMTP sink's raw accept rate, measured the way `npm run bench` measures it (a nodemailer pool of 5,
// 10 senders, null envelope sender, one recipient each), against a sink process started here:
//   node deploy/scripts/sink-accept-rate.mjs [messages=20000] [--reports] [--nodelay | --raw-client]
// --reports: real envelope senders and a counting SMTP listener as the simulator's report target, so the
// delivery reports are part of the load; the script waits until every report arrived.
// --nodelay: the client's sockets have Nagle off. nodemailer leaves it on and writes a message in
// several pieces, so each message waits for the sink's delayed ACK (40 ms on Linux): five pooled
// connections then cannot pass ~7,500 mails/min whatever the server; with it off the sink is measured.
// --raw-client: instead of nodemailer, 10 connections of a minimal client (Nagle off, MAIL/RCPT/DATA
// pipelined, the same message each time): it costs little CPU, so the sink is what is measured.
// Also printed: the sink process's CPU time per message (user + system, from /proc), which the load
// of a shared machine does not change much.
// SINK_MAIN: another build of smtp-sink.main.js to measure (e.g. the one of an older checkout).
// SINK_NODE_ARGS: extra node flags for the sink process (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`).
// Prints one JSON line. Does not touch a running platform.
import { performance } from 'node:perf_hooks';
import { spawn } from 'node:child_process';
import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import nodemailer from 'nodemailer';
import { countingSmtpServer, pipelinedSend } from '../bench/smtp-client.mjs';

const args = process.argv.slice(2);
const messages = Number(args.find((a) => /^\d+$/.test(a)) ?? 20000);
const withReports = args.includes('--reports');
const noDelay = args.includes('--nodelay');
const rawClient = args.includes('--raw-client');
const here = path.dirname(fileURLToPath(import.meta.url));
const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-sink-rate-'));

// A counting report target: answers every command, counts completed DATA sections.
const target = await countingSmtpServer();

const nodeArgs = (process.env['SINK_NODE_ARGS'] ?? '').split(' ').filter(Boolean);
const child = spawn(process.execPath, [...nodeArgs, process.env['SINK_MAIN'] ?? path.join(here, '../dist/smtp-sink.main.js')], {
  env: {
    ...process.env, SMTP_SINK_PORT: '0', SMTP_SINK_DIR: dir,
    SIMULATOR_REPORT_TARGET: `127.0.0.1:${target.port}`,
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
const getSocket = (options, callback) => {
  const socket = net.connect({ host: options.host, port: options.port }, () => callback(null, { connection: socket }));
  socket.setNoDelay(true);
  socket.once('error', (error) => callback(error));
};
const transport = nodemailer.createTransport({
  host: u.hostname, port: Number(u.port), secure: false, ignoreTLS: true, pool: true, maxConnections, maxMessages: Infinity,
  ...(noDelay ? { getSocket } : {}),
});
/** user + system CPU time of the sink process in ms (clock ticks of 10 ms). */
const cpuMs = async () => {
  const stat = await fsp.readFile(`/proc/${child.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
};
const cpuBefore = await cpuMs();
const html = `<p>${'Hello from the mailfleet bench. '.repeat(16)}</p>`;
let next = 0;
let accepted = 0;
let failed = 0;
const start = performance.now();
if (rawClient) {
  ({ accepted, failed } = await pipelinedSend({ port: Number(u.port), connections: maxConnections * 2, messages, from: withReports ? 'bounces@mailfleet-bench.test' : '', html }));
} else {
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
}

const seconds = (performance.now() - start) / 1000;
transport.close();
const cpuAtLoadEnd = await cpuMs();
let reportsS = null;
if (withReports) {
  const limit = Date.now() + 120_000;
  while (target.count() < accepted && Date.now() < limit) await new Promise((r) => setTimeout(r, 50));
  reportsS = Math.round((performance.now() - start) / 10) / 100;
}
const cpuAtEnd = await cpuMs();
const { listSinkMessages } = await import('../dist/smtp-sink.js');
const stored = (await listSinkMessages(dir)).length;
child.kill('SIGTERM');
await new Promise((r) => child.once('exit', r));
target.close();
await fsp.rm(dir, { recursive: true, force: true });
console.log(JSON.stringify({
  messages, accepted, failed, stored, durationS: Math.round(seconds * 100) / 100, perMinute: Math.round((accepted / seconds) * 60), client: rawClient ? 'raw' : noDelay ? 'nodemailer, Nagle off' : 'nodemailer (as the bench)',
  sinkCpuUsPerMessage: Math.round(((cpuAtLoadEnd - cpuBefore) * 1000) / Math.max(1, accepted)),
  ...(withReports ? { sinkCpuUsPerMessageWithReports: Math.round(((cpuAtEnd - cpuBefore) * 1000) / Math.max(1, accepted)) } : {}),
  ...(withReports ? { reports: target.count(), reportsDoneAfterS: reportsS } : {}),
}));
