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
  const poolOptions: SMTPPool.Options = {
    pool: true,
    host: u.hostname,
    port: Number(u.port || (secure ? 465 : 25)),
    secure,
    ...(u.username ? { auth: { user: decodeURIComponent(u.username), pass: decodeURIComponent(u.password) } } : {}),
    maxConnections: opts.poolSize,
    maxMessages: 1000,
    connectionTimeout: opts.timeoutMs,
    greetingTimeout: opts.timeoutMs,
    socketTimeout: opts.timeoutMs,
    name: process.env['HOSTNAME'] || 'mailfleet',
    logger: false,
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
