import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import {
  SMTPServer,
  type SMTPServerAddress,
  type SMTPServerDataStream,
  type SMTPServerSession,
} from 'smtp-server';
import { coalesceWrites, SmtpConnection, SmtpConnectionError, SmtpReplyError } from '@mailfleet/kit/smtp-client';
import { LOOPBACK } from './net.js';

/** A message's envelope: the header line of its record in a log segment, or the `<id>.json` sidecar of an `<id>.eml`. */
export interface SinkEnvelope {
  /** MAIL FROM address; '' for the null sender `<>` (bounces). */
  mailFrom: string;
  rcptTo: string[];
  /** ISO 8601. */
  receivedAt: string;
}

export interface SinkMessage extends SinkEnvelope {
  /** `<ms timestamp>-<12 hex>`: ids sort by arrival. */
  id: string;
  /** The file that holds the message: a log segment (`*.sinklog`), or its own `<id>.eml` (layout 'files'). */
  file: string;
  /** Where the message's bytes start in `file` (0 for an `.eml`). */
  offset: number;
  /** The message exactly as the client sent it in DATA. */
  raw: Buffer;
}

/**
 * How a sink stores messages. 'log' (the default): appended to log segments, one write per message
 * and no file created per message, so the disk is not what limits the accept rate. 'files': each
 * message as `<id>.eml` plus an `<id>.json` envelope (two files and a rename per message).
 */
export type SinkLayout = 'log' | 'files';

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
  /**
   * SMTP connections to the report target, each kept open and reused report after report; default 32.
   * A connection carries two reports at a time: the second's commands leave with the first's message when
   * the target pipelines, else it waits its turn. That is how many the listener can apply together:
   * the emails service group-commits the reports that arrive at once, and with a few connections its
   * commits held a few reports each, the reports fell behind the mail (24 s behind after 1,900 mails in
   * the drill) and outlived the send lease they must beat to stop a resend after a crash.
   */
  reportConnections?: number;
  /**
   * Accepted messages whose reports are not yet handed over (or given up). At this many, the sink
   * holds back its answer to the next DATA until one is done: memory stays bounded and the sender
   * slows to what the report target takes. Default 20,000.
   */
  maxPendingReports?: number;
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
  /** Default 'log'. Either way `listSinkMessages(dir)` / `createSinkReader(dir)` read the directory. */
  layout?: SinkLayout;
  /** A log segment is closed and the next one started past this size; default 64 MiB. */
  segmentBytes?: number;
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
  /** Stops listening and closes the log segment; reports not yet handed over are dropped. */
  close(): Promise<void>;
}

/** The host name the sink gives itself in greetings and reports. */
const SINK_HOSTNAME = 'mailbox-simulator.mailfleet.local';
type Rule = 'bounce' | 'softbounce' | 'complaint';

/**
 * A local SMTP relay that accepts mail and keeps it with its envelope in `dir`
 * (see SinkLayout; read it with listSinkMessages). No TLS, AUTH optional
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
  const store = (opts.layout ?? 'log') === 'files' ? createFileStore(dir) : createLogStore(dir, opts.segmentBytes ?? 64 * 1024 * 1024);
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
        const envelope: SinkEnvelope = {
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          receivedAt: new Date().toISOString(),
        };
        let message: SinkMessage;
        try {
          message = store.put(Buffer.concat(chunks), envelope);
        } catch (error) {
          callback(error as Error);
          return;
        }
        for (const listener of listeners) {
          try {
            listener(message);
          } catch {
            // A listener's failure is its own; the message is stored.
          }
        }
        const reply = `2.0.0 Ok: queued as ${message.id}`;
        // Only when the simulator's report queue is full does the answer wait (for room in it).
        const full = simulator?.accepted(message, session.remoteAddress);
        if (full) void full.then(() => callback(null, reply));
        else callback(null, reply);
      });
    },
  });
  // A client that drops the connection is not our failure; keep serving.
  server.on('error', () => undefined);
  // The replies to a client's pipelined MAIL, RCPT and DATA leave in one write.
  server.server.on('connection', coalesceWrites);

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
  let closing: Promise<void> | undefined;

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
    close() {
      closing ??= (async () => {
        simulator?.close();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        store.close();
      })();
      return closing;
    },
  };
}

interface MessageStore {
  /** Stores the message; once it returns the message survives a kill -9 of this process. */
  put(raw: Buffer, envelope: SinkEnvelope): SinkMessage;
  close(): void;
}

/** `<ms timestamp>-<12 hex>`: a random part per store (sinks may share a directory, one after the other), then a sequence number. */
function createIds(): () => string {
  const instance = randomBytes(3).toString('hex');
  let seq = 0;
  return () => {
    seq += 1;
    return `${Date.now()}-${instance}${seq.toString(16).padStart(6, '0')}`;
  };
}

const SEGMENT_SUFFIX = '.sinklog';

/**
 * Layout 'log': messages appended to `<dir>/<ms timestamp>-<random>.sinklog` segments, each as one
 * record: a line of JSON (the envelope, the id and `bytes`, the size of the message), then the
 * message's bytes exactly as received, then `\n`. A record is written with one synchronous writev
 * before the sender gets its 250: once that returns, the record is in the kernel's page cache, which
 * survives a kill -9 of the sink (there is no fsync: a sink is not a durable mail store). A reader
 * takes only whole records, so a record being written is seen on the next read.
 *
 * Why not a file per message: creating a file costs a journalled metadata update, which on this
 * kind of disk costs more than everything else the sink does for a message.
 */
function createLogStore(dir: string, segmentBytes: number): MessageStore {
  const nextId = createIds();
  let fd: number | undefined;
  let file = '';
  let size = 0;
  const closeSegment = (): void => {
    const open = fd;
    fd = undefined;
    if (open !== undefined) fs.closeSync(open);
  };
  return {
    put(raw, envelope) {
      const id = nextId();
      if (fd === undefined || size >= segmentBytes) {
        closeSegment();
        file = path.join(dir, `${id}${SEGMENT_SUFFIX}`);
        fd = fs.openSync(file, 'a');
        size = 0;
      }
      const header = Buffer.from(`${JSON.stringify({ id, ...envelope, bytes: raw.length })}\n`);
      const parts = [header, raw, NEWLINE];
      const total = header.length + raw.length + 1;
      let written = 0;
      try {
        while (written < total) {
          // A short write is rare (a full disk); finish the record or fail before the 250.
          written += fs.writevSync(fd, written === 0 ? parts : [Buffer.concat(parts).subarray(written)]);
        }
      } catch (error) {
        // The segment may now end in part of a record, which readers never get past: later records go to a new one.
        closeSegment();
        throw error;
      }
      const offset = size + header.length;
      size += total;
      return { id, file, offset, raw, ...envelope };
    },
    close: closeSegment,
  };
}

const NEWLINE = Buffer.from('\n');

/**
 * Layout 'files': each message as `<id>.eml` plus its `<id>.json` envelope, the `.json` last and
 * atomically (temp file, rename), so a message is listed only once complete. Synchronous for the
 * same reason as the log: the answer to DATA waits for the writes anyway.
 */
function createFileStore(dir: string): MessageStore {
  const nextId = createIds();
  return {
    put(raw, envelope) {
      const id = nextId();
      const file = path.join(dir, `${id}.eml`);
      const jsonPath = path.join(dir, `${id}.json`);
      fs.writeFileSync(file, raw);
      fs.writeFileSync(`${jsonPath}.tmp`, `${JSON.stringify(envelope, null, 2)}\n`);
      fs.renameSync(`${jsonPath}.tmp`, jsonPath);
      return { id, file, offset: 0, raw, ...envelope };
    },
    close: () => undefined,
  };
}

export interface SinkReader {
  /** The messages complete since the previous call (every one on the first), oldest first. */
  read(): Promise<SinkMessage[]>;
}

/**
 * Follows a sink directory, of either layout, from any process (the e2e tests and the bench read
 * the platform's sink): each call returns only what is new, reading each segment from where the
 * previous call stopped.
 */
export function createSinkReader(dir: string, opts: { withRaw?: boolean } = {}): SinkReader {
  const withRaw = opts.withRaw ?? true;
  /** segment -> bytes consumed (whole records). */
  const consumed = new Map<string, number>();
  /** `.json` sidecars already returned. */
  const seen = new Set<string>();
  // Calls take turns: two reads at once would both return what is new.
  let turn: Promise<unknown> = Promise.resolve();
  return {
    read() {
      const result = turn.then(readNew, readNew);
      turn = result.catch(() => undefined);
      return result;
    },
  };

  async function readNew(): Promise<SinkMessage[]> {
    let names: string[];
    try {
      names = await fsp.readdir(dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const fresh: SinkMessage[] = [];
    // Applied only once everything was read: a read that fails returns nothing and loses nothing.
    const ends = new Map<string, number>();
    const sidecars: string[] = [];
    for (const name of names.filter((n) => n.endsWith(SEGMENT_SUFFIX)).sort()) {
      const file = path.join(dir, name);
      const from = consumed.get(name) ?? 0;
      const { records, end } = await readRecords(file, from, withRaw);
      ends.set(name, end);
      fresh.push(...records);
    }
    for (const name of names.filter((n) => n.endsWith('.json') && !seen.has(n)).sort()) {
      const id = name.slice(0, -'.json'.length);
      const file = path.join(dir, `${id}.eml`);
      const [meta, raw] = await Promise.all([fsp.readFile(path.join(dir, name), 'utf8'), withRaw ? fsp.readFile(file) : Buffer.alloc(0)]);
      const envelope = JSON.parse(meta) as SinkEnvelope;
      sidecars.push(name);
      fresh.push({ id, file, offset: 0, raw, mailFrom: envelope.mailFrom, rcptTo: envelope.rcptTo, receivedAt: envelope.receivedAt });
    }
    for (const [name, end] of ends) consumed.set(name, end);
    for (const name of sidecars) seen.add(name);
    return fresh.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }
}

/** The whole records of a segment from byte `from` on, and where the last whole one ends. */
async function readRecords(file: string, from: number, withRaw: boolean): Promise<{ records: SinkMessage[]; end: number }> {
  let data: Buffer;
  const handle = await fsp.open(file, 'r');
  try {
    const { size } = await handle.stat();
    data = Buffer.alloc(Math.max(0, size - from));
    let got = 0;
    while (got < data.length) {
      const { bytesRead } = await handle.read(data, got, data.length - got, from + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    data = data.subarray(0, got);
  } finally {
    await handle.close();
  }
  const records: SinkMessage[] = [];
  let pos = 0;
  for (;;) {
    const nl = data.indexOf(0x0a, pos);
    if (nl < 0) break;
    const header = JSON.parse(data.subarray(pos, nl).toString('utf8')) as SinkEnvelope & { id: string; bytes: number };
    const start = nl + 1;
    const stop = start + header.bytes;
    if (stop + 1 > data.length) break;
    records.push({
      id: header.id,
      file,
      offset: from + start,
      raw: withRaw ? Buffer.from(data.subarray(start, stop)) : Buffer.alloc(0),
      mailFrom: header.mailFrom,
      rcptTo: header.rcptTo,
      receivedAt: header.receivedAt,
    });
    pos = stop + 1;
  }
  return { records, end: from + pos };
}

/** Every message in a sink directory (either layout), oldest first. */
export async function listSinkMessages(dir: string): Promise<SinkMessage[]> {
  return createSinkReader(dir).read();
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
  /**
   * Queues the message's reports. Returns a promise only when the queue is full: the answer to the
   * sender should wait for it.
   */
  accepted(message: SinkMessage, remoteAddress: string): Promise<void> | undefined;
  close(): void;
}

/** What a report needs of the original message (not the whole message: the queue stays small). */
interface ReportedMessage {
  mailFrom: string;
  rcptTo: string[];
  receivedAt: string;
  /** The original header section, CRLF line ends. */
  headers: string;
}

interface PendingReport {
  kind: 'dsn' | 'arf';
  recipients: string[];
  build: () => string;
  /** Built at the first attempt, then kept for the retries. */
  data?: string;
  attempts: number;
}

/** The reports of one accepted message, sent in order (the DSN before any complaint) to its sender. */
interface ReportJob {
  dueAt: number;
  to: string;
  reports: PendingReport[];
  /** Index of the first report not yet sent or given up. */
  next: number;
}

function createMailboxSimulator(opts: MailboxSimulatorOptions, emit: (event: SimulatorEvent) => void): MailboxSimulator {
  const target = opts.reportTarget ? parseHostPort(opts.reportTarget) : undefined;
  const reportDelayMs = opts.reportDelayMs ?? 100;
  const retryDelays = opts.reportRetryDelaysMs ?? [500, 2000, 5000];
  const softBounceWindowMs = opts.softBounceWindowMs ?? 10 * 60_000;
  const reportTimeoutMs = opts.reportTimeoutMs ?? 10_000;
  const connections = Math.max(1, opts.reportConnections ?? 32);
  const maxPending = Math.max(1, opts.maxPendingReports ?? 20_000);
  /** (sender, recipient) -> when its first attempt was deferred. */
  const deferred = new Map<string, number>();
  const abort = new AbortController();

  const refuse = (code: number, text: string): Error => Object.assign(new Error(text), { responseCode: code });

  // The queue: jobs in acceptance order (so in due order: every job waits the same reportDelayMs),
  // and jobs whose retry wait is over, which go first.
  let queue: Array<ReportJob | undefined> = [];
  let head = 0;
  const retries: ReportJob[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let wake: NodeJS.Timeout | undefined;
  /** Jobs accepted and not finished (queued, in flight, or waiting for a retry). */
  let pending = 0;
  const waitingForRoom: Array<() => void> = [];
  /** The connections, kept open between reports (each opening or open); two slots share each. */
  const links: Array<Promise<SmtpConnection> | undefined> = Array.from({ length: connections }, () => undefined);
  const everyLink = (use: (connection: SmtpConnection) => void): void => {
    for (const link of links) void link?.then(use, () => undefined);
  };
  // Closing: whatever a connection is waiting for will not come.
  abort.signal.addEventListener('abort', () => everyLink((connection) => connection.destroy()), { once: true });
  const open = async (): Promise<SmtpConnection> => {
    if (!target) throw new Error('no report target');
    if (abort.signal.aborted) throw new Error('smtp sink closing');
    const connection = await SmtpConnection.open({ ...target, secure: false, timeoutMs: reportTimeoutMs, name: SINK_HOSTNAME });
    if (abort.signal.aborted) connection.destroy();
    return connection;
  };
  // One report, from the null sender: the listener's final reply.
  const hand = async (connection: SmtpConnection, to: string, data: string): Promise<string> =>
    (await connection.transaction({ envelopeFrom: '', recipients: [to], raw: Buffer.from(data) })).response;
  /** Slots (a report each at a time) not at work; slot `s` sends on connection `s >> 1`. */
  const idle = Array.from({ length: 2 * connections }, (_, i) => i);

  /**
   * The slot's connection, opened when there is none or when the one there is unusable or is `stale` (it failed
   * the slot); `reused` when it was there before. The two slots of a connection open it once between them.
   */
  const connectionOf = async (slot: number, stale?: SmtpConnection): Promise<{ connection: SmtpConnection; reused: boolean }> => {
    const index = slot >> 1;
    const link = links[index];
    if (link) {
      const connection = await link.catch(() => undefined);
      if (links[index] !== link) return connectionOf(slot, stale);
      if (connection && connection !== stale && connection.usable) return { connection, reused: true };
      connection?.close();
    }
    const opening = open();
    links[index] = opening;
    try {
      return { connection: await opening, reused: false };
    } catch (error) {
      if (links[index] === opening) links[index] = undefined;
      throw error;
    }
  };

  const takeDue = (): ReportJob | undefined => {
    const retry = retries.shift();
    if (retry) return retry;
    const job = queue[head];
    if (!job) return undefined;
    const wait = job.dueAt - Date.now();
    if (wait > 0) {
      wake ??= setTimeout(() => {
        wake = undefined;
        pump();
      }, wait);
      return undefined;
    }
    queue[head] = undefined;
    head += 1;
    if (head === queue.length) {
      queue = [];
      head = 0;
    } else if (head >= 4096 && head * 2 >= queue.length) {
      queue = queue.slice(head);
      head = 0;
    }
    return job;
  };

  const finished = (): void => {
    pending -= 1;
    while (pending <= maxPending && waitingForRoom.length > 0) waitingForRoom.shift()?.();
  };

  /** Sends on the slot's connection; a reused one the listener has dropped meanwhile is replaced once. */
  const sendOn = async (slot: number, to: string, data: string): Promise<string> => {
    const { connection, reused } = await connectionOf(slot);
    try {
      return await hand(connection, to, data);
    } catch (error) {
      if (!reused || !(error instanceof SmtpConnectionError) || abort.signal.aborted) throw error;
      return await hand((await connectionOf(slot, connection)).connection, to, data);
    }
  };

  /** Sends the job's remaining reports; false when it waits for a retry. */
  const runJob = async (slot: number, job: ReportJob): Promise<boolean> => {
    for (; job.next < job.reports.length; job.next += 1) {
      const report = job.reports[job.next] as PendingReport;
      if (abort.signal.aborted) return true;
      report.attempts += 1;
      const { kind, recipients, attempts } = report;
      try {
        const reply = await sendOn(slot, job.to, (report.data ??= report.build()));
        emit({ type: 'report-sent', kind, to: job.to, recipients, attempts, reply });
      } catch (error) {
        const permanent = error instanceof SmtpReplyError && error.responseCode >= 500;
        const wait = retryDelays[attempts - 1];
        if (abort.signal.aborted || permanent || wait === undefined) {
          emit({ type: 'report-failed', kind, to: job.to, recipients, attempts, error: (error as Error).message });
          continue;
        }
        const timer = setTimeout(() => {
          timers.delete(timer);
          retries.push(job);
          pump();
        }, wait);
        timers.add(timer);
        return false;
      }
    }
    return true;
  };

  const work = async (slot: number, first: ReportJob): Promise<void> => {
    for (let job: ReportJob | undefined = first; job && !abort.signal.aborted; job = takeDue()) {
      if (await runJob(slot, job)) finished();
    }
    idle.push(slot);
  };

  function pump(): void {
    while (!abort.signal.aborted && idle.length > 0) {
      const job = takeDue();
      if (!job) return;
      const slot = idle.pop() as number;
      void work(slot, job);
    }
  }

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
      if (!target || abort.signal.aborted || message.mailFrom === '' || message.rcptTo.length === 0) return undefined;
      const reported: ReportedMessage = {
        mailFrom: message.mailFrom,
        rcptTo: message.rcptTo,
        receivedAt: message.receivedAt,
        headers: originalHeaders(message.raw),
      };
      // Every accepted recipient had the message delivered (complaint ones too: one complains about mail it got).
      const reports: PendingReport[] = [
        { kind: 'dsn', recipients: message.rcptTo, build: () => deliveryReport(reported), attempts: 0 },
        ...message.rcptTo
          .filter((r) => simulatorRule(r) === 'complaint')
          .map((rcpt): PendingReport => ({ kind: 'arf', recipients: [rcpt], build: () => feedbackReport(reported, rcpt, remoteAddress), attempts: 0 })),
      ];
      queue.push({ dueAt: Date.now() + reportDelayMs, to: message.mailFrom, reports, next: 0 });
      pending += 1;
      pump();
      return pending > maxPending ? new Promise<void>((resolve) => waitingForRoom.push(resolve)) : undefined;
    },

    close() {
      abort.abort();
      if (wake) clearTimeout(wake);
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      everyLink((connection) => connection.close());
      // Whoever waits for room gets an answer: their messages are stored.
      for (const resolve of waitingForRoom.splice(0)) resolve();
    },
  };
}

// ---------------------------------------------------------------------------
// The reports, as a receiving MTA writes them (RFC 3464 and RFC 5965).

function deliveryReport(message: ReportedMessage): string {
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
    message.headers,
    `--${boundary}--`,
    '',
  ].join('\r\n');
}

function feedbackReport(message: ReportedMessage, rcpt: string, remoteAddress: string): string {
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
    message.headers,
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
