import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import nodemailer from 'nodemailer';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createSmtpSink, findFreePort, type SmtpSink } from '@mailfleet/deploy';
import { createLogger, newId } from '@mailfleet/kit';
import { readMailDir } from '@mailfleet/testkit';
// The real bounce and feedback listener of the emails service, the one the platform points the simulator at.
import { verpAddress } from '../../../emails/src/domain/verp.js';
import { startInboundSmtpServer, type InboundSmtpServer } from '../../../emails/src/inbound/inbound-server.js';
import type { ArfReport, DsnReport, InboundReport } from '../../../emails/src/inbound/reports.js';

type SimulatorEvent = Parameters<Parameters<SmtpSink['onSimulatorEvent']>[0]>[0];

const logger = createLogger({ service: 'simulator-test', level: 'silent' });
const secret = 'simulator-test-secret-0123456789abcdef';
const bounceDomain = 'bounces.mailfleet.test';

interface Received {
  emailId: string;
  report: InboundReport;
}

let inbound: InboundSmtpServer;
let sink: SmtpSink;
let dir: string;
let received: Received[] = [];
let events: SimulatorEvent[] = [];
let failNext = 0;

beforeAll(async () => {
  inbound = await startInboundSmtpServer({
    port: 0,
    host: '127.0.0.1',
    bounceDomain,
    secret,
    logger,
    onReport: async (emailId, report) => {
      if (failNext > 0) {
        failNext -= 1;
        throw new Error('simulated outage');
      }
      received.push({ emailId, report });
    },
  });
  dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-simulator-'));
  sink = await createSmtpSink({
    port: 0,
    dir,
    simulator: { reportTarget: `127.0.0.1:${inbound.port}`, reportRetryDelaysMs: [100, 300] },
  });
  sink.onSimulatorEvent((e) => events.push(e));
});
afterAll(async () => {
  await sink?.close();
  await inbound?.close();
  await fsp.rm(dir, { recursive: true, force: true });
});
afterEach(() => {
  received = [];
  events = [];
  failNext = 0;
});

/** A new email: its id and its signed bounce address (the envelope sender the emails service uses). */
function newEmail(): { emailId: string; returnPath: string; messageId: string } {
  const emailId = newId('em');
  return { emailId, returnPath: verpAddress({ secret, emailId, bounceDomain }), messageId: `<${emailId}@acme.example>` };
}

async function send(
  port: number,
  from: string,
  to: string[],
  messageId = `<${newId('msg')}@acme.example>`,
): Promise<{ response: string; accepted: string[]; rejected: string[] }> {
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true });
  try {
    const info = await transport.sendMail({
      envelope: { from, to },
      from: 'Acme <hello@acme.example>',
      to: to.join(', '),
      subject: 'Simulated mail',
      messageId,
      text: 'hello',
    });
    return { response: info.response, accepted: info.accepted as string[], rejected: info.rejected as string[] };
  } finally {
    transport.close();
  }
}

async function refusal(port: number, from: string, to: string[]): Promise<{ responseCode?: number; response?: string }> {
  const error = await send(port, from, to).then(
    () => undefined,
    (e: { responseCode?: number; response?: string }) => e,
  );
  expect(error, 'the send should have been refused').toBeDefined();
  return error!;
}

const reportsFor = (emailId: string): InboundReport[] => received.filter((r) => r.emailId === emailId).map((r) => r.report);

describe('mailbox simulator (SMTP sink) against the real inbound listener', () => {
  it('any other recipient: stored, then a success DSN (delivered, 2.0.0) goes to the envelope sender', async () => {
    const email = newEmail();
    const info = await send(sink.port, email.returnPath, ['alice@example.com', 'Bob@Example.org'], email.messageId);
    expect(info.response).toMatch(/^250 2\.0\.0 Ok: queued as /);

    await expect.poll(() => reportsFor(email.emailId)).toHaveLength(1);
    const dsn = reportsFor(email.emailId)[0] as DsnReport;
    expect(dsn).toMatchObject({ kind: 'dsn', reportingMta: 'mailbox-simulator.mailfleet.local', originalMessageId: email.messageId });
    expect(dsn.recipients.map((r) => [r.recipient, r.action, r.status])).toEqual([
      ['alice@example.com', 'delivered', '2.0.0'],
      ['bob@example.org', 'delivered', '2.0.0'],
    ]);
    const stored = (await readMailDir(dir)).filter((m) => m.envelope.mailFrom === email.returnPath);
    // nodemailer lower-cases the domain part of envelope addresses.
    expect(stored.map((m) => m.envelope.rcptTo)).toEqual([['alice@example.com', 'Bob@example.org']]);
    expect(events).toContainEqual(expect.objectContaining({ type: 'report-sent', kind: 'dsn', to: email.returnPath, attempts: 1 }));
  });

  it('bounce@: the RCPT is refused with 550 5.1.1 User unknown, nothing is stored and no report follows', async () => {
    const email = newEmail();
    const error = await refusal(sink.port, email.returnPath, ['bounce@example.com']);
    expect(error.responseCode).toBe(550);
    expect(error.response).toBe('550 5.1.1 <bounce@example.com>: Recipient address rejected: User unknown');
    // A +tag keeps the rule (so one address per test run escapes the suppression list), and any domain works.
    expect((await refusal(sink.port, email.returnPath, ['Bounce+run42@elsewhere.test'])).responseCode).toBe(550);

    // A later message's report arrives; none ever came for the refused one.
    const later = newEmail();
    await send(sink.port, later.returnPath, ['carol@example.com']);
    await expect.poll(() => reportsFor(later.emailId)).toHaveLength(1);
    expect(reportsFor(email.emailId)).toEqual([]);
    expect((await readMailDir(dir)).filter((m) => m.envelope.mailFrom === email.returnPath)).toEqual([]);
    expect(events).toContainEqual(expect.objectContaining({ type: 'recipient-refused', rule: 'bounce', rcptTo: 'bounce@example.com' }));
  });

  it('bounce@ among other recipients: refused alone; the others are delivered and reported', async () => {
    const email = newEmail();
    const info = await send(sink.port, email.returnPath, ['bounce@example.com', 'dave@example.com']);
    expect(info.accepted).toEqual(['dave@example.com']);
    expect(info.rejected).toEqual(['bounce@example.com']);
    await expect.poll(() => reportsFor(email.emailId)).toHaveLength(1);
    expect((reportsFor(email.emailId)[0] as DsnReport).recipients.map((r) => r.recipient)).toEqual(['dave@example.com']);
  });

  it('softbounce@: 451 4.2.0 to the first attempt of a (sender, recipient) pair, then accepted and reported', async () => {
    const email = newEmail();
    const first = await refusal(sink.port, email.returnPath, ['softbounce@example.com']);
    expect(first.responseCode).toBe(451);
    expect(first.response).toBe('451 4.2.0 Mailbox temporarily unavailable');

    // Another sender (another email) to the same mailbox gets its own first deferral.
    const other = newEmail();
    expect((await refusal(sink.port, other.returnPath, ['softbounce@example.com'])).responseCode).toBe(451);

    // The retry of the first email goes through.
    const retry = await send(sink.port, email.returnPath, ['softbounce@example.com']);
    expect(retry.response).toMatch(/^250 /);
    await expect.poll(() => reportsFor(email.emailId)).toHaveLength(1);
    expect((reportsFor(email.emailId)[0] as DsnReport).recipients).toEqual([
      expect.objectContaining({ recipient: 'softbounce@example.com', action: 'delivered', status: '2.0.0' }),
    ]);
    expect((await readMailDir(dir)).filter((m) => m.envelope.mailFrom === email.returnPath)).toHaveLength(1);
  });

  it('complaint@: stored, delivered, then an ARF abuse report with the original headers', async () => {
    const email = newEmail();
    await send(sink.port, email.returnPath, ['complaint@example.com', 'erin@example.com'], email.messageId);
    await expect.poll(() => reportsFor(email.emailId)).toHaveLength(2);
    const [dsn, arf] = reportsFor(email.emailId) as [DsnReport, ArfReport];
    // One complains about mail one got: the DSN first, then the complaint.
    expect(dsn.kind).toBe('dsn');
    expect(dsn.recipients.map((r) => [r.recipient, r.action])).toEqual([
      ['complaint@example.com', 'delivered'],
      ['erin@example.com', 'delivered'],
    ]);
    expect(arf).toEqual({
      kind: 'arf',
      feedbackType: 'abuse',
      userAgent: 'mailfleet-mailbox-simulator/1.0',
      originalRecipient: 'complaint@example.com',
      originalMailFrom: email.returnPath,
      originalMessageId: email.messageId,
      arrivalDate: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      sourceIp: '127.0.0.1',
    });
    expect((await readMailDir(dir)).filter((m) => m.envelope.mailFrom === email.returnPath)).toHaveLength(1);
  });

  it('never answers the null sender (a report is not answered with a report)', async () => {
    await send(sink.port, '', ['frank@example.com', 'complaint@example.com'], '<null-sender@acme.example>');
    const marker = newEmail();
    await send(sink.port, marker.returnPath, ['grace@example.com']);
    await expect.poll(() => reportsFor(marker.emailId)).toHaveLength(1);
    expect(received.map((r) => r.emailId)).toEqual([marker.emailId]);
    expect(events.filter((e) => e.type !== 'report-sent' || e.to !== marker.returnPath)).toEqual([]);
    expect((await readMailDir(dir)).some((m) => m.envelope.mailFrom === '' && m.envelope.rcptTo.includes('frank@example.com'))).toBe(true);
  });

  it('a burst over pooled connections: every message stored once and reported once', async () => {
    const emails = Array.from({ length: 200 }, () => newEmail());
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: sink.port, secure: false, ignoreTLS: true, pool: true, maxConnections: 5 });
    let next = 0;
    try {
      await Promise.all(
        Array.from({ length: 10 }, async () => {
          while (next < emails.length) {
            const email = emails[next++]!;
            await transport.sendMail({ envelope: { from: email.returnPath, to: ['reader@example.com'] }, from: 'hello@acme.example', to: 'reader@example.com', subject: 'burst', messageId: email.messageId, text: 'hi' });
          }
        }),
      );
    } finally {
      transport.close();
    }
    await expect.poll(() => received.length, { timeout: 20_000 }).toBeGreaterThanOrEqual(emails.length);
    for (const email of emails) expect(reportsFor(email.emailId), email.emailId).toHaveLength(1);
    expect(received).toHaveLength(emails.length);
    const stored = (await readMailDir(dir)).filter((m) => emails.some((e) => e.returnPath === m.envelope.mailFrom));
    expect(stored).toHaveLength(emails.length);
    await expect.poll(() => events.filter((e) => e.type === 'report-sent').length).toBe(emails.length);
    expect(events.every((e) => e.type === 'report-sent' && e.attempts === 1)).toBe(true);
  });

  it('retries a report the listener could not take (451) and delivers it', async () => {
    failNext = 1;
    const email = newEmail();
    await send(sink.port, email.returnPath, ['heidi@example.com']);
    await expect.poll(() => reportsFor(email.emailId)).toHaveLength(1);
    // The sink records the send once the listener's reply is in, which may be a moment after the listener saw it.
    await expect.poll(() => events).toContainEqual(expect.objectContaining({ type: 'report-sent', kind: 'dsn', to: email.returnPath, attempts: 2 }));
  });

  it('gives up at once on a permanent refusal (a sender that is not a signed bounce address), and logs it', async () => {
    await send(sink.port, 'hello@acme.example', ['ivan@example.com']);
    await expect.poll(() => events.filter((e) => e.type === 'report-failed')).toHaveLength(1);
    expect(events.find((e) => e.type === 'report-failed')).toMatchObject({
      kind: 'dsn',
      to: 'hello@acme.example',
      recipients: ['ivan@example.com'],
      attempts: 1,
      error: expect.stringMatching(/^RCPT TO: 550 5\.1\.1 <hello@acme\.example>: Recipient address rejected/),
    });
    expect(received).toEqual([]);
  });
});

describe('mailbox simulator settings', () => {
  const tempSink = async (simulator: Parameters<typeof createSmtpSink>[0]['simulator']) => {
    const d = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-simulator-'));
    const s = await createSmtpSink({ port: 0, dir: d, ...(simulator === undefined ? {} : { simulator }) });
    const evts: SimulatorEvent[] = [];
    s.onSimulatorEvent((e) => evts.push(e));
    return {
      sink: s,
      events: evts,
      dir: d,
      close: async () => {
        await s.close();
        await fsp.rm(d, { recursive: true, force: true });
      },
    };
  };

  it('off (the library default): every recipient is accepted and stored, nothing is reported', async () => {
    const t = await tempSink(undefined);
    try {
      const email = newEmail();
      const info = await send(t.sink.port, email.returnPath, ['bounce@example.com', 'softbounce@example.com', 'complaint@example.com']);
      expect(info.accepted).toHaveLength(3);
      expect((await readMailDir(t.dir)).map((m) => m.envelope.rcptTo)).toEqual([['bounce@example.com', 'softbounce@example.com', 'complaint@example.com']]);
      expect(t.events).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('forgets a deferral after the soft-bounce window: the next attempt is deferred again', async () => {
    const t = await tempSink({ softBounceWindowMs: 300 });
    try {
      const email = newEmail();
      expect((await refusal(t.sink.port, email.returnPath, ['softbounce@example.com'])).responseCode).toBe(451);
      expect((await send(t.sink.port, email.returnPath, ['softbounce@example.com'])).response).toMatch(/^250 /);
      await new Promise((r) => setTimeout(r, 400));
      expect((await refusal(t.sink.port, email.returnPath, ['softbounce@example.com'])).responseCode).toBe(451);
    } finally {
      await t.close();
    }
  });

  it('without a report target the rules apply and no report is attempted', async () => {
    const t = await tempSink(true);
    try {
      const email = newEmail();
      expect((await refusal(t.sink.port, email.returnPath, ['bounce@example.com'])).responseCode).toBe(550);
      await send(t.sink.port, email.returnPath, ['judy@example.com', 'complaint@example.com']);
      await new Promise((r) => setTimeout(r, 300));
      expect(t.events.map((e) => e.type)).toEqual(['recipient-refused']);
    } finally {
      await t.close();
    }
  });

  it('keeps retrying while the listener is down and delivers once it is up', async () => {
    const port = await findFreePort();
    const t = await tempSink({ reportTarget: `127.0.0.1:${port}`, reportDelayMs: 0, reportRetryDelaysMs: [300, 600, 1200] });
    const got: string[] = [];
    let late: InboundSmtpServer | undefined;
    try {
      const email = newEmail();
      await send(t.sink.port, email.returnPath, ['kim@example.com']);
      await new Promise((r) => setTimeout(r, 100));
      late = await startInboundSmtpServer({ port, host: '127.0.0.1', bounceDomain, secret, logger, onReport: async (id) => void got.push(id) });
      await expect.poll(() => got, { timeout: 5000 }).toEqual([email.emailId]);
      // The listener has the report before the sink has recorded its answer: wait for that record too.
      await expect.poll(() => t.events, { timeout: 5000 }).toEqual([expect.objectContaining({ type: 'report-sent', kind: 'dsn' })]);
      expect((t.events[0] as { attempts: number }).attempts).toBeGreaterThan(1);
    } finally {
      await t.close();
      await late?.close();
    }
  });

  it('gives up after the last retry and reports the failure', async () => {
    const port = await findFreePort();
    const t = await tempSink({ reportTarget: `127.0.0.1:${port}`, reportDelayMs: 0, reportRetryDelaysMs: [50, 50] });
    try {
      await send(t.sink.port, newEmail().returnPath, ['leo@example.com']);
      await expect.poll(() => t.events, { timeout: 5000 }).toEqual([expect.objectContaining({ type: 'report-failed', kind: 'dsn', attempts: 3 })]);
    } finally {
      await t.close();
    }
  });

  it('refuses a malformed report target', async () => {
    const where = path.join(dir, 'never-created');
    await expect(createSmtpSink({ port: 0, dir: where, simulator: { reportTarget: 'localhost' } })).rejects.toThrow(/host:port/);
    await expect(fsp.stat(where)).rejects.toThrow(/ENOENT/);
  });
});
