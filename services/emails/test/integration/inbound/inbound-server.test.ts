import fs from 'node:fs';
import net from 'node:net';
import nodemailer from 'nodemailer';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, newId } from '@mailfleet/kit';
import { verpAddress } from '../../../src/domain/verp.js';
import { startInboundSmtpServer, type InboundSmtpServer } from '../../../src/inbound/inbound-server.js';
import { parseReport, type InboundReport } from '../../../src/inbound/reports.js';

const logger = createLogger({ service: 'emails-inbound-test', level: 'silent' });
const secret = 'inbound-test-secret-0123456789abcdef';
const bounceDomain = 'bounces.mailfleet.test';
const fixturesDir = new URL('../../fixtures/reports/', import.meta.url);
const fixture = (name: string): Buffer => fs.readFileSync(new URL(name, fixturesDir));

interface Received {
  emailId: string;
  report: InboundReport;
  raw: Buffer;
}

type Handler = (emailId: string, report: InboundReport, raw: Buffer) => Promise<void>;

/** One listener for the file; each test decides what onReport does. */
let server: InboundSmtpServer;
let received: Received[] = [];
let handler: Handler = async () => undefined;

beforeAll(async () => {
  server = await startInboundSmtpServer({
    port: 0,
    host: '127.0.0.1',
    bounceDomain,
    secret,
    logger,
    maxMessageBytes: 256 * 1024,
    onReport: async (emailId, report, raw) => {
      await handler(emailId, report, raw);
      received.push({ emailId, report, raw });
    },
  });
});
afterAll(() => server?.close());
afterEach(() => {
  received = [];
  handler = async () => undefined;
});

function transport(port = server.port): nodemailer.Transporter {
  return nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true });
}

async function send(to: string | string[], raw: Buffer | string, from = ''): Promise<{ response: string; accepted: string[]; rejected: string[] }> {
  const t = transport();
  try {
    const info = await t.sendMail({ envelope: { from, to: Array.isArray(to) ? to : [to] }, raw });
    return { response: info.response, accepted: info.accepted as string[], rejected: info.rejected as string[] };
  } finally {
    t.close();
  }
}

/** The SMTP error of a send that must fail. */
async function refusal(to: string | string[], raw: Buffer | string): Promise<{ responseCode?: number; response?: string }> {
  const error = await send(to, raw).then(
    () => undefined,
    (e: { responseCode?: number; response?: string }) => e,
  );
  expect(error, 'the send should have been refused').toBeDefined();
  return error!;
}

const bounceAddress = (emailId = newId('em')): { emailId: string; address: string } => ({
  emailId,
  address: verpAddress({ secret, emailId, bounceDomain }),
});

describe('inbound SMTP listener', () => {
  const reportFixtures = [
    'postfix-delivered.eml',
    'postfix-user-unknown.eml',
    'postfix-delayed.eml',
    'exim-failed.eml',
    'gmail-user-unknown.eml',
    'outlook-recipient-not-found.eml',
    'exchange-access-denied.eml',
    'sendmail-two-recipients.eml',
    'yahoo-arf-abuse.eml',
    'outlook-jmrp-abuse.eml',
  ];

  it.each(reportFixtures)('hands %s to onReport, parsed, for the email its bounce address names', async (name) => {
    const { emailId, address } = bounceAddress();
    const raw = fixture(name);
    const info = await send(address, raw);
    expect(info.response).toBe('250 2.6.0 Report accepted');
    expect(received).toHaveLength(1);
    expect(received[0]!.emailId).toBe(emailId);
    expect(received[0]!.report).toEqual(await parseReport(raw));
    expect(received[0]!.report).toBeDefined();
    // The raw message as it came over the wire (CRLF line ends).
    expect(received[0]!.raw.toString().replace(/\r\n/g, '\n').trim()).toBe(raw.toString().trim());
  });

  it('accepts reports from a named sender too, and the address in any case of domain', async () => {
    const { emailId, address } = bounceAddress();
    const [local, domain] = address.split('@') as [string, string];
    await send(`${local}@${domain.toUpperCase()}`, fixture('yahoo-arf-abuse.eml'), 'feedback@arf.mail.yahoo.com');
    expect(received.map((r) => [r.emailId, r.report.kind])).toEqual([[emailId, 'arf']]);
  });

  it('refuses at RCPT every address that is not a signed bounce address of its domain (no relay, no backscatter)', async () => {
    const { emailId, address } = bounceAddress();
    const sig = address.split('@')[0]!.slice(-10);
    const forged = [
      'someone@example.com',
      `postmaster@${bounceDomain}`,
      `bounces+${emailId}@${bounceDomain}`,
      `bounces+${emailId}-${sig.slice(0, -1)}${sig.endsWith('a') ? 'b' : 'a'}@${bounceDomain}`,
      `bounces+${newId('em')}-${sig}@${bounceDomain}`,
      address.replace(bounceDomain, 'example.com'),
      verpAddress({ secret: 'another-secret-0123456789abcdef', emailId, bounceDomain }),
    ];
    for (const to of forged) {
      const error = await refusal(to, fixture('postfix-user-unknown.eml'));
      expect(error.responseCode, to).toBe(550);
      expect(error.response).toMatch(/^550 5\.1\.1 <.*>: Recipient address rejected/);
    }
    expect(received).toEqual([]);
  });

  it('with one good and one forged recipient, takes the message for the good one only', async () => {
    const { emailId, address } = bounceAddress();
    const info = await send([address, 'victim@example.com'], fixture('postfix-user-unknown.eml'));
    expect(info.accepted).toEqual([address]);
    expect(info.rejected).toEqual(['victim@example.com']);
    expect(received.map((r) => r.emailId)).toEqual([emailId]);
  });

  it('one message to two bounce addresses reaches onReport once per email', async () => {
    const a = bounceAddress();
    const b = bounceAddress();
    await send([a.address, b.address, a.address], fixture('postfix-delivered.eml'));
    expect(received.map((r) => r.emailId).sort()).toEqual([a.emailId, b.emailId].sort());
  });

  it('answers 451 when onReport fails, so the MTA retries; the retry is recorded (no lost report)', async () => {
    const { emailId, address } = bounceAddress();
    handler = async () => {
      throw new Error('database down');
    };
    const error = await refusal(address, fixture('gmail-user-unknown.eml'));
    expect(error.responseCode).toBe(451);
    expect(error.response).toBe('451 4.3.0 Report not processed, try again later');
    expect(received).toEqual([]);

    handler = async () => undefined;
    await send(address, fixture('gmail-user-unknown.eml'));
    expect(received.map((r) => [r.emailId, r.report.kind])).toEqual([[emailId, 'dsn']]);
  });

  it('accepts and drops what is not a readable report (no endless retries)', async () => {
    for (const name of ['malformed.eml', 'qmail-nonstandard.eml', 'out-of-office.eml']) {
      const info = await send(bounceAddress().address, fixture(name));
      expect(info.response, name).toMatch(/^250 2\.6\.0 Message accepted but not understood/);
    }
    expect(received).toEqual([]);
  });

  it('refuses a message over the size limit with 552', async () => {
    // Over the 256 KiB limit of this listener.
    const big = `${fixture('postfix-delivered.eml').toString()}\n${`${'x'.repeat(76)}\n`.repeat(4000)}`;
    const error = await refusal(bounceAddress().address, big);
    expect(error.responseCode).toBe(552);
    expect(received).toEqual([]);
  });

  it('does not offer STARTTLS or AUTH, and advertises its size limit', async () => {
    const [greeting, ehlo] = await smtpTalk(server.port, ['EHLO test.example', 'QUIT']);
    expect(greeting).toMatch(/^220 bounces\.mailfleet\.test /);
    expect(ehlo).toMatch(/^250-/);
    expect(ehlo).not.toMatch(/STARTTLS|AUTH/);
    expect(ehlo).toMatch(/SIZE 262144/);
  });
});

/** Speaks SMTP by hand: the greeting, then one full reply per command. */
async function smtpTalk(port: number, commands: string[]): Promise<string[]> {
  const socket = net.connect(port, '127.0.0.1');
  const replies: string[] = [];
  let buffer = '';
  let waiting: (() => void) | undefined;
  socket.on('data', (d) => {
    buffer += d.toString();
    // A reply is complete at a line `NNN text` (not `NNN-text`).
    const m = /(?:^|\n)\d{3} [^\n]*\r\n/.exec(buffer);
    if (m) {
      replies.push(buffer.slice(0, m.index + m[0].length));
      buffer = buffer.slice(m.index + m[0].length);
      waiting?.();
    }
  });
  const next = (): Promise<void> => new Promise((resolve) => (waiting = resolve));
  try {
    await next();
    for (const command of commands) {
      socket.write(`${command}\r\n`);
      await next();
    }
  } finally {
    socket.destroy();
  }
  return replies;
}

describe('closing the inbound listener', () => {
  it('waits for a report being handled, then ends idle sessions with 421 at once', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const seen: string[] = [];
    const own = await startInboundSmtpServer({
      port: 0,
      host: '127.0.0.1',
      bounceDomain,
      secret,
      logger,
      closeTimeoutMs: 30_000,
      onReport: async (emailId) => {
        seen.push(`start ${emailId}`);
        await gate;
        seen.push(`end ${emailId}`);
      },
    });
    // An idle session that would otherwise hold close() for the whole timeout.
    const idle = net.connect(own.port, '127.0.0.1');
    let idleText = '';
    idle.on('data', (d) => (idleText += d.toString()));
    await new Promise<void>((resolve) => idle.once('data', () => resolve()));

    const { emailId, address } = bounceAddress();
    const t = transport(own.port);
    const sending = t.sendMail({ envelope: { from: '', to: address }, raw: fixture('postfix-user-unknown.eml') });
    await expect.poll(() => seen).toEqual([`start ${emailId}`]);

    let closed = false;
    const closing = own.close().then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(closed).toBe(false);
    release();
    const info = await sending;
    await closing;
    t.close();
    expect(info.response).toBe('250 2.6.0 Report accepted');
    expect(seen).toEqual([`start ${emailId}`, `end ${emailId}`]);
    // Our own 421, not the one smtp-server sends when its close timeout (30 s here) runs out.
    await expect.poll(() => idleText).toMatch(/421 4\.3\.2 Service shutting down, try again later/);
    idle.destroy();
    // No longer listening.
    const refused = await new Promise<boolean>((resolve) => {
      const s = net.connect(own.port, '127.0.0.1');
      s.once('connect', () => (s.destroy(), resolve(false)));
      s.once('error', () => resolve(true));
    });
    expect(refused).toBe(true);
  });

  it('refuses an empty secret or bounce domain at start', async () => {
    await expect(startInboundSmtpServer({ port: 0, bounceDomain, secret: '', logger, onReport: async () => undefined })).rejects.toThrow(/secret/);
    await expect(startInboundSmtpServer({ port: 0, bounceDomain: ' ', secret, logger, onReport: async () => undefined })).rejects.toThrow(/domain/);
  });
});
