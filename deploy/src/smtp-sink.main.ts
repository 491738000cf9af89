// The SMTP sink as its own process (what startPlatform runs):
//   SMTP_SINK_PORT (default 2525), SMTP_SINK_HOST (default 127.0.0.1),
//   SMTP_SINK_DIR (default <MAILFLEET_DATA_DIR or repo/.data>/mail).
import path from 'node:path';
import { defaultDataDir } from './paths.js';
import { createSmtpSink } from './smtp-sink.js';

const port = Number(process.env['SMTP_SINK_PORT'] ?? 2525);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  process.stderr.write(`SMTP_SINK_PORT must be a port number, got ${process.env['SMTP_SINK_PORT']}\n`);
  process.exit(2);
}
const dir = process.env['SMTP_SINK_DIR'] ?? path.join(defaultDataDir(), 'mail');
const sink = await createSmtpSink({ port, host: process.env['SMTP_SINK_HOST'] ?? '127.0.0.1', dir });
sink.onMessage((m) => {
  process.stdout.write(
    `${JSON.stringify({ msg: 'message stored', id: m.id, mailFrom: m.mailFrom, rcptTo: m.rcptTo, bytes: m.raw.length })}\n`,
  );
});
// The parent waits for this line.
process.stdout.write(`smtp sink listening on ${sink.url} (storing in ${sink.dir})\n`);

let closing = false;
const shutdown = (): void => {
  if (closing) return;
  closing = true;
  sink.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
  // Open client sessions must not hold the exit up.
  setTimeout(() => process.exit(0), 3000).unref();
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
