// The emails service's SMTP relay client (services/emails/dist/clients/smtp.js, its pool and pipelining) against a
// relay that is a round trip away: how many mails a second a pool of connections carries when the wire, not the CPU,
// is the limit (a relay in another data centre, or a provider's submission endpoint).
//   node deploy/scripts/relay-rtt-rate.mjs [messages=3000] [--rtt MS=20] [--pool N=5] [--concurrency N=16]
// The relay here is the bench's counting SMTP server in this process (PIPELINING, every command answered, nothing
// stored) with every reply leaving MS milliseconds after it is due, in order: a round trip of MS for each exchange.
// --concurrency is how many sends are under way at once, as the send worker's SEND_CONCURRENCY; --pool is SMTP_POOL_SIZE.
// Prints one JSON line. Does not touch a running platform.
import { performance } from 'node:perf_hooks';
import { createLogger } from '@mailfleet/kit';
import { createSmtpRelay } from '../../services/emails/dist/clients/smtp.js';
import { countingSmtpServer } from '../bench/smtp-client.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const messages = Number(args.find((a, i) => /^\d+$/.test(a) && !args[i - 1]?.startsWith('--')) ?? 3000);
const rtt = option('--rtt', 20);
const pool = option('--pool', 5);
const concurrency = option('--concurrency', 16);

const relayServer = await countingSmtpServer({ replyDelayMs: rtt });

const relay = createSmtpRelay({
  url: `smtp://127.0.0.1:${relayServer.port}`, poolSize: pool, timeoutMs: 30_000, logger: createLogger({ service: 'relay-rtt-rate', level: 'silent' }),
});
const raw = Buffer.from(`From: a@sender.test\r\nTo: b@rcpt.test\r\nSubject: rate\r\n\r\n${'x'.repeat(1500)}\r\n`);
let next = 0;
let failed = 0;
const started = performance.now();
await Promise.all(Array.from({ length: concurrency }, async () => {
  while (next < messages) {
    const i = next++;
    const result = await relay.send({ envelopeFrom: `bounce+${i}@sender.test`, recipients: [`r${i}@rcpt.test`], raw, envelopeId: `em_${i}` });
    if (result.kind !== 'accepted') failed += 1;
  }
}));
const seconds = (performance.now() - started) / 1000;
relay.close();
relayServer.close();
const received = relayServer.count();
console.log(JSON.stringify({ messages, received, failed, rttMs: rtt, pool, concurrency, seconds: Number(seconds.toFixed(2)), mailsPerMinute: Math.round((messages / seconds) * 60) }));
process.exit(failed > 0 || received !== messages ? 1 : 0);
