import type tls from 'node:tls';
import { SmtpConnection, SmtpConnectionError, type Logger } from '@mailfleet/kit';
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

export interface SmtpRelayOptions {
  /** `smtp://[user:pass@]host[:port]` (STARTTLS when offered) or `smtps://` (implicit TLS). */
  readonly url: string;
  /** Connections kept open to the relay; each carries one transaction at a time. */
  readonly poolSize: number;
  /** Bounds the connect, the greeting and every wait for a reply. */
  readonly timeoutMs: number;
  readonly logger: Logger;
  /** Messages one connection carries before it is closed and replaced (default 1,000). */
  readonly maxMessagesPerConnection?: number;
  /** An idle connection is closed (QUIT) after this long (default 30 s). */
  readonly idleMs?: number;
  /** Extra TLS options (tests: a private CA). */
  readonly tls?: tls.ConnectionOptions;
}

/**
 * A pool of SMTP connections to SMTP_URL. Each send takes a free connection (or waits for one), opening it
 * when there is none; a connection carries at most `maxMessagesPerConnection` messages and is closed after
 * `idleMs` unused. Delivery status notifications are requested for success, failure and delay where the relay
 * supports DSN (RFC 3461), so reports come back to the VERP address and tell what happened downstream.
 *
 * A reused connection the relay dropped meanwhile fails before any byte of the message is written; that send
 * goes once more over a new connection. Once the message is written, a failure is reported (transient): the
 * send queue retries it later, as it would after a crash.
 */
export function createSmtpRelay(opts: SmtpRelayOptions): SmtpRelay {
  const u = new URL(opts.url);
  const secure = u.protocol === 'smtps:';
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = Number(u.port || (secure ? 465 : 25));
  const auth = u.username ? { user: decodeURIComponent(u.username), pass: decodeURIComponent(u.password) } : undefined;
  const name = process.env['HOSTNAME'] || 'mailfleet';
  const maxMessages = opts.maxMessagesPerConnection ?? 1_000;
  const idleMs = opts.idleMs ?? 30_000;
  const size = Math.max(1, opts.poolSize);

  const idle: SmtpConnection[] = [];
  let inUse = 0;
  const waiters: Array<() => void> = [];
  let closed = false;

  const open = () => SmtpConnection.open({ host, port, secure, timeoutMs: opts.timeoutMs, name, auth, tls: opts.tls });

  /** A usable idle connection, or a new one; waits while every connection is busy. */
  async function acquire(): Promise<SmtpConnection> {
    while (inUse >= size) await new Promise<void>((resolve) => waiters.push(resolve));
    inUse += 1;
    let connection: SmtpConnection | undefined;
    while ((connection = idle.pop()) !== undefined) {
      clearTimeout(connection.idleTimer);
      if (connection.usable) return connection;
    }
    try {
      return await open();
    } catch (error) {
      release(undefined);
      throw error;
    }
  }

  function release(connection: SmtpConnection | undefined): void {
    if (connection) {
      if (closed || !connection.usable || connection.messages >= maxMessages) connection.close();
      else {
        connection.idleTimer = setTimeout(() => {
          const i = idle.indexOf(connection);
          if (i >= 0) idle.splice(i, 1);
          connection.close();
        }, idleMs);
        connection.idleTimer.unref();
        idle.push(connection);
      }
    }
    inUse -= 1;
    waiters.shift()?.();
  }

  async function attempt(message: RelayMessage): Promise<AttemptResult> {
    const connection = await acquire();
    const reused = connection.messages > 0;
    let result: AttemptResult | undefined;
    try {
      result = resultOfSuccess(await connection.transaction(message));
    } catch (error) {
      // A reused connection the relay dropped meanwhile: nothing was sent on it, so the next one is tried.
      if (!(error instanceof SmtpConnectionError && error.beforeData && reused && !closed)) result = resultOfError(error as SmtpErrorLike);
    }
    release(connection);
    return result ?? attempt(message);
  }

  return {
    async send(message) {
      if (closed) return resultOfError({ message: 'SMTP relay closed' });
      try {
        return await attempt(message);
      } catch (error) {
        // No connection: whatever the relay answered while greeting or authenticating, the mail was not refused.
        opts.logger.debug({ err: error }, 'SMTP relay connection failed');
        return { kind: 'transient', message: error instanceof Error ? error.message : String(error) };
      }
    },
    close() {
      closed = true;
      for (const connection of idle.splice(0)) connection.close();
      for (const wake of waiters.splice(0)) wake();
    },
  };
}
