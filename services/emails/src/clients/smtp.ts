import net from 'node:net';
import tls from 'node:tls';
import nodemailer from 'nodemailer';
import type SMTPPool from 'nodemailer/lib/smtp-pool/index.js';
import type { Logger } from '@mailfleet/kit';
import { resultOfError, resultOfSuccess, type AttemptResult, type SmtpErrorLike } from '../domain/delivery.js';

export interface RelayMessage {
  /** MAIL FROM: the email's VERP bounce address. */
  readonly envelopeFrom: string;
  readonly recipients: readonly string[];
  /** The signed message. */
  readonly raw: Buffer;
  /** ENVID of the DSN request (the email id), echoed in delivery status notifications. */
  readonly envelopeId: string;
}

export interface SmtpRelay {
  send(message: RelayMessage): Promise<AttemptResult>;
  close(): void;
}

/**
 * nodemailer's pooled SMTP transport to SMTP_URL. Connect, greeting and
 * socket-inactivity timeouts bound every attempt (an attempt always ends
 * well within the queue lease). Delivery status notifications are requested
 * for success, failure and delay where the relay supports DSN (RFC 3461), so
 * reports come back to the VERP address and tell what happened downstream.
 */
export function createSmtpRelay(opts: { url: string; poolSize: number; timeoutMs: number; logger: Logger }): SmtpRelay {
  const u = new URL(opts.url);
  const secure = u.protocol === 'smtps:';
  const host = u.hostname;
  const port = Number(u.port || (secure ? 465 : 25));
  const poolOptions: SMTPPool.Options = {
    pool: true,
    host,
    port,
    secure,
    ...(u.username ? { auth: { user: decodeURIComponent(u.username), pass: decodeURIComponent(u.password) } } : {}),
    maxConnections: opts.poolSize,
    maxMessages: 1000,
    connectionTimeout: opts.timeoutMs,
    greetingTimeout: opts.timeoutMs,
    socketTimeout: opts.timeoutMs,
    name: process.env['HOSTNAME'] || 'mailfleet',
    logger: false,
    getSocket: (_options, callback) => {
      // nodemailer writes a message in several pieces with Nagle on, so the last piece waits for the
      // relay's delayed ACK (40 ms on Linux): each pooled connection would carry at most ~25 mails/s.
      const socket = secure
        ? tls.connect({ host, port, ...(net.isIP(host) ? {} : { servername: host }) })
        : net.connect({ host, port });
      socket.setNoDelay(true);
      // The connect happens here, not in nodemailer, so its connectionTimeout is ours to keep.
      const timer = setTimeout(() => socket.destroy(new Error(`SMTP connect to ${host}:${port} timed out after ${opts.timeoutMs} ms`)), opts.timeoutMs);
      const failed = (error: Error) => {
        clearTimeout(timer);
        callback(error, undefined);
      };
      socket.once('error', failed);
      socket.once(secure ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        socket.off('error', failed);
        callback(null, { connection: socket, ...(secure ? { secured: true } : {}) });
      });
    },
  };
  const transport = nodemailer.createTransport(poolOptions);

  return {
    async send(message) {
      try {
        const mail: SMTPPool.MailOptions = {
          envelope: { from: message.envelopeFrom, to: [...message.recipients] },
          raw: message.raw,
          dsn: { envid: message.envelopeId, ret: 'HDRS', notify: ['SUCCESS', 'FAILURE', 'DELAY'] },
        };
        const info = await transport.sendMail(mail);
        return resultOfSuccess(info as unknown as { accepted?: unknown[]; rejectedErrors?: SmtpErrorLike[]; response?: string });
      } catch (err) {
        return resultOfError(err as SmtpErrorLike);
      }
    },
    close() {
      transport.close();
    },
  };
}
