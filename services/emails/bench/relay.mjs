// CPU per message of handing mail to a relay: the service's SMTP client (src/clients/smtp.ts, from dist/: build
// first) against nodemailer's pooled transport with the options the service used before (Nagle off, 5
// connections), which it replaced. The relay is smtp-server in a child process (DSN offered, as a real relay
// does), so only the client's own CPU is counted. Not part of `npm run bench`. Run alone on a quiet machine:
//   flock /tmp/mailfleet-bench.lock node services/emails/bench/relay.mjs [--messages 5000] [--rounds 2]
import { fork } from 'node:child_process';
import net from 'node:net';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const require = createRequire(import.meta.url);

if (process.argv[2] === '--serve') {
  const { SMTPServer } = require('smtp-server');
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'], hideDSN: false, logger: false,
    onData(stream, _session, callback) {
      stream.resume();
      stream.on('end', () => callback());
    },
  });
  server.listen(0, '127.0.0.1', () => process.send(server.server.address().port));
} else {
  const { values } = parseArgs({ options: { messages: { type: 'string', default: '5000' }, rounds: { type: 'string', default: '2' } } });
  const messages = Number(values.messages);
  const rounds = Number(values.rounds);
  const { createSmtpRelay } = await import('../dist/clients/smtp.js');
  const { resultOfError, resultOfSuccess } = await import('../dist/domain/delivery.js');
  const nodemailer = require('nodemailer');

  const server = fork(new URL(import.meta.url).pathname, ['--serve']);
  const port = await new Promise((resolve) => server.once('message', resolve));
  const logger = { debug() {}, info() {}, warn() {}, error() {}, child() { return logger; } };

  function nodemailerRelay() {
    const transport = nodemailer.createTransport({
      pool: true, host: '127.0.0.1', port, maxConnections: 5, maxMessages: 1000, logger: false,
      getSocket: (_options, callback) => {
        const socket = net.connect({ host: '127.0.0.1', port });
        socket.setNoDelay(true);
        socket.once('connect', () => callback(null, { connection: socket }));
        socket.once('error', (error) => callback(error));
      },
    });
    return {
      async send(m) {
        try {
          const info = await transport.sendMail({
            envelope: { from: m.envelopeFrom, to: [...m.recipients] }, raw: m.raw,
            dsn: { envid: m.envelopeId, ret: 'HDRS', notify: ['SUCCESS', 'FAILURE', 'DELAY'] },
          });
          return resultOfSuccess(info);
        } catch (err) {
          return resultOfError(err);
        }
      },
      close: () => transport.close(),
    };
  }

  // A signed campaign mail of about 6 KB.
  const raw = Buffer.from(`DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=mail.example.com; s=mf1; b=${'x'.repeat(344)}\r\nFrom: news@mail.example.com\r\nTo: reader@example.net\r\nSubject: Spring news\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n${'<p>Dear reader, this paragraph of the newsletter tells you what is new.</p>\r\n'.repeat(80)}`);
  const message = (i) => ({ envelopeFrom: `b+${i}@bounce.example.com`, recipients: [`reader${i}@example.net`], raw, envelopeId: `em_${i}` });

  async function measure(name, relay) {
    for (let i = 0; i < 200; i++) await relay.send(message(i));
    const cpu = process.cpuUsage();
    const start = Date.now();
    let next = 0;
    let accepted = 0;
    // As the send worker hands them over: 16 at a time.
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (next < messages) if ((await relay.send(message(next++))).kind === 'accepted') accepted += 1;
    }));
    const used = process.cpuUsage(cpu);
    const wall = Date.now() - start;
    relay.close();
    console.log(`${name.padEnd(10)} ${accepted}/${messages} accepted, ${((used.user + used.system) / 1000 / messages).toFixed(3)} ms CPU per message, ${Math.round((messages / wall) * 1000)} messages/s`);
  }

  for (let r = 0; r < rounds; r++) {
    await measure('nodemailer', nodemailerRelay());
    await measure('mailfleet', createSmtpRelay({ url: `smtp://127.0.0.1:${port}`, poolSize: 5, timeoutMs: 20_000, logger }));
  }
  server.kill();
}
