import os from 'node:os';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createSmtpSink, listSinkMessages, type SinkLayout, type SinkMessage } from '@mailfleet/deploy';
import { simpleParser, type ParsedMail } from 'mailparser';

export interface ReceivedMail {
  id: string;
  /** The file holding the message (a sink log segment, or its `.eml`) and where its bytes start. */
  file: string;
  offset: number;
  /** The SMTP envelope (MAIL FROM is '' for the null sender). */
  envelope: { mailFrom: string; rcptTo: string[] };
  receivedAt: string;
  raw: Buffer;
  parsed: ParsedMail;
}

export type MailPredicate = (mail: ReceivedMail) => boolean;

const parsedCache = new Map<string, Promise<ParsedMail>>();

async function toReceived(message: SinkMessage): Promise<ReceivedMail> {
  const key = `${message.file}:${message.offset}`;
  let parsed = parsedCache.get(key);
  if (!parsed) {
    parsed = simpleParser(message.raw);
    parsedCache.set(key, parsed);
  }
  return {
    id: message.id,
    file: message.file,
    offset: message.offset,
    envelope: { mailFrom: message.mailFrom, rcptTo: message.rcptTo },
    receivedAt: message.receivedAt,
    raw: message.raw,
    parsed: await parsed,
  };
}

/** Every message in a sink directory, parsed, oldest first (works on another process's sink, e.g. e2e mailDir). */
export async function readMailDir(dir: string): Promise<ReceivedMail[]> {
  return Promise.all((await listSinkMessages(dir)).map(toReceived));
}

/** Polls a sink directory until a message matches; the error lists what did arrive. */
export async function waitForMail(dir: string, predicate: MailPredicate, timeoutMs = 10_000): Promise<ReceivedMail> {
  const deadline = Date.now() + timeoutMs;
  let seen: ReceivedMail[] = [];
  for (;;) {
    seen = await readMailDir(dir);
    const match = seen.find(predicate);
    if (match) return match;
    if (Date.now() >= deadline) break;
    await sleep(100);
  }
  const summary = seen
    .map((m) => `  ${m.id} from=<${m.envelope.mailFrom}> to=${m.envelope.rcptTo.join(',')} subject=${JSON.stringify(m.parsed.subject)}`)
    .join('\n');
  throw new Error(`no matching message in ${dir} within ${timeoutMs} ms; ${seen.length} message(s) there${seen.length ? `:\n${summary}` : ''}`);
}

export interface SmtpPeer {
  /** `smtp://127.0.0.1:PORT` */
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  messages(): Promise<ReceivedMail[]>;
  waitForMessage(predicate?: MailPredicate, timeoutMs?: number): Promise<ReceivedMail>;
  /** Stops listening and removes the directory if this peer created it. */
  close(): Promise<void>;
}

/** The deploy SMTP sink on a free loopback port, storing into a temp dir, with parsed access for tests. */
export async function startSmtpPeer(opts: { port?: number; dir?: string; layout?: SinkLayout } = {}): Promise<SmtpPeer> {
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? (await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-smtp-')));
  const sink = await createSmtpSink({ port: opts.port ?? 0, host: '127.0.0.1', dir, ...(opts.layout ? { layout: opts.layout } : {}) });
  return {
    url: sink.url,
    port: sink.port,
    dir: sink.dir,
    messages: () => readMailDir(sink.dir),
    waitForMessage: (predicate = () => true, timeoutMs) => waitForMail(sink.dir, predicate, timeoutMs),
    async close() {
      await sink.close();
      if (ownDir) await fsp.rm(dir, { recursive: true, force: true });
    },
  };
}
