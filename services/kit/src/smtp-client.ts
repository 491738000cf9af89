import { isAscii } from 'node:buffer';
import net from 'node:net';
import tls from 'node:tls';
import { StringDecoder } from 'node:string_decoder';

/*
 * An SMTP client connection (RFC 5321) without dependencies: the emails service's relay pool and the
 * development SMTP sink's report sender both use it. Importable alone as `@mailfleet/kit/smtp-client`.
 */

/** A reply: its code and every line (continuation lines included). */
interface Reply {
  readonly code: number;
  readonly text: string;
}

const is2xx = (code: number): boolean => code >= 200 && code < 300;

/** A recipient the relay refused: its RCPT TO reply. */
export interface SmtpRecipientRefusal {
  readonly recipient: string;
  readonly responseCode: number;
  readonly response: string;
  readonly command: 'RCPT TO';
  readonly code: 'EENVELOPE';
}

/** What one transaction hands over: the envelope and the message (CRLF or LF line ends; stuffed here). */
export interface SmtpEnvelopeMessage {
  /** MAIL FROM; '' for the null sender of a report. */
  readonly envelopeFrom: string;
  readonly recipients: readonly string[];
  readonly raw: Buffer;
  /** Asks for delivery status notifications (RFC 3461: ENVID this, RET=HDRS, NOTIFY=SUCCESS,FAILURE,DELAY) where offered. */
  readonly envelopeId?: string | undefined;
}

/** The relay's answer to a whole transaction. */
export interface SmtpTransactionResult {
  readonly accepted: string[];
  readonly rejectedErrors: SmtpRecipientRefusal[];
  /** The final reply, after the message. */
  readonly response: string;
}

/**
 * A reply the transaction cannot go on from; its fields are those nodemailer's errors have (command,
 * responseCode, response, code, rejectedErrors), so callers written for nodemailer read it alike.
 */
export class SmtpReplyError extends Error {
  constructor(
    readonly command: string,
    readonly responseCode: number,
    readonly response: string,
    readonly code = 'EPROTOCOL',
    readonly rejectedErrors?: readonly SmtpRecipientRefusal[],
  ) {
    super(`${command}: ${response}`);
  }
}

/** The connection failed (or was never made); `beforeData` when no message byte had been written yet. */
export class SmtpConnectionError extends Error {
  readonly code = 'ECONNECTION';
  beforeData = true;
}

/** RFC 3461 xtext: `+XX` for `+`, `=` and anything outside printable ASCII. */
function xtext(value: string): string {
  let out = '';
  for (const byte of Buffer.from(value)) {
    out += byte < 0x21 || byte > 0x7e || byte === 0x2b || byte === 0x3d ? `+${byte.toString(16).toUpperCase().padStart(2, '0')}` : String.fromCharCode(byte);
  }
  return out;
}

/**
 * The message as DATA carries it (RFC 5321 4.5.2): CRLF line ends, a dot doubled at the start of a line, and a
 * final CRLF before the terminating `.` line. A composed message (CRLF, no line starting with a dot) is written
 * as it is; only one that needs it is copied.
 */
export function dataOf(raw: Buffer): Buffer[] {
  let clean = raw.length === 0 || raw[0] !== 0x2e;
  for (let i = raw.indexOf(0x0a); clean && i >= 0; i = raw.indexOf(0x0a, i + 1)) {
    if (i === 0 || raw[i - 1] !== 0x0d || raw[i + 1] === 0x2e) clean = false;
  }
  const body = clean ? raw : stuffed(raw);
  const ending = body.length >= 2 && body[body.length - 2] === 0x0d && body[body.length - 1] === 0x0a ? '.\r\n' : '\r\n.\r\n';
  return [body, Buffer.from(ending)];
}

function stuffed(raw: Buffer): Buffer {
  const out: number[] = [];
  let lineStart = true;
  for (let i = 0; i < raw.length; i++) {
    const byte = raw[i]!;
    if (lineStart && byte === 0x2e) out.push(0x2e);
    if (byte === 0x0a && (i === 0 || raw[i - 1] !== 0x0d)) out.push(0x0d);
    out.push(byte);
    lineStart = byte === 0x0a;
  }
  return Buffer.from(out);
}

/**
 * One SMTP client connection: greeted (EHLO, else HELO), upgraded with STARTTLS when the relay offers it on a
 * plain connection, authenticated when the URL names a user. Nagle is off; with PIPELINING (RFC 2920) a
 * transaction is two writes and two round trips (MAIL, RCPT and DATA together, then the message), without it
 * one round trip per command.
 *
 * With PIPELINING a second transaction may be handed over while the first waits for its final reply: its MAIL,
 * RCPT and DATA leave in the same write as the first one's message (RFC 2920 3.1 lets the message content head a
 * group of commands), and the relay answers the first's message and the second's commands in one read. At a
 * steady stream that is one write and one read a message on each side instead of two. Replies come back in the
 * order the commands went, which is the order the transactions wait for them in.
 */
export class SmtpConnection {
  private socket: net.Socket;
  private decoder = new StringDecoder('utf8');
  private buffer = '';
  private lines: string[] = [];
  private readonly replies: Reply[] = [];
  private readonly waiting: Array<{ resolve: (r: Reply) => void; reject: (e: Error) => void }> = [];
  private failure: Error | undefined;
  private closing = false;
  /** Exchanges under way (replies are awaited). */
  private exchanges = 0;
  /** Transactions handed over and not finished. */
  private active = 0;
  /** Resolves when the next transaction may write its commands: the last one's message is written, or it is over. */
  private turn: Promise<void> = Promise.resolve();
  /** close() was asked for while transactions were under way: it happens when the last one ends. */
  private closeWhenDone = false;
  private extensions = new Set<string>();
  private authMechanisms = new Set<string>();
  /** Transactions this connection carried (successful or not). */
  messages = 0;
  idleTimer: NodeJS.Timeout | undefined;

  private constructor(
    socket: net.Socket,
    private readonly label: string,
    private readonly timeoutMs: number,
  ) {
    this.socket = socket;
    this.attach(socket);
  }

  /** Connected, greeted, upgraded and authenticated within `timeoutMs` per step, or rejected. */
  static async open(opts: {
    host: string; port: number; secure: boolean; timeoutMs: number; name: string;
    auth?: { user: string; pass: string } | undefined; tls?: tls.ConnectionOptions | undefined;
  }): Promise<SmtpConnection> {
    const { host, port, secure } = opts;
    const servername = net.isIP(host) ? undefined : host;
    const socket = secure ? tls.connect({ host, port, ...(servername ? { servername } : {}), ...opts.tls }) : net.connect({ host, port });
    socket.setNoDelay(true);
    const connection = new SmtpConnection(socket, `${host}:${port}`, opts.timeoutMs);
    try {
      await connection.step(async () => {
        await connection.connected(secure ? 'secureConnect' : 'connect');
        await connection.expect('greeting', (c) => c === 220);
        await connection.greet(opts.name);
        if (!secure && connection.extensions.has('STARTTLS')) {
          connection.command('STARTTLS');
          await connection.expect('STARTTLS', (c) => c === 220);
          await connection.upgrade({ ...(servername ? { servername } : {}), ...opts.tls });
          await connection.greet(opts.name);
        }
        if (opts.auth) await connection.authenticate(opts.auth);
      });
      return connection;
    } catch (error) {
      connection.destroy();
      throw error;
    }
  }

  /** False once the connection failed or is closing: open another. */
  get usable(): boolean {
    return this.failure === undefined && !this.closing && !this.closeWhenDone;
  }

  /** The relay takes pipelined commands: a second transaction can be handed over while one is under way. */
  get pipelining(): boolean {
    return this.extensions.has('PIPELINING');
  }

  /**
   * One mail transaction. Resolves with the relay's final reply and each recipient's answer; rejects with a
   * SmtpReplyError (the relay refused: the connection stays usable) or a ConnectionError.
   */
  async transaction(message: SmtpEnvelopeMessage): Promise<SmtpTransactionResult> {
    this.messages += 1;
    this.active += 1;
    const before = this.turn;
    let handOn!: () => void;
    this.turn = new Promise<void>((resolve) => {
      handOn = resolve;
    });
    try {
      await before;
      return await this.exchange(message, handOn);
    } finally {
      handOn();
      this.active -= 1;
      if (this.active === 0 && this.closeWhenDone) {
        this.closeWhenDone = false;
        this.close();
      }
    }
  }

  /** The exchange of one transaction; `handOn` lets the next one write its commands. */
  private exchange(message: SmtpEnvelopeMessage, handOn: () => void): Promise<SmtpTransactionResult> {
    return this.step(async () => {
      const addresses = [message.envelopeFrom, ...message.recipients];
      const mailArgs: string[] = [];
      // eslint-disable-next-line no-control-regex -- any byte beyond ASCII
      if (this.extensions.has('SMTPUTF8') && addresses.some((a) => /[^\x00-\x7f]/.test(a))) mailArgs.push('SMTPUTF8');
      if (this.extensions.has('8BITMIME') && !isAscii(message.raw)) mailArgs.push('BODY=8BITMIME');
      if (this.extensions.has('SIZE')) mailArgs.push(`SIZE=${message.raw.length}`);
      const dsn = message.envelopeId !== undefined && this.extensions.has('DSN');
      if (dsn) mailArgs.push('RET=HDRS', `ENVID=${xtext(message.envelopeId ?? '')}`);
      const rcptArgs = dsn ? ' NOTIFY=SUCCESS,FAILURE,DELAY' : '';
      const commands = [
        `MAIL FROM:<${message.envelopeFrom}>${mailArgs.length > 0 ? ` ${mailArgs.join(' ')}` : ''}`,
        ...message.recipients.map((r) => `RCPT TO:<${r}>${rcptArgs}`),
        'DATA',
      ];
      for (const c of commands) if (/[\r\n]/.test(c)) throw new SmtpReplyError('API', 0, `invalid envelope: ${JSON.stringify(c)}`, 'EENVELOPE');

      const replies: Reply[] = [];
      if (this.extensions.has('PIPELINING')) {
        this.socket.write(`${commands.join('\r\n')}\r\n`);
        for (let i = 0; i < commands.length; i++) replies.push(await this.next());
      } else {
        // One at a time; a refused MAIL stops here, and DATA is sent only if some recipient was taken.
        for (const [i, c] of commands.entries()) {
          if (i === commands.length - 1 && !replies.slice(1).some((r) => is2xx(r.code))) break;
          this.command(c);
          const reply = await this.next();
          replies.push(reply);
          if (i === 0 && !is2xx(reply.code)) break;
        }
      }

      const [mail, ...rest] = replies as [Reply, ...Reply[]];
      const rcptReplies = rest.slice(0, message.recipients.length);
      const dataReply = rest[message.recipients.length];
      const accepted: string[] = [];
      const rejectedErrors: SmtpRecipientRefusal[] = [];
      rcptReplies.forEach((r, i) => {
        const recipient = message.recipients[i]!;
        if (is2xx(r.code)) accepted.push(recipient);
        else rejectedErrors.push({ recipient, responseCode: r.code, response: r.text, command: 'RCPT TO', code: 'EENVELOPE' });
      });

      if (!is2xx(mail.code) || accepted.length === 0 || dataReply?.code !== 354) {
        // A relay that took DATA all the same gets an empty message; RSET then ends the transaction.
        if (dataReply?.code === 354) {
          this.socket.write('.\r\n');
          await this.next();
        }
        await this.reset();
        if (!is2xx(mail.code)) throw new SmtpReplyError('MAIL FROM', mail.code, mail.text, 'EENVELOPE');
        if (accepted.length === 0) throw new SmtpReplyError('RCPT TO', rejectedErrors[0]?.responseCode ?? 0, rejectedErrors[0]?.response ?? '', 'EENVELOPE', rejectedErrors);
        throw new SmtpReplyError('DATA', dataReply?.code ?? 0, dataReply?.text ?? '', 'EMESSAGE');
      }

      // From here the relay may have taken the message: a failure is no longer safe to repeat elsewhere at once.
      this.socket.cork();
      for (const part of dataOf(message.raw)) this.socket.write(part);
      process.nextTick(() => this.socket.uncork());
      // The final reply is waited for before the next transaction's first one; a transaction waiting for its
      // turn resumes before the uncork above, so its commands join this write.
      const finalReply = this.next();
      if (this.pipelining) handOn();
      let final: Reply;
      try {
        final = await finalReply;
      } catch (error) {
        if (error instanceof SmtpConnectionError) error.beforeData = false;
        throw error;
      }
      if (!is2xx(final.code)) throw new SmtpReplyError('DATA', final.code, final.text, 'EMESSAGE');
      return { accepted, rejectedErrors, response: final.text };
    });
  }

  /**
   * Ends the session politely (QUIT) when it is healthy, once the transactions under way are over; the socket goes in
   * any case.
   */
  close(): void {
    if (this.closing) return;
    if (this.active > 0 && this.failure === undefined) {
      this.closeWhenDone = true;
      return;
    }
    this.closing = true;
    clearTimeout(this.idleTimer);
    if (this.failure === undefined) this.socket.end('QUIT\r\n');
    else this.socket.end();
    // Once QUIT is written, its answer does not matter.
    setTimeout(() => this.socket.destroy(), 1_000).unref();
  }

  destroy(): void {
    this.closing = true;
    clearTimeout(this.idleTimer);
    this.socket.destroy();
  }

  private attach(socket: net.Socket): void {
    socket.on('data', this.onData);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
    // Armed only while an exchange is under way (see step()).
    socket.on('timeout', this.onTimeout);
  }

  private detach(socket: net.Socket): void {
    socket.off('data', this.onData);
    socket.off('error', this.onError);
    socket.off('close', this.onClose);
    socket.off('timeout', this.onTimeout);
  }

  private readonly onData = (chunk: Buffer): void => {
    this.buffer += this.decoder.write(chunk);
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl).replace(/\r$/, '');
      this.buffer = this.buffer.slice(nl + 1);
      this.lines.push(line);
      // The last line of a reply is `NNN text` or `NNN`; continuation lines are `NNN-text`.
      if (/^\d{3}(?: |$)/.test(line)) {
        const reply = { code: Number(line.slice(0, 3)), text: this.lines.join('\n') };
        this.lines = [];
        const w = this.waiting.shift();
        if (w) w.resolve(reply);
        else if (this.exchanges > 0) this.replies.push(reply);
        // Unasked, between transactions: the relay is closing the connection (421, or the answer to QUIT).
        else this.fail(new SmtpConnectionError(`SMTP relay ${this.label} closed the connection: ${reply.text}`));
      }
    }
  };

  private readonly onError = (error: Error): void => this.fail(new SmtpConnectionError(`SMTP connection to ${this.label}: ${error.message}`));
  private readonly onClose = (): void => this.fail(new SmtpConnectionError(`SMTP connection to ${this.label} closed`));
  private readonly onTimeout = (): void => this.fail(new SmtpConnectionError(`no answer from SMTP relay ${this.label} within ${this.timeoutMs} ms`));

  private fail(error: Error): void {
    this.failure ??= error;
    clearTimeout(this.idleTimer);
    for (const w of this.waiting.splice(0)) w.reject(this.failed());
    this.socket.destroy();
  }

  /**
   * The failure, as an error of its own for each transaction that meets it: one that had written its message
   * marks its error (`beforeData`), and a pipelined one behind it, which had not, must not share that mark.
   */
  private failed(): Error {
    const failure = this.failure as Error;
    return failure instanceof SmtpConnectionError ? new SmtpConnectionError(failure.message) : failure;
  }

  /** Runs one exchange under the deadline; an idle connection has none (the relay may close it). */
  private async step<T>(run: () => Promise<T>): Promise<T> {
    if (this.failure) throw this.failed();
    this.socket.setTimeout(this.timeoutMs);
    this.exchanges += 1;
    try {
      return await run();
    } finally {
      this.exchanges -= 1;
      if (this.exchanges === 0) this.socket.setTimeout(0);
    }
  }

  /** Resolves when the socket is connected (or its TLS handshake done); rejects when it fails first. */
  private connected(event: 'connect' | 'secureConnect'): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      const waiter = { resolve: () => undefined, reject };
      this.waiting.push(waiter);
      this.socket.once(event, () => {
        const i = this.waiting.indexOf(waiter);
        if (i >= 0) this.waiting.splice(i, 1);
        resolve();
      });
    });
  }

  private async greet(name: string): Promise<void> {
    this.command(`EHLO ${name}`);
    const ehlo = await this.next();
    this.extensions = new Set();
    this.authMechanisms = new Set();
    if (is2xx(ehlo.code)) {
      for (const line of ehlo.text.split('\n').slice(1)) {
        const [keyword, ...params] = line.slice(4).trim().toUpperCase().split(/\s+/);
        if (!keyword) continue;
        this.extensions.add(keyword);
        if (keyword === 'AUTH') for (const p of params) this.authMechanisms.add(p);
      }
      return;
    }
    this.command(`HELO ${name}`);
    await this.expect('HELO', is2xx);
  }

  private async upgrade(options: tls.ConnectionOptions): Promise<void> {
    const plain = this.socket;
    this.detach(plain);
    const secure = tls.connect({ socket: plain, ...options });
    secure.setNoDelay(true);
    this.socket = secure;
    this.decoder = new StringDecoder('utf8');
    this.buffer = '';
    this.attach(secure);
    this.socket.setTimeout(this.timeoutMs);
    await this.connected('secureConnect');
  }

  private async authenticate(auth: { user: string; pass: string }): Promise<void> {
    if (this.authMechanisms.has('PLAIN') || !this.authMechanisms.has('LOGIN')) {
      this.command(`AUTH PLAIN ${Buffer.from(`\0${auth.user}\0${auth.pass}`).toString('base64')}`);
      await this.expect('AUTH PLAIN', (c) => c === 235);
      return;
    }
    this.command('AUTH LOGIN');
    await this.expect('AUTH LOGIN', (c) => c === 334);
    this.command(Buffer.from(auth.user).toString('base64'));
    await this.expect('AUTH LOGIN', (c) => c === 334);
    this.command(Buffer.from(auth.pass).toString('base64'));
    await this.expect('AUTH LOGIN', (c) => c === 235);
  }

  private async reset(): Promise<void> {
    this.command('RSET');
    await this.next();
  }

  private next(): Promise<Reply> {
    const queued = this.replies.shift();
    if (queued) return Promise.resolve(queued);
    if (this.failure) return Promise.reject(this.failed());
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  private async expect(step: string, ok: (code: number) => boolean): Promise<void> {
    const reply = await this.next();
    if (!ok(reply.code)) throw new SmtpReplyError(step, reply.code, reply.text);
  }

  private command(line: string): void {
    this.socket.write(`${line}\r\n`);
  }
}

/**
 * Makes the writes a socket receives within one turn of the event loop leave in one system call. An SMTP server
 * answers pipelined commands (RFC 2920: MAIL, RCPT and DATA sent together) one reply at a time, a write each; corked
 * until the next turn, the replies to one read leave together, so the client is woken once for them. Nagle's delay
 * is not involved: the writes are held for one turn of the loop only. For a server's sockets (`server.on('connection',
 * coalesceWrites)`); a socket upgraded to TLS writes through its TLS wrapper, which this does not cover.
 */
export function coalesceWrites(socket: net.Socket): void {
  const write = socket.write;
  let held = false;
  const release = (): void => {
    held = false;
    if (!socket.destroyed) socket.uncork();
  };
  socket.write = function coalescedWrite(this: net.Socket, ...args: Parameters<net.Socket['write']>): boolean {
    if (!held && !socket.destroyed && socket.writable) {
      held = true;
      socket.cork();
      setImmediate(release);
    }
    return write.apply(this, args);
  } as net.Socket['write'];
}
