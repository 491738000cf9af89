import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from 'smtp-server';
import { createLogger } from '@mailfleet/kit';
import { createTestCa } from '@mailfleet/testkit';
import { createSmtpRelay, type RelayMessage, type SmtpRelay } from '../../src/clients/smtp.js';

/** What a real SMTP server (smtp-server) saw of each transaction. */
interface Seen {
  from: string;
  /** The DSN request as the server parsed it (RFC 3461: RET and ENVID of MAIL, NOTIFY of each RCPT). */
  dsn: { ret: unknown; envid: unknown; notify: unknown[] };
  to: string[];
  data: string;
  secure: boolean;
  user: string | undefined;
  connection: string;
}

const logger = createLogger({ service: 'smtp-relay-test', level: 'silent' });
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function startServer(options: Partial<SMTPServerOptions> & {
  refuseRecipient?: (to: string) => number | undefined;
  refuseSender?: number;
  /** The code to refuse a message with, for all or for the given recipients. */
  refuseData?: number | ((to: string[]) => number | undefined);
} = {}): Promise<{ port: number; seen: Seen[]; connections: () => number; server: SMTPServer }> {
  const seen: Seen[] = [];
  let connections = 0;
  const { refuseRecipient, refuseSender, refuseData, ...smtpOptions } = options;
  const refusal = (code: number) => Object.assign(new Error(`${code} refused`), { responseCode: code });
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'],
    hideDSN: false,
    logger: false,
    ...smtpOptions,
    onConnect(_session, cb) {
      connections += 1;
      cb();
    },
    onMailFrom(address, _session, cb) {
      cb(refuseSender ? refusal(refuseSender) : undefined);
    },
    onRcptTo(address, _session, cb) {
      const code = refuseRecipient?.(address.address);
      cb(code ? refusal(code) : undefined);
    },
    onData(stream, session: SMTPServerSession, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const to = session.envelope.rcptTo.map((r) => r.address);
        const refused = typeof refuseData === 'function' ? refuseData(to) : refuseData;
        if (refused) return cb(refusal(refused));
        seen.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          dsn: {
            ret: session.envelope.dsn?.ret ?? null,
            envid: session.envelope.dsn?.envid ?? null,
            notify: session.envelope.rcptTo.map((r) => (r as { dsn?: { notify?: unknown } }).dsn?.notify ?? null),
          },
          to,
          data: Buffer.concat(chunks).toString('utf8'),
          secure: session.secure,
          user: session.user as string | undefined,
          connection: session.id,
        });
        cb(null);
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.server.address() as net.AddressInfo).port;
  return { port, seen, connections: () => connections, server };
}

/** A TCP proxy to `port` that keeps each chunk the client wrote, as the proxy read it. */
async function recordingProxy(port: number): Promise<{ port: number; chunks: string[] }> {
  const chunks: string[] = [];
  const proxy = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    client.on('data', (c: Buffer) => {
      chunks.push(c.toString('latin1'));
      upstream.write(c);
    });
    upstream.pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.end());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => proxy.close(() => resolve())));
  return { port: (proxy.address() as net.AddressInfo).port, chunks };
}

/**
 * A minimal relay (PIPELINING, every command answered) that keeps each message it took, and closes a connection
 * without a word where `drop` says: at the `n`th MAIL of its `connection`th connection, or at the end of its `n`th
 * message.
 */
async function startRawRelay(drop: (at: { connection: number; command: 'MAIL' | 'END'; n: number }) => boolean): Promise<{
  port: number; received: string[]; connections: () => number;
}> {
  let connections = 0;
  const received: string[] = [];
  const server = net.createServer((socket) => {
    connections += 1;
    const connection = connections;
    let mails = 0;
    let ends = 0;
    let inData = false;
    let data = '';
    socket.write('220 raw.test ESMTP\r\n');
    socket.on('data', (chunk) => {
      for (const line of chunk.toString('latin1').split('\r\n').slice(0, -1)) {
        if (inData) {
          if (line !== '.') {
            data += `${line}\n`;
            continue;
          }
          ends += 1;
          if (drop({ connection, command: 'END', n: ends })) return void socket.destroy();
          inData = false;
          received.push(data);
          data = '';
          socket.write('250 queued\r\n');
        } else if (/^EHLO/i.test(line)) socket.write('250-raw.test\r\n250 PIPELINING\r\n');
        else if (/^MAIL/i.test(line)) {
          mails += 1;
          if (drop({ connection, command: 'MAIL', n: mails })) return void socket.destroy();
          socket.write('250 ok\r\n');
        } else if (/^DATA/i.test(line)) {
          inData = true;
          socket.write('354 go on\r\n');
        } else socket.write('250 ok\r\n');
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as net.AddressInfo).port, received, connections: () => connections };
}

function relayTo(url: string, extra: Partial<Parameters<typeof createSmtpRelay>[0]> = {}): SmtpRelay {
  const relay = createSmtpRelay({ url, poolSize: 2, timeoutMs: 5_000, logger, ...extra });
  cleanups.push(() => relay.close());
  return relay;
}

function message(i: number, over: Partial<RelayMessage> = {}): RelayMessage {
  const body = `From: a@sender.test\r\nTo: r${i}@rcpt.test\r\nSubject: m${i}\r\n\r\nline one\r\n.a line that starts with a dot\r\n..two dots\r\nlast\r\n`;
  return { envelopeFrom: `bounce+${i}@bounce.test`, recipients: [`r${i}@rcpt.test`], raw: Buffer.from(body), envelopeId: `em_${i}`, ...over };
}

describe('SMTP relay client', () => {
  it('sends one message after another over one pipelined connection, with DSN parameters and dot-stuffing', async () => {
    const peer = await startServer();
    const relay = relayTo(`smtp://127.0.0.1:${peer.port}`);
    for (let i = 0; i < 3; i++) {
      const result = await relay.send(message(i));
      expect(result).toMatchObject({ kind: 'accepted', accepted: [`r${i}@rcpt.test`], refused: [], deferred: [] });
    }
    expect(peer.connections()).toBe(1);
    expect(peer.seen).toHaveLength(3);
    expect(new Set(peer.seen.map((s) => s.connection)).size).toBe(1);
    const first = peer.seen[0]!;
    expect(first.from).toBe('bounce+0@bounce.test');
    expect(first.dsn).toEqual({ ret: 'HDRS', envid: 'em_0', notify: [['SUCCESS', 'FAILURE', 'DELAY']] });
    // The server undoes the stuffing: the message arrives exactly as composed.
    expect(first.data).toBe(message(0).raw.toString('utf8'));
  });

  it('shares a pool of connections between concurrent sends, and replaces a connection after its message limit', async () => {
    const peer = await startServer();
    const relay = relayTo(`smtp://127.0.0.1:${peer.port}`, { poolSize: 3, maxMessagesPerConnection: 4 });
    const results = await Promise.all(Array.from({ length: 24 }, (_, i) => relay.send(message(i))));
    expect(results.every((r) => r.kind === 'accepted')).toBe(true);
    expect(peer.seen.map((s) => s.to[0]).sort()).toEqual(Array.from({ length: 24 }, (_, i) => `r${i}@rcpt.test`).sort());
    const perConnection = new Map<string, number>();
    for (const s of peer.seen) perConnection.set(s.connection, (perConnection.get(s.connection) ?? 0) + 1);
    expect(Math.max(...perConnection.values())).toBeLessThanOrEqual(4);
    expect(peer.connections()).toBeGreaterThanOrEqual(6);
  });

  it('reads each answer: a refused recipient, all refused, a deferral, a refused sender and a refused message', async () => {
    const peer = await startServer({ refuseRecipient: (to) => (to.startsWith('no') ? 550 : to.startsWith('later') ? 452 : undefined) });
    const relay = relayTo(`smtp://127.0.0.1:${peer.port}`);
    const partly = await relay.send(message(1, { recipients: ['ok@rcpt.test', 'no@rcpt.test', 'later@rcpt.test'] }));
    expect(partly).toMatchObject({ kind: 'accepted', accepted: ['ok@rcpt.test'] });
    if (partly.kind !== 'accepted') throw new Error('unreachable');
    expect(partly.refused).toEqual([expect.objectContaining({ recipient: 'no@rcpt.test', responseCode: 550 })]);
    expect(partly.deferred).toEqual([expect.objectContaining({ recipient: 'later@rcpt.test', responseCode: 452 })]);
    expect(peer.seen.at(-1)!.to).toEqual(['ok@rcpt.test']);

    const none = await relay.send(message(2, { recipients: ['no@rcpt.test'] }));
    expect(none).toMatchObject({ kind: 'recipients-refused', refused: [expect.objectContaining({ recipient: 'no@rcpt.test', responseCode: 550 })] });
    // The connection is still good after a refusal.
    expect(await relay.send(message(3))).toMatchObject({ kind: 'accepted' });
    expect(peer.connections()).toBe(1);

    const sender = await startServer({ refuseSender: 451 });
    expect(await relayTo(`smtp://127.0.0.1:${sender.port}`).send(message(4))).toMatchObject({ kind: 'transient' });
    const data = await startServer({ refuseData: 554 });
    expect(await relayTo(`smtp://127.0.0.1:${data.port}`).send(message(5))).toMatchObject({ kind: 'rejected', responseCode: 554 });
  });

  it('talks to a relay without PIPELINING or DSN one command at a time, without DSN parameters', async () => {
    const peer = await startServer({ hidePIPELINING: true, hideDSN: true, refuseRecipient: (to) => (to.startsWith('no') ? 550 : undefined) });
    const relay = relayTo(`smtp://127.0.0.1:${peer.port}`);
    expect(await relay.send(message(1, { recipients: ['no@rcpt.test', 'ok@rcpt.test'] }))).toMatchObject({ kind: 'accepted', accepted: ['ok@rcpt.test'] });
    expect(await relay.send(message(2, { recipients: ['no@rcpt.test'] }))).toMatchObject({ kind: 'recipients-refused' });
    expect(await relay.send(message(3))).toMatchObject({ kind: 'accepted' });
    expect(peer.seen).toHaveLength(2);
    expect(peer.seen[0]!.dsn).toEqual({ ret: null, envid: null, notify: [null] });
  });

  it('upgrades with STARTTLS when offered and authenticates with the URL credentials; a bad password is transient', async () => {
    const ca = await createTestCa();
    const cert = ca.issueServerCert(['localhost']);
    const peer = await startServer({
      disabledCommands: [], key: cert.keyPem, cert: cert.certPem, authMethods: ['PLAIN', 'LOGIN'],
      onAuth(auth, _session, cb) {
        if (auth.username === 'relay user' && auth.password === 'p@ss:word') cb(null, { user: auth.username });
        else cb(new Error('535 bad credentials'));
      },
    });
    const url = `smtp://${encodeURIComponent('relay user')}:${encodeURIComponent('p@ss:word')}@localhost:${peer.port}`;
    expect(await relayTo(url, { tls: { ca: ca.certPem } }).send(message(1))).toMatchObject({ kind: 'accepted' });
    expect(peer.seen[0]).toMatchObject({ secure: true, user: 'relay user' });

    const wrong = await relayTo(`smtp://relay%20user:nope@localhost:${peer.port}`, { tls: { ca: ca.certPem } }).send(message(2));
    expect(wrong).toMatchObject({ kind: 'transient' });
    // A certificate the client does not trust is refused too (transient: nothing was sent).
    expect(await relayTo(url).send(message(3))).toMatchObject({ kind: 'transient' });
    expect(peer.seen).toHaveLength(1);
  });

  it('replaces a pooled connection the relay closed meanwhile without failing the send', async () => {
    const peer = await startServer({ socketTimeout: 300 });
    // One connection: the closed one must make room for its replacement.
    const relay = relayTo(`smtp://127.0.0.1:${peer.port}`, { poolSize: 1, timeoutMs: 2_000 });
    expect(await relay.send(message(1))).toMatchObject({ kind: 'accepted' });
    // The server drops the idle connection after 300 ms.
    await new Promise((r) => setTimeout(r, 800));
    expect(await relay.send(message(2))).toMatchObject({ kind: 'accepted' });
    expect(peer.connections()).toBe(2);
  });

  it('sends again over a new connection when a reused one turns out dropped before the message was written', async () => {
    // A relay that drops a connection, without a word, at its second transaction: as a relay restarted meanwhile
    // looks from a pooled connection whose close has not arrived yet.
    const raw = await startRawRelay(({ command, n }) => command === 'MAIL' && n === 2);
    const relay = relayTo(`smtp://127.0.0.1:${raw.port}`, { poolSize: 1 });
    expect(await relay.send(message(1))).toMatchObject({ kind: 'accepted' });
    expect(await relay.send(message(2))).toMatchObject({ kind: 'accepted' });
    expect(raw.connections()).toBe(2);
    expect(raw.received).toHaveLength(2);
    expect(raw.received[1]).toMatch(/Subject: m2/);
  });

  it('hands a busy connection the next transaction: its commands leave with the message before it, each message once in its envelope', async () => {
    const peer = await startServer({
      refuseRecipient: (to) => (to.startsWith('no') ? 550 : undefined),
    });
    const wire = await recordingProxy(peer.port);
    const relay = relayTo(`smtp://127.0.0.1:${wire.port}`, { poolSize: 1 });
    const sends = Array.from({ length: 8 }, (_, i) =>
      relay.send(message(i, i === 5 ? { recipients: [`no${i}@rcpt.test`] } : {})));
    const results = await Promise.all(sends);
    results.forEach((r, i) => {
      if (i === 5) expect(r).toMatchObject({ kind: 'recipients-refused', refused: [{ recipient: 'no5@rcpt.test', responseCode: 550 }] });
      else expect(r).toMatchObject({ kind: 'accepted', accepted: [`r${i}@rcpt.test`] });
    });
    expect(peer.connections()).toBe(1);
    // Each message arrived once, in its own envelope: the replies went to the transactions they answer.
    expect(peer.seen.map((s) => s.to[0]).sort()).toEqual([0, 1, 2, 3, 4, 6, 7].map((i) => `r${i}@rcpt.test`).sort());
    for (const s of peer.seen) expect(s.data).toBe(message(Number(s.to[0]!.slice(1, 2))).raw.toString('utf8'));
    // The end of a message and the next transaction's commands in one write of the client.
    expect(wire.chunks.some((c) => /\r\n\.\r\nMAIL FROM:<bounce\+\d@bounce\.test>.*\r\nRCPT TO:<[^>]+>.*\r\nDATA\r\n$/s.test(c))).toBe(true);
  });

  it('a message the relay refuses does not disturb the transaction pipelined behind it', async () => {
    const peer = await startServer({ refuseData: (to) => (to.some((r) => r.startsWith('spam')) ? 554 : undefined) });
    const wire = await recordingProxy(peer.port);
    const relay = relayTo(`smtp://127.0.0.1:${wire.port}`, { poolSize: 1 });
    const recipients = ['spam0@rcpt.test', 'r1@rcpt.test', 'spam2@rcpt.test', 'r3@rcpt.test'];
    const results = await Promise.all(recipients.map((to, i) => relay.send(message(i, { recipients: [to] }))));
    expect(results.map((r) => r.kind)).toEqual(['rejected', 'accepted', 'rejected', 'accepted']);
    expect(results[0]).toMatchObject({ responseCode: 554 });
    expect(peer.seen.map((s) => s.to[0])).toEqual(['r1@rcpt.test', 'r3@rcpt.test']);
    expect(peer.connections()).toBe(1);
    expect(wire.chunks.some((c) => /\r\n\.\r\nMAIL FROM:/.test(c))).toBe(true);
  });

  it('when the relay drops the connection after a message, that one is transient and the one pipelined behind it goes again', async () => {
    // A relay that, on its first connection, closes without a word once it has the first message (with the next
    // transaction's commands behind it).
    const raw = await startRawRelay(({ connection, command }) => connection === 1 && command === 'END');
    const relay = relayTo(`smtp://127.0.0.1:${raw.port}`, { poolSize: 1 });
    const [one, two] = await Promise.all([relay.send(message(1)), relay.send(message(2))]);
    // The first may have been taken: the send queue retries it later. The second had not been written.
    expect(one).toMatchObject({ kind: 'transient' });
    expect(two).toMatchObject({ kind: 'accepted' });
    expect(raw.connections()).toBe(2);
    expect(raw.received).toHaveLength(1);
    expect(raw.received[0]).toMatch(/Subject: m2/);
  });

  it('gives up within the timeout on a relay that never answers, and on one that is not there', async () => {
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => silent.close(() => resolve())));
    const port = (silent.address() as net.AddressInfo).port;
    const result = await relayTo(`smtp://127.0.0.1:${port}`, { timeoutMs: 300 }).send(message(1));
    expect(result).toMatchObject({ kind: 'transient' });
    expect(result.kind === 'transient' && result.message).toMatch(/within 300 ms/);
    silent.close();

    const free = net.createServer();
    await new Promise<void>((resolve) => free.listen(0, '127.0.0.1', resolve));
    const freePort = (free.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => free.close(() => resolve()));
    expect(await relayTo(`smtp://127.0.0.1:${freePort}`).send(message(2))).toMatchObject({ kind: 'transient' });
  });
});
