import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  SMTPServer,
  type SMTPServerAddress,
  type SMTPServerDataStream,
  type SMTPServerSession,
} from 'smtp-server';
import { LOOPBACK } from './net.js';

/** The sidecar `<id>.json` written next to each `<id>.eml`. */
export interface SinkEnvelope {
  /** MAIL FROM address; '' for the null sender `<>` (bounces). */
  mailFrom: string;
  rcptTo: string[];
  /** ISO 8601. */
  receivedAt: string;
}

export interface SinkMessage extends SinkEnvelope {
  /** `<timestamp>-<random>`: file names sort by arrival. */
  id: string;
  emlPath: string;
  /** The message exactly as the client sent it in DATA. */
  raw: Buffer;
}

/**
 * The local mailbox simulator: recipient local parts (`bounce`, `softbounce`,
 * `complaint`, optionally with a `+tag`) behave like real mailboxes that
 * bounce or complain, and every accepted message is answered with the report
 * a real receiving MTA would send back to the envelope sender.
 */
export interface MailboxSimulatorOptions {
  /**
   * `host:port` of the inbound SMTP listener that receives the reports
   * (delivery status notifications and feedback reports). Reports go there
   * and nowhere else, whatever the sender's domain. Without it no report is
   * sent; the recipient rules still apply.
   */
  reportTarget?: string;
  /** Pause between accepting a message and sending its reports; default 100 ms. */
  reportDelayMs?: number;
  /** Waits between attempts to hand a report over; default [500, 2000, 5000] (four attempts). */
  reportRetryDelaysMs?: number[];
  /** How long a deferred (sender, softbounce recipient) pair is remembered; default 10 minutes. */
  softBounceWindowMs?: number;
  /** Deadline of one attempt to hand a report over; default 10 s. */
  reportTimeoutMs?: number;
}

/** What the simulator did, for logs and tests. */
export type SimulatorEvent =
  | { type: 'recipient-refused'; rule: 'bounce' | 'softbounce'; mailFrom: string; rcptTo: string; reply: string }
  | { type: 'report-sent'; kind: 'dsn' | 'arf'; to: string; recipients: string[]; attempts: number; reply: string }
  | { type: 'report-failed'; kind: 'dsn' | 'arf'; to: string; recipients: string[]; attempts: number; error: string };

export interface SmtpSinkOptions {
  /** Default 2525; 0 picks a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Where messages are stored (created if missing). */
  dir: string;
  /** The mailbox simulator; off unless given (`true` = on with the defaults and no report target). */
  simulator?: MailboxSimulatorOptions | boolean;
}

export interface SmtpSink {
  /** `smtp://127.0.0.1:PORT` — what SMTP_URL is set to. */
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** Every stored message, oldest first. */
  messages(): Promise<SinkMessage[]>;
  /** Called after each message is stored. */
  onMessage(listener: (message: SinkMessage) => void): () => void;
  /** Called for each simulator decision and report outcome. */
  onSimulatorEvent(listener: (event: SimulatorEvent) => void): () => void;
  /** Stops listening; reports not yet handed over are dropped. */
  close(): Promise<void>;
}

/** The host name the sink gives itself in greetings and reports. */
const SINK_HOSTNAME = 'mailbox-simulator.mailfleet.local';
type Rule = 'bounce' | 'softbounce' | 'complaint';

/**
 * A local SMTP relay that accepts mail and keeps it: the raw message as
 * `<dir>/<id>.eml` and its envelope as `<dir>/<id>.json`. No TLS, AUTH optional
 * (any credentials pass). Every recipient is accepted unless the mailbox
 * simulator is on and the recipient's rule says otherwise.
 */
export async function createSmtpSink(opts: SmtpSinkOptions): Promise<SmtpSink> {
  const listeners = new Set<(message: SinkMessage) => void>();
  const simulatorListeners = new Set<(event: SimulatorEvent) => void>();
  const emit = (event: SimulatorEvent): void => {
    for (const listener of simulatorListeners) listener(event);
  };
  const simulator =
    opts.simulator === undefined || opts.simulator === false
      ? undefined
      : createMailboxSimulator(opts.simulator === true ? {} : opts.simulator, emit);
  const dir = path.resolve(opts.dir);
  await fsp.mkdir(dir, { recursive: true });
  const host = opts.host ?? LOOPBACK;

  const server = new SMTPServer({
    name: SINK_HOSTNAME,
    banner: 'mailfleet SMTP sink',
    secure: false,
    disabledCommands: ['STARTTLS'],
    authOptional: true,
    allowInsecureAuth: true,
    // The simulator's replies carry their own enhanced status codes (451 4.2.0, not smtp-server's 4.3.0).
    hideENHANCEDSTATUSCODES: true,
    disableReverseLookup: true,
    logger: false,
    onAuth(auth, _session, callback) {
      callback(null, { user: auth.username ?? 'anonymous' });
    },
    onRcptTo(address, session, callback) {
      callback(simulator?.checkRecipient(address, session) ?? null);
    },
    onData(stream: SMTPServerDataStream, session: SMTPServerSession, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.once('error', (error) => callback(error));
      stream.once('end', () => {
        const raw = Buffer.concat(chunks);
        const envelope: SinkEnvelope = {
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          receivedAt: new Date().toISOString(),
        };
        storeMessage(dir, raw, envelope).then(
          (message) => {
            for (const listener of listeners) listener(message);
            simulator?.accepted(message, session.remoteAddress);
            callback(null, `2.0.0 Ok: queued as ${message.id}`);
          },
          (error: Error) => callback(error),
        );
      });
    },
  });
  // A client that drops the connection is not our failure; keep serving.
  server.on('error', () => undefined);

  await new Promise<void>((resolve, reject) => {
    const onError = (error: Error): void => reject(error);
    server.server.once('error', onError);
    server.listen(opts.port ?? 2525, host, () => {
      server.server.off('error', onError);
      resolve();
    });
  });
  const address = server.server.address();
  if (address === null || typeof address === 'string') throw new Error('smtp sink: unexpected address');
  const urlHost = host === '0.0.0.0' ? LOOPBACK : host;

  return {
    url: `smtp://${urlHost}:${address.port}`,
    port: address.port,
    dir,
    messages: () => listSinkMessages(dir),
    onMessage(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    onSimulatorEvent(listener) {
      simulatorListeners.add(listener);
      return () => simulatorListeners.delete(listener);
    },
    async close() {
      simulator?.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function storeMessage(dir: string, raw: Buffer, envelope: SinkEnvelope): Promise<SinkMessage> {
  const id = `${Date.now()}-${randomBytes(6).toString('hex')}`;
  const emlPath = path.join(dir, `${id}.eml`);
  const jsonPath = path.join(dir, `${id}.json`);
  // The .json sidecar appears last (and atomically): a message is listed only once complete.
  await fsp.writeFile(`${emlPath}.tmp`, raw);
  await fsp.rename(`${emlPath}.tmp`, emlPath);
  await fsp.writeFile(`${jsonPath}.tmp`, `${JSON.stringify(envelope, null, 2)}\n`);
  await fsp.rename(`${jsonPath}.tmp`, jsonPath);
  return { id, emlPath, raw, ...envelope };
}

/**
 * Reads a sink directory (works across processes: the e2e tests read the
 * directory of the platform's sink). Oldest first.
 */
export async function listSinkMessages(dir: string): Promise<SinkMessage[]> {
  let names: string[];
  try {
    names = await fsp.readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const ids = names.filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -'.json'.length)).sort();
  const messages: SinkMessage[] = [];
  for (const id of ids) {
    const emlPath = path.join(dir, `${id}.eml`);
    const [meta, raw] = await Promise.all([fsp.readFile(path.join(dir, `${id}.json`), 'utf8'), fsp.readFile(emlPath)]);
    const envelope = JSON.parse(meta) as SinkEnvelope;
    messages.push({ id, emlPath, raw, mailFrom: envelope.mailFrom, rcptTo: envelope.rcptTo, receivedAt: envelope.receivedAt });
  }
  return messages;
}

/** `bounce@x`, `Bounce+42@x` -> 'bounce'; anything else -> undefined. */
export function simulatorRule(address: string): Rule | undefined {
  const at = address.lastIndexOf('@');
  const local = (at >= 0 ? address.slice(0, at) : address).toLowerCase();
  const base = local.split('+')[0];
  return base === 'bounce' || base === 'softbounce' || base === 'complaint' ? base : undefined;
}

/** `host:port` or `[v6]:port`. */
export function parseHostPort(value: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(value.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || !Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`expected host:port, got ${JSON.stringify(value)}`);
  return { host: (m[1] ?? m[2]) as string, port };
}

interface MailboxSimulator {
  /** null to accept, or the SMTP error to refuse the recipient with. */
  checkRecipient(address: SMTPServerAddress, session: SMTPServerSession): Error | null;
  accepted(message: SinkMessage, remoteAddress: string): void;
  close(): void;
}

function createMailboxSimulator(opts: MailboxSimulatorOptions, emit: (event: SimulatorEvent) => void): MailboxSimulator {
  const target = opts.reportTarget ? parseHostPort(opts.reportTarget) : undefined;
  const reportDelayMs = opts.reportDelayMs ?? 100;
  const retryDelays = opts.reportRetryDelaysMs ?? [500, 2000, 5000];
  const softBounceWindowMs = opts.softBounceWindowMs ?? 10 * 60_000;
  const reportTimeoutMs = opts.reportTimeoutMs ?? 10_000;
  /** (sender, recipient) -> when its first attempt was deferred. */
  const deferred = new Map<string, number>();
  const abort = new AbortController();

  const refuse = (code: number, text: string): Error => Object.assign(new Error(text), { responseCode: code });

  const deliver = async (kind: 'dsn' | 'arf', to: string, recipients: string[], data: string): Promise<void> => {
    if (!target) return;
    let attempts = 0;
    for (;;) {
      attempts += 1;
      try {
        const reply = await sendBySmtp({ ...target, to, data, timeoutMs: reportTimeoutMs, signal: abort.signal });
        emit({ type: 'report-sent', kind, to, recipients, attempts, reply });
        return;
      } catch (error) {
        const permanent = error instanceof SmtpReplyError && error.code >= 500;
        const wait = retryDelays[attempts - 1];
        if (abort.signal.aborted || permanent || wait === undefined) {
          emit({ type: 'report-failed', kind, to, recipients, attempts, error: (error as Error).message });
          return;
        }
        await sleep(wait, undefined, { signal: abort.signal }).catch(() => undefined);
      }
    }
  };

  return {
    checkRecipient(address, session) {
      const rcptTo = address.address;
      const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
      const rule = simulatorRule(rcptTo);
      if (rule === 'bounce') {
        const reply = `5.1.1 <${rcptTo}>: Recipient address rejected: User unknown`;
        emit({ type: 'recipient-refused', rule, mailFrom, rcptTo, reply: `550 ${reply}` });
        return refuse(550, reply);
      }
      if (rule === 'softbounce') {
        const now = Date.now();
        for (const [key, at] of deferred) if (now - at >= softBounceWindowMs) deferred.delete(key);
        const key = `${mailFrom.toLowerCase()}\n${rcptTo.toLowerCase()}`;
        if (!deferred.has(key)) {
          deferred.set(key, now);
          const reply = '4.2.0 Mailbox temporarily unavailable';
          emit({ type: 'recipient-refused', rule, mailFrom, rcptTo, reply: `451 ${reply}` });
          return refuse(451, reply);
        }
      }
      return null;
    },

    accepted(message, remoteAddress) {
      // Never answer a report with a report, and never without a place to send it to.
      if (!target || message.mailFrom === '' || message.rcptTo.length === 0) return;
      const complaints = message.rcptTo.filter((r) => simulatorRule(r) === 'complaint');
      void (async () => {
        await sleep(reportDelayMs, undefined, { signal: abort.signal });
        // Every accepted recipient had the message delivered (complaint ones too: one complains about mail it got).
        await deliver('dsn', message.mailFrom, message.rcptTo, deliveryReport(message));
        for (const rcpt of complaints) {
          await deliver('arf', message.mailFrom, [rcpt], feedbackReport(message, rcpt, remoteAddress));
        }
      })().catch(() => undefined);
    },

    close() {
      abort.abort();
    },
  };
}

// ---------------------------------------------------------------------------
// The reports, as a receiving MTA writes them (RFC 3464 and RFC 5965).

function deliveryReport(message: SinkMessage): string {
  const boundary = `dsn-${randomBytes(8).toString('hex')}`;
  const arrival = rfc5322Date(new Date(message.receivedAt));
  const groups = message.rcptTo
    .map(
      (rcpt) =>
        `Final-Recipient: rfc822; ${rcpt}\r\nOriginal-Recipient: rfc822; ${rcpt}\r\nAction: delivered\r\nStatus: 2.0.0\r\n` +
        `Diagnostic-Code: smtp; 250 2.0.0 Ok: delivered to mailbox by the mailbox simulator\r\n`,
    )
    .join('\r\n');
  return [
    `From: Mail Delivery System <MAILER-DAEMON@${SINK_HOSTNAME}>`,
    `To: <${message.mailFrom}>`,
    'Subject: Successful Mail Delivery Report',
    `Date: ${rfc5322Date(new Date())}`,
    `Message-ID: <${randomBytes(12).toString('hex')}@${SINK_HOSTNAME}>`,
    'Auto-Submitted: auto-replied',
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=delivery-status; boundary="${boundary}"`,
    '',
    'This is a MIME-encapsulated message.',
    '',
    `--${boundary}`,
    'Content-Description: Notification',
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'This is the mailfleet mailbox simulator.',
    '',
    'Your message was successfully delivered to the destination(s) listed below.',
    '',
    ...message.rcptTo.map((r) => `<${r}>: delivered to mailbox`),
    '',
    `--${boundary}`,
    'Content-Description: Delivery report',
    'Content-Type: message/delivery-status',
    '',
    `Reporting-MTA: dns; ${SINK_HOSTNAME}`,
    `Arrival-Date: ${arrival}`,
    '',
    groups,
    `--${boundary}`,
    'Content-Description: Message Headers',
    'Content-Type: text/rfc822-headers',
    '',
    originalHeaders(message.raw),
    `--${boundary}--`,
    '',
  ].join('\r\n');
}

function feedbackReport(message: SinkMessage, rcpt: string, remoteAddress: string): string {
  const boundary = `arf-${randomBytes(8).toString('hex')}`;
  const arrival = rfc5322Date(new Date(message.receivedAt));
  const sourceIp = remoteAddress.replace(/^::ffff:/, '');
  return [
    `From: Mailbox Simulator Feedback Loop <fbl@${SINK_HOSTNAME}>`,
    `To: <${message.mailFrom}>`,
    'Subject: Abuse report: a recipient marked your message as spam',
    `Date: ${rfc5322Date(new Date())}`,
    `Message-ID: <${randomBytes(12).toString('hex')}@${SINK_HOSTNAME}>`,
    'Auto-Submitted: auto-replied',
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=feedback-report; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=us-ascii',
    '',
    `This is an email abuse report for an email message received from IP ${sourceIp} on ${arrival}.`,
    `The mailfleet mailbox simulator's recipient <${rcpt}> marked it as spam.`,
    '',
    `--${boundary}`,
    'Content-Type: message/feedback-report',
    '',
    'Feedback-Type: abuse',
    'User-Agent: mailfleet-mailbox-simulator/1.0',
    'Version: 1',
    `Original-Mail-From: <${message.mailFrom}>`,
    `Original-Rcpt-To: <${rcpt}>`,
    `Arrival-Date: ${arrival}`,
    `Reporting-MTA: dns; ${SINK_HOSTNAME}`,
    `Source-IP: ${sourceIp}`,
    '',
    `--${boundary}`,
    'Content-Type: text/rfc822-headers',
    '',
    originalHeaders(message.raw),
    `--${boundary}--`,
    '',
  ].join('\r\n');
}

/** The header section of a message, CRLF line ends, without the empty line that ends it. */
function originalHeaders(raw: Buffer): string {
  const text = raw.subarray(0, 64 * 1024).toString('utf8');
  const end = /\r?\n\r?\n/.exec(text);
  return (end ? text.slice(0, end.index) : text).replace(/\r?\n/g, '\r\n') + '\r\n';
}

function rfc5322Date(date: Date): string {
  return date.toUTCString().replace(/GMT$/, '+0000');
}

// ---------------------------------------------------------------------------
// A minimal SMTP client: the sink's own package has no SMTP client library,
// and a report needs nothing but EHLO, MAIL FROM:<>, RCPT, DATA.

class SmtpReplyError extends Error {
  constructor(
    readonly code: number,
    reply: string,
    step: string,
  ) {
    super(`${step}: ${reply}`);
  }
}

async function sendBySmtp(opts: {
  host: string;
  port: number;
  to: string;
  data: string;
  timeoutMs: number;
  signal: AbortSignal;
}): Promise<string> {
  const socket = net.connect({ host: opts.host, port: opts.port });
  const replies: Array<{ code: number; text: string }> = [];
  const waiting: Array<{ resolve: (r: { code: number; text: string }) => void; reject: (e: Error) => void }> = [];
  let buffer = '';
  let lines: string[] = [];
  let failure: Error | undefined;
  const fail = (error: Error): void => {
    failure ??= error;
    for (const w of waiting.splice(0)) w.reject(failure);
    socket.destroy();
  };
  socket.setTimeout(opts.timeoutMs, () => fail(new Error(`no answer from ${opts.host}:${opts.port} within ${opts.timeoutMs} ms`)));
  const onAbort = (): void => fail(new Error('smtp sink closing'));
  opts.signal.addEventListener('abort', onAbort, { once: true });
  socket.on('error', (error) => fail(error));
  socket.on('close', () => fail(new Error('connection closed')));
  socket.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('utf8');
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl).replace(/\r$/, '');
      buffer = buffer.slice(nl + 1);
      lines.push(line);
      // The last line of a reply is `NNN text` or `NNN` (continuation lines are `NNN-text`).
      if (/^\d{3}(?: |$)/.test(line)) {
        const reply = { code: Number(line.slice(0, 3)), text: lines.join('\n') };
        lines = [];
        const w = waiting.shift();
        if (w) w.resolve(reply);
        else replies.push(reply);
      }
    }
  });
  const next = (): Promise<{ code: number; text: string }> => {
    const queued = replies.shift();
    if (queued) return Promise.resolve(queued);
    if (failure) return Promise.reject(failure);
    return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  };
  const expect = async (step: string, ok: (code: number) => boolean): Promise<string> => {
    const reply = await next();
    if (!ok(reply.code)) throw new SmtpReplyError(reply.code, reply.text, step);
    return reply.text;
  };
  const is2xx = (code: number): boolean => code >= 200 && code < 300;
  const command = (line: string): void => void socket.write(`${line}\r\n`);

  try {
    if (opts.signal.aborted) throw new Error('smtp sink closing');
    await expect('greeting', (c) => c === 220);
    command(`EHLO ${SINK_HOSTNAME}`);
    const ehlo = await next();
    if (!is2xx(ehlo.code)) {
      command(`HELO ${SINK_HOSTNAME}`);
      await expect('HELO', is2xx);
    }
    command('MAIL FROM:<>');
    await expect('MAIL FROM', is2xx);
    command(`RCPT TO:<${opts.to}>`);
    await expect('RCPT TO', is2xx);
    command('DATA');
    await expect('DATA', (c) => c === 354);
    const body = opts.data.replace(/\r?\n/g, '\r\n').replace(/^\./gm, '..');
    socket.write(`${body}${body.endsWith('\r\n') ? '' : '\r\n'}.\r\n`);
    const final = await expect('end of data', is2xx);
    command('QUIT');
    return final;
  } finally {
    opts.signal.removeEventListener('abort', onAbort);
    socket.end();
    socket.setTimeout(0);
    // Once QUIT is sent or something failed, the answer does not matter.
    setTimeout(() => socket.destroy(), 1000).unref();
  }
}
