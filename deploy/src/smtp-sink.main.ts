// The SMTP sink as its own process (what startPlatform runs):
//   SMTP_SINK_PORT (default 2525), SMTP_SINK_HOST (default 127.0.0.1),
//   SMTP_SINK_DIR (default <MAILFLEET_DATA_DIR or repo/.data>/mail),
//   MAILBOX_SIMULATOR (default true; false/0/no/off turns it off),
//   SIMULATOR_REPORT_TARGET (host:port of the inbound SMTP listener that gets the reports; none: no reports),
//   SIMULATOR_SOFTBOUNCE_WINDOW_MS (default 600000),
//   SMTP_SINK_LOG_EACH (default false; true: one line per stored message and per report sent, instead
//   of one summary line a second while mail flows).
import path from 'node:path';
import { defaultDataDir } from './paths.js';
import { createSmtpSink, parseHostPort, type MailboxSimulatorOptions } from './smtp-sink.js';

const fail = (message: string): never => {
  process.stderr.write(`${message}\n`);
  process.exit(2);
};
const line = (entry: Record<string, unknown>): void => void process.stdout.write(`${JSON.stringify(entry)}\n`);

const port = Number(process.env['SMTP_SINK_PORT'] ?? 2525);
if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`SMTP_SINK_PORT must be a port number, got ${process.env['SMTP_SINK_PORT']}`);
const dir = process.env['SMTP_SINK_DIR'] ?? path.join(defaultDataDir(), 'mail');

const simulatorOn = !/^(false|0|no|off)$/i.test((process.env['MAILBOX_SIMULATOR'] ?? 'true').trim());
const simulator: MailboxSimulatorOptions = {};
const target = process.env['SIMULATOR_REPORT_TARGET']?.trim();
if (target) {
  try {
    parseHostPort(target);
  } catch (error) {
    fail(`SIMULATOR_REPORT_TARGET: ${(error as Error).message}`);
  }
  simulator.reportTarget = target;
}
const windowSetting = process.env['SIMULATOR_SOFTBOUNCE_WINDOW_MS'];
if (windowSetting !== undefined && windowSetting !== '') {
  const ms = Number(windowSetting);
  if (!Number.isInteger(ms) || ms < 0) fail(`SIMULATOR_SOFTBOUNCE_WINDOW_MS must be a number of milliseconds, got ${windowSetting}`);
  simulator.softBounceWindowMs = ms;
}

const sink = await createSmtpSink({
  port,
  host: process.env['SMTP_SINK_HOST'] ?? '127.0.0.1',
  dir,
  ...(simulatorOn ? { simulator } : {}),
});
// At full speed a line per message would cost more than storing it (and flood the platform's log),
// so stored messages and sent reports are counted into a line a second; refusals and failures keep
// a line each.
const logEach = /^(true|1|yes|on)$/i.test((process.env['SMTP_SINK_LOG_EACH'] ?? '').trim());
const counts = { stored: 0, bytes: 0, reportsSent: 0, lastId: '' };
const flush = (): void => {
  if (counts.stored === 0 && counts.reportsSent === 0) return;
  line({ msg: 'messages stored', stored: counts.stored, bytes: counts.bytes, reportsSent: counts.reportsSent, lastId: counts.lastId });
  Object.assign(counts, { stored: 0, bytes: 0, reportsSent: 0, lastId: '' });
};
const summary = logEach ? undefined : setInterval(flush, 1000);
summary?.unref();
sink.onMessage((m) => {
  if (logEach) {
    line({ msg: 'message stored', id: m.id, mailFrom: m.mailFrom, rcptTo: m.rcptTo, bytes: m.raw.length });
    return;
  }
  counts.stored += 1;
  counts.bytes += m.raw.length;
  counts.lastId = m.id;
});
sink.onSimulatorEvent((event) => {
  if (event.type === 'recipient-refused') line({ msg: `mailbox simulator: ${event.rule} recipient refused`, ...event });
  else if (event.type === 'report-failed') line({ msg: `mailbox simulator: ${event.kind} report not delivered`, level: 'warn', ...event });
  else if (logEach) line({ msg: `mailbox simulator: ${event.kind} report sent`, ...event });
  else counts.reportsSent += 1;
});
// The parent waits for this line.
process.stdout.write(`smtp sink listening on ${sink.url} (storing in ${sink.dir})\n`);
process.stdout.write(
  simulatorOn
    ? `mailbox simulator on: bounce@, softbounce@, complaint@ any domain; reports to ${target ?? '(nowhere: SIMULATOR_REPORT_TARGET unset)'}\n`
    : 'mailbox simulator off: every recipient accepted, no reports\n',
);

let closing = false;
const shutdown = (): void => {
  if (closing) return;
  closing = true;
  if (summary) clearInterval(summary);
  flush();
  sink.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
  // Open client sessions must not hold the exit up.
  setTimeout(() => process.exit(0), 3000).unref();
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
