import { setTimeout as sleep } from 'node:timers/promises';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import type { Logger } from '@mailfleet/kit';
import { coalesceWrites } from '@mailfleet/kit/smtp-client';
import { parseVerpAddress } from '../domain/verp.js';
import { parseReport, type InboundReport } from './reports.js';

export interface InboundServerOptions {
  port: number;
  /** Default 0.0.0.0 (like GRPC_HOST): MTAs of the cluster or the internet deliver here. */
  host?: string;
  bounceDomain: string;
  /** The same secret as for verpAddress. */
  secret: string;
  logger: Logger;
  /** Default 10 MB. */
  maxMessageBytes?: number;
  /** How long close() waits for reports being received or handled; default 10 s. */
  closeTimeoutMs?: number;
  /**
   * Called once per signed bounce address the message was sent to. Must be
   * idempotent: a throw answers 451 and the reporting MTA sends the whole
   * message again, and MTAs do repeat reports.
   */
  onReport: (emailId: string, report: InboundReport, raw: Buffer) => Promise<void>;
}

export interface InboundSmtpServer {
  port: number;
  close(): Promise<void>;
}

const DEFAULT_MAX_BYTES = 10 * 1024 * 1024;

/** SMTP reply to a callback error: `responseCode` is the reply code, the message carries the enhanced status. */
function smtpError(code: number, message: string): Error & { responseCode: number } {
  return Object.assign(new Error(message), { responseCode: code });
}

/**
 * The bounce and feedback listener: an SMTP server that takes mail only for
 * signed VERP addresses on the bounce domain (so it is neither an open relay
 * nor a source of backscatter), reads each message as a DSN or ARF report and
 * hands it to `onReport`. Plaintext, no AUTH: it receives, it never relays.
 */
export async function startInboundSmtpServer(opts: InboundServerOptions): Promise<InboundSmtpServer> {
  if (opts.secret === '') throw new Error('inbound SMTP: the VERP secret is empty');
  if (opts.bounceDomain.trim() === '') throw new Error('inbound SMTP: the bounce domain is empty');
  const log = opts.logger;
  const maxBytes = opts.maxMessageBytes ?? DEFAULT_MAX_BYTES;
  const closeTimeoutMs = opts.closeTimeoutMs ?? 10_000;
  const inFlight = new Set<Promise<void>>();
  const emailIdOf = (address: string): string | undefined =>
    parseVerpAddress({ secret: opts.secret, address, bounceDomain: opts.bounceDomain });
  /** The email id RCPT TO verified, by the envelope's address object: the message needs it again (an HMAC each). */
  const verified = new WeakMap<object, string>();

  const handleMessage = async (raw: Buffer, session: SMTPServerSession): Promise<string> => {
    const emailIds = [...new Set(session.envelope.rcptTo.map((r) => verified.get(r) ?? emailIdOf(r.address)).filter((id): id is string => id !== undefined))];
    const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
    const report = await parseReport(raw);
    if (!report) {
      // Answering 4xx would make the MTA resend something we will never read, for days.
      log.warn({ emailIds, mailFrom, bytes: raw.length, remoteAddress: session.remoteAddress }, 'inbound message is not a report this listener can read; dropped');
      return '2.6.0 Message accepted but not understood as a delivery or feedback report';
    }
    for (const emailId of emailIds) {
      try {
        await opts.onReport(emailId, report, raw);
      } catch (error) {
        log.error({ err: error, emailId, kind: report.kind }, 'inbound report not recorded; asking the sender to retry');
        throw smtpError(451, '4.3.0 Report not processed, try again later');
      }
    }
    log.info(
      { emailIds, kind: report.kind, ...(report.kind === 'dsn' ? { actions: report.recipients.map((r) => r.action) } : { feedbackType: report.feedbackType }) },
      'inbound report received',
    );
    return '2.6.0 Report accepted';
  };

  const server = new SMTPServer({
    name: opts.bounceDomain,
    banner: 'mailfleet bounce and feedback listener',
    secure: false,
    // No certificate is configured: plaintext on loopback or inside the cluster, and nothing to log in to.
    disabledCommands: ['STARTTLS', 'AUTH'],
    authOptional: true,
    // Our replies carry their own enhanced status codes.
    hideENHANCEDSTATUSCODES: true,
    disableReverseLookup: true,
    size: maxBytes,
    logger: false,
    closeTimeout: closeTimeoutMs,
    onMailFrom(_address, _session, callback) {
      // Any sender, including the null sender `<>` that DSNs come from.
      callback();
    },
    onRcptTo(address, session, callback) {
      const emailId = emailIdOf(address.address);
      if (emailId === undefined) {
        log.debug({ rcptTo: address.address, remoteAddress: session.remoteAddress }, 'inbound RCPT refused: not a signed bounce address');
        callback(smtpError(550, `5.1.1 <${address.address}>: Recipient address rejected: not a bounce address of this server`));
        return;
      }
      verified.set(address, emailId);
      callback();
    },
    onData(stream: SMTPServerDataStream, session: SMTPServerSession, callback) {
      const chunks: Buffer[] = [];
      let bytes = 0;
      let settle!: () => void;
      const done = new Promise<void>((resolve) => (settle = resolve));
      inFlight.add(done);
      let finished = false;
      const finish = (error: Error | null, message?: string): void => {
        // A stream error may be followed by its end: answer once.
        if (finished) return;
        finished = true;
        inFlight.delete(done);
        settle();
        if (error) callback(error);
        else callback(null, message);
      };
      stream.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes <= maxBytes) chunks.push(chunk);
      });
      stream.once('error', (error) => finish(error));
      stream.once('end', () => {
        if (stream.sizeExceeded || bytes > maxBytes) {
          finish(smtpError(552, `5.3.4 Message exceeds the maximum size of ${maxBytes} bytes`));
          return;
        }
        handleMessage(Buffer.concat(chunks), session).then(
          (message) => finish(null, message),
          (error: Error) => finish(error),
        );
      });
    },
  });
  // A client that drops its connection is not a failure of this server.
  server.on('error', (error) => log.debug({ err: error }, 'inbound SMTP connection error'));
  // The replies to a sender's pipelined MAIL, RCPT and DATA leave in one write.
  server.server.on('connection', coalesceWrites);

  await new Promise<void>((resolve, reject) => {
    const onError = (error: Error): void => reject(error);
    server.server.once('error', onError);
    server.listen(opts.port, opts.host ?? '0.0.0.0', () => {
      server.server.off('error', onError);
      resolve();
    });
  });
  const address = server.server.address();
  if (address === null || typeof address === 'string') throw new Error('inbound SMTP: unexpected listen address');
  log.info({ port: address.port, bounceDomain: opts.bounceDomain }, 'inbound SMTP listening');

  let closing: Promise<void> | undefined;
  return {
    port: address.port,
    close() {
      closing ??= (async () => {
        // Stop accepting; the callback runs once every connection is gone.
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        // Let messages being received or handed to onReport finish, then end idle sessions at once.
        await Promise.race([Promise.allSettled([...inFlight]), sleep(closeTimeoutMs, undefined, { ref: false })]);
        for (const connection of server.connections) {
          connection.send(421, '4.3.2 Service shutting down, try again later');
          connection.close();
        }
        await closed;
      })();
      return closing;
    },
  };
}
