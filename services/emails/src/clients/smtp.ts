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
  /**
   * Connections kept open to the relay. Each carries one transaction at a time, or two with a relay that
   * pipelines once every connection is busy: the second's commands leave with the first's message.
   */
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
 * A pool of SMTP connections to SMTP_URL. Each send takes a free connection, opening it when there is none, or
 * shares a busy one with a relay that pipelines (see `poolSize`), or waits for one; a connection carries at most
 * `maxMessagesPerConnection` messages and is closed after `idleMs` unused. Delivery status notifications are
 * requested for success, failure and delay where the relay supports DSN (RFC 3461), so reports come back to the VERP
 * address and tell what happened downstream.
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

  /** Open connections: the transactions each carries or is about to (`load`), and all it was handed (`handed`). */
  const pool = new Map<SmtpConnection, { load: number; handed: number }>();
  let opening = 0;
  const waiters: Array<() => void> = [];
  let closed = false;

  const open = () => SmtpConnection.open({ host, port, secure, timeoutMs: opts.timeoutMs, name, auth, tls: opts.tls });

  function take(connection: SmtpConnection): SmtpConnection {
    clearTimeout(connection.idleTimer);
    const use = pool.get(connection) ?? { load: 0, handed: 0 };
    pool.set(connection, { load: use.load + 1, handed: use.handed + 1 });
    return connection;
  }

  /**
   * A connection for one transaction: an unused one, else a new one while there are fewer than the pool's size,
   * else one whose relay pipelines and that carries a single transaction (the next one's commands then leave
   * with that one's message); waits while there is none.
   */
  async function acquire(): Promise<SmtpConnection> {
    for (;;) {
      if (closed) throw new SmtpConnectionError('SMTP relay closed');
      let shared: SmtpConnection | undefined;
      for (const [connection, { load, handed }] of pool) {
        if (!connection.usable && load === 0) {
          // Closed by the relay while idle: it makes room for a new one.
          pool.delete(connection);
          clearTimeout(connection.idleTimer);
          connection.close();
          continue;
        }
        if (!connection.usable || handed >= maxMessages) continue;
        if (load === 0) return take(connection);
        if (load === 1 && connection.pipelining) shared ??= connection;
      }
      if (pool.size + opening < size) {
        opening += 1;
        try {
          const connection = await open();
          pool.set(connection, { load: 0, handed: 0 });
          return take(connection);
        } finally {
          opening -= 1;
          // A waiter may share the new connection, or take the room a failed open leaves.
          waiters.shift()?.();
        }
      }
      if (shared) return take(shared);
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  }

  function release(connection: SmtpConnection): void {
    const use = pool.get(connection) ?? { load: 1, handed: maxMessages };
    const load = use.load - 1;
    pool.set(connection, { load, handed: use.handed });
    if (load === 0) {
      if (closed || !connection.usable || use.handed >= maxMessages) {
        pool.delete(connection);
        connection.close();
      } else {
        connection.idleTimer = setTimeout(() => {
          if (pool.get(connection)?.load !== 0) return;
          pool.delete(connection);
          connection.close();
          waiters.shift()?.();
        }, idleMs);
        connection.idleTimer.unref();
      }
    }
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
      for (const [connection, { load }] of pool) {
        if (load > 0) continue;
        pool.delete(connection);
        connection.close();
      }
      for (const wake of waiters.splice(0)) wake();
    },
  };
}
