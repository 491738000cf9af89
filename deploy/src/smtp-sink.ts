import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
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

export interface SmtpSinkOptions {
  /** Default 2525; 0 picks a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Where messages are stored (created if missing). */
  dir: string;
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
  close(): Promise<void>;
}

/**
 * A local SMTP relay that accepts everything and keeps it: the raw message as
 * `<dir>/<id>.eml` and its envelope as `<dir>/<id>.json`. No TLS, AUTH optional
 * (any credentials pass), every recipient accepted.
 */
export async function createSmtpSink(opts: SmtpSinkOptions): Promise<SmtpSink> {
  const dir = path.resolve(opts.dir);
  await fsp.mkdir(dir, { recursive: true });
  const host = opts.host ?? LOOPBACK;
  const listeners = new Set<(message: SinkMessage) => void>();

  const server = new SMTPServer({
    name: 'mailfleet-smtp-sink',
    banner: 'mailfleet SMTP sink',
    secure: false,
    disabledCommands: ['STARTTLS'],
    authOptional: true,
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, callback) {
      callback(null, { user: auth.username ?? 'anonymous' });
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
            callback(null, `queued as ${message.id}`);
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
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
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
