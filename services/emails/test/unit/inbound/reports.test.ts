import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { classifyBounce, parseReport, type DsnRecipient, type DsnReport } from '../../../src/inbound/reports.js';

const fixture = (name: string): Buffer => fs.readFileSync(new URL(`../../fixtures/reports/${name}`, import.meta.url));
const crlf = (buf: Buffer): Buffer => Buffer.from(buf.toString('latin1').replace(/\r?\n/g, '\r\n'), 'latin1');

async function dsn(raw: Buffer): Promise<DsnReport> {
  const report = await parseReport(raw);
  expect(report?.kind).toBe('dsn');
  return report as DsnReport;
}

describe('parseReport: delivery status notifications from real MTAs', () => {
  it('Postfix success DSN: delivered, 2.0.0, the original Message-ID from text/rfc822-headers', async () => {
    expect(await parseReport(fixture('postfix-delivered.eml'))).toEqual({
      kind: 'dsn',
      reportingMta: 'mx.example.net',
      arrivalDate: '2023-11-14T22:13:19.000Z',
      originalMessageId: '<em_4xWq9LmZ0aB7cD2eF5gH1j@acme.example>',
      recipients: [
        {
          recipient: 'alice@example.net',
          action: 'delivered',
          status: '2.0.0',
          diagnostic: 'delivery via dovecot: delivered via dovecot service',
        },
      ],
    });
  });

  it('Postfix 5.1.1 user unknown: folded Diagnostic-Code unfolded, Message-ID from the returned message/rfc822', async () => {
    expect(await parseReport(fixture('postfix-user-unknown.eml'))).toEqual({
      kind: 'dsn',
      reportingMta: 'mail.example.org',
      arrivalDate: '2023-11-15T08:41:06.000Z',
      originalMessageId: '<em_8KpL2sQv6nXr1tYz3wCe5b@acme.example>',
      recipients: [
        {
          recipient: 'bob@example.org',
          action: 'failed',
          status: '5.1.1',
          remoteMta: 'mx1.example.org',
          diagnostic: '550 5.1.1 <bob@example.org>: Recipient address rejected: User unknown in virtual mailbox table',
        },
      ],
    });
  });

  it('Postfix delayed (4.4.1): a soft, not-yet-final report', async () => {
    const report = await dsn(fixture('postfix-delayed.eml'));
    expect(report.recipients).toEqual([
      {
        recipient: 'carol@example.com',
        action: 'delayed',
        status: '4.4.1',
        diagnostic: 'connect to mx.example.com[192.0.2.10]:25: Connection timed out',
      },
    ]);
    expect(report.originalMessageId).toBe('<em_2HgT5rVb9kLm0nQw4eRt7y@acme.example>');
    expect(classifyBounce(report.recipients[0]!)).toEqual({
      type: 'Transient',
      subType: 'General',
      message: 'connect to mx.example.com[192.0.2.10]:25: Connection timed out',
    });
  });

  it('Exim failure: Action before Final-Recipient, generic 5.0.0 refined to NoEmail by the 550 5.1.1 reply', async () => {
    const report = await dsn(fixture('exim-failed.eml'));
    expect(report.reportingMta).toBe('mail.example.co.uk');
    expect(report.arrivalDate).toBeUndefined();
    expect(report.originalMessageId).toBe('<em_5TyU8iOp1aSd4fGh7jKl0z@acme.example>');
    expect(report.recipients).toEqual([
      {
        recipient: 'dan@example.co.uk',
        action: 'failed',
        status: '5.0.0',
        remoteMta: 'mx.example.co.uk',
        diagnostic: '550 5.1.1 <dan@example.co.uk>: Recipient address rejected: User unknown in local recipient table',
      },
    ]);
    expect(classifyBounce(report.recipients[0]!)).toMatchObject({ type: 'Permanent', subType: 'NoEmail' });
  });

  it('Gmail (mailer-daemon@googlemail.com): nested multipart, long folded diagnostic and Remote-MTA comment', async () => {
    const report = await dsn(fixture('gmail-user-unknown.eml'));
    expect(report.reportingMta).toBe('googlemail.com');
    expect(report.arrivalDate).toBe('2023-11-14T22:02:03.000Z');
    expect(report.originalMessageId).toBe('<em_9QwE3rTy6uIo2pAs5dFg8h@acme.example>');
    expect(report.recipients).toHaveLength(1);
    const r = report.recipients[0]!;
    expect(r).toMatchObject({ recipient: 'erin.nonexistent@gmail.com', action: 'failed', status: '5.1.1' });
    expect(r.remoteMta).toBe('gmail-smtp-in.l.google.com. (2a00:1450:400c:c0b::1a, the server for the domain gmail.com.)');
    expect(r.diagnostic).toBe(
      "550-5.1.1 The email account that you tried to reach does not exist. Please try double-checking the recipient's " +
        'email address for typos or unnecessary spaces. For more information, go to https://support.google.com/mail/?p=NoSuchUser ' +
        'l15-20020a05600c4f0f00b004083f61cb4fsi1234567wmq.25 - gsmtp',
    );
    expect(classifyBounce(r)).toEqual({ type: 'Permanent', subType: 'NoEmail', message: r.diagnostic });
  });

  it('Outlook.com / Exchange Online NDR: 5.1.10 RecipientNotFound is NoEmail', async () => {
    const report = await dsn(fixture('outlook-recipient-not-found.eml'));
    expect(report.reportingMta).toBe('AM8PR02MB1234.eurprd02.prod.outlook.com');
    expect(report.originalMessageId).toBe('<em_1ZxC4vBn7mQw0eRt3yUi6o@acme.example>');
    expect(report.recipients).toEqual([
      {
        recipient: 'frank@contoso.com',
        action: 'failed',
        status: '5.1.10',
        diagnostic: '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient frank@contoso.com not found by SMTP address lookup',
      },
    ]);
    expect(classifyBounce(report.recipients[0]!)).toMatchObject({ type: 'Permanent', subType: 'NoEmail' });
  });

  it('Exchange on-premises NDR: 5.4.1 access denied, Original-Recipient preferred and lower-cased', async () => {
    const report = await dsn(fixture('exchange-access-denied.eml'));
    expect(report.originalMessageId).toBe('<em_7LkJ0hGf3dSa6pOi9uYt2r@acme.example>');
    expect(report.recipients).toEqual([
      {
        recipient: 'grace@fabrikam.example',
        action: 'failed',
        status: '5.4.1',
        remoteMta: 'fabrikam-example.mail.protection.outlook.com',
        diagnostic:
          '550 5.4.1 Recipient address rejected: Access denied. AS(201806281) [DB5EUR03FT012.eop-EUR03.prod.protection.outlook.com]',
      },
    ]);
    expect(classifyBounce(report.recipients[0]!)).toMatchObject({ type: 'Permanent', subType: 'General' });
  });

  it('one DSN, two recipients: one delivered, one failed (Sendmail, untyped first part, `delivered (to mailbox)`)', async () => {
    const report = await dsn(fixture('sendmail-two-recipients.eml'));
    expect(report.reportingMta).toBe('mail.example.edu');
    expect(report.arrivalDate).toBe('2023-11-22T09:59:00.000Z');
    expect(report.originalMessageId).toBe('<em_3NbV6cXz9aSd2fGh5jKl8q@acme.example>');
    expect(report.recipients).toEqual([
      { recipient: 'heidi@example.edu', action: 'delivered', status: '2.1.5' },
      {
        recipient: 'ivan@example.edu',
        action: 'failed',
        status: '5.1.1',
        remoteMta: 'mx.example.edu',
        diagnostic: '550 5.1.1 <ivan@example.edu>... User unknown',
      },
    ]);
  });

  it('reads the same reports with CRLF line ends (as they arrive over SMTP)', async () => {
    for (const name of ['postfix-user-unknown.eml', 'gmail-user-unknown.eml', 'sendmail-two-recipients.eml', 'outlook-recipient-not-found.eml']) {
      expect(await parseReport(crlf(fixture(name))), name).toEqual(await parseReport(fixture(name)));
    }
  });
});

describe('parseReport: feedback reports (ARF)', () => {
  it('Yahoo abuse report', async () => {
    expect(await parseReport(fixture('yahoo-arf-abuse.eml'))).toEqual({
      kind: 'arf',
      feedbackType: 'abuse',
      userAgent: 'Yahoo!-Mail-Feedback/2.0',
      originalMailFrom: 'bounces+em_6FgH9jKl2zXc5vBn8mQw1e-h2kx7dq4ma@bounces.mailfleet.local',
      originalRecipient: 'judy@yahoo.com',
      originalMessageId: '<em_6FgH9jKl2zXc5vBn8mQw1e@acme.example>',
      arrivalDate: '2023-11-22T11:12:13.000Z',
      sourceIp: '198.51.100.7',
    });
  });

  it('Microsoft JMRP: no Original-Rcpt-To, the recipient comes from X-HmXmrOriginalRecipient', async () => {
    expect(await parseReport(crlf(fixture('outlook-jmrp-abuse.eml')))).toEqual({
      kind: 'arf',
      feedbackType: 'abuse',
      userAgent: 'Hotmail FBL',
      originalRecipient: 'kim@outlook.com',
      originalMessageId: '<em_0PoI9uYt8rEw7qAs6dFg5h@acme.example>',
      arrivalDate: '2023-11-23T15:03:51.000Z',
      sourceIp: '198.51.100.7',
    });
  });

  it('an ARF with only the original headers (text/rfc822-headers), Arrival-Date and other feedback types', async () => {
    const raw = report('feedback-report', [
      ['text/plain', 'This is a fraud report.'],
      [
        'message/feedback-report',
        'Feedback-Type: Fraud\nUser-Agent: SomeGenerator/1.0\nVersion: 1\nOriginal-Mail-From: bounces+em_x-abcdefghij@b.example\n' +
          'Original-Rcpt-To: <Someone@Example.org>\nArrival-Date: Thu, 8 Mar 2005 14:00:00 EDT\nSource-IP: [192.0.2.1]',
      ],
      ['text/rfc822-headers', 'From: a@example.com\nMessage-ID: bare-id@example.com\nSubject: hi'],
    ]);
    expect(await parseReport(raw)).toEqual({
      kind: 'arf',
      feedbackType: 'fraud',
      userAgent: 'SomeGenerator/1.0',
      originalMailFrom: 'bounces+em_x-abcdefghij@b.example',
      originalRecipient: 'someone@example.org',
      originalMessageId: '<bare-id@example.com>',
      arrivalDate: '2005-03-08T18:00:00.000Z',
      sourceIp: '192.0.2.1',
    });
  });

  it('an ARF without Feedback-Type is not a report', async () => {
    const raw = report('feedback-report', [['message/feedback-report', 'User-Agent: x\nVersion: 1']]);
    expect(await parseReport(raw)).toBeUndefined();
  });
});

describe('parseReport: liberal in what it accepts', () => {
  it('a base64-encoded delivery-status part', async () => {
    const body = Buffer.from('Reporting-MTA: dns; b64.example\n\nFinal-Recipient: rfc822; x@example.com\nAction: failed\nStatus: 5.2.2\n').toString('base64');
    const raw = report('delivery-status', [['message/delivery-status', body, 'base64']]);
    expect((await dsn(raw)).recipients).toEqual([{ recipient: 'x@example.com', action: 'failed', status: '5.2.2' }]);
  });

  it('recipient groups with no empty line between them, and none after the per-message fields', async () => {
    const raw = report('delivery-status', [
      [
        'message/delivery-status',
        'Reporting-MTA: dns; tight.example\nFinal-Recipient: rfc822; a@example.com\nAction: failed\nStatus: 5.1.1\n' +
          'Final-Recipient: rfc822; b@example.com\nAction: delayed\nStatus: 4.2.2',
      ],
    ]);
    const r = await dsn(raw);
    expect(r.reportingMta).toBe('tight.example');
    expect(r.recipients).toEqual([
      { recipient: 'a@example.com', action: 'failed', status: '5.1.1' },
      { recipient: 'b@example.com', action: 'delayed', status: '4.2.2' },
    ]);
  });

  it('status from the reply when Status is missing, action from the status when Action is odd', async () => {
    const raw = report('delivery-status', [
      [
        'message/delivery-status',
        'Reporting-MTA: dns; odd.example\n\n' +
          'Final-Recipient: a@example.com\nAction: failed\nDiagnostic-Code: smtp; 552-5.2.2 Mailbox full\n\n' +
          'Final-Recipient: RFC822; <B@Example.com>\nAction: bounced\nStatus: 5.7.1 (delivery not authorized)\n\n' +
          'Final-Recipient: rfc822; c@example.com\nAction: failed\nDiagnostic-Code: smtp; 554 rejected\n\n' +
          'Final-Recipient: rfc822; d@example.com\nAction: FAILED\n\n' +
          'Final-Recipient: rfc822; e@example.com\nStatus: 4.4.7\n',
      ],
    ]);
    expect((await dsn(raw)).recipients).toEqual([
      { recipient: 'a@example.com', action: 'failed', status: '5.2.2', diagnostic: '552-5.2.2 Mailbox full' },
      { recipient: 'b@example.com', action: 'failed', status: '5.7.1' },
      { recipient: 'c@example.com', action: 'failed', status: '5.0.0', diagnostic: '554 rejected' },
      { recipient: 'd@example.com', action: 'failed', status: '5.0.0' },
      { recipient: 'e@example.com', action: 'delayed', status: '4.4.7' },
    ]);
  });

  it('RFC 6533 message/global-delivery-status with a utf-8 address', async () => {
    const raw = report('delivery-status', [
      ['message/global-delivery-status', 'Reporting-MTA: dns; intl.example\n\nFinal-Recipient: utf-8; j\\x{F6}rg@example.de\nAction: failed\nStatus: 5.1.1'],
      ['message/global-headers', 'Message-ID: <intl@acme.example>'],
    ]);
    const r = await dsn(raw);
    expect(r.recipients[0]?.recipient).toBe('jörg@example.de');
    expect(r.originalMessageId).toBe('<intl@acme.example>');
  });

  it('ignores recipient groups it cannot attribute (no address, x400 type, no status or action)', async () => {
    const raw = report('delivery-status', [
      [
        'message/delivery-status',
        'Reporting-MTA: dns; x.example\n\nAction: failed\nStatus: 5.1.1\n\nFinal-Recipient: x400; /C=US/O=x\nAction: failed\n\n' +
          'Final-Recipient: rfc822; nostatus@example.com\n\nFinal-Recipient: rfc822; ok@example.com\nAction: relayed\nStatus: 2.0.0',
      ],
    ]);
    expect((await dsn(raw)).recipients).toEqual([{ recipient: 'ok@example.com', action: 'relayed', status: '2.0.0' }]);
  });

  it('finds a delivery-status part even when the top level is not multipart/report, and no closing boundary', async () => {
    const raw = Buffer.from(
      'From: MAILER-DAEMON@x.example\nContent-Type: multipart/mixed; boundary=zz\n\n--zz\nContent-Type: text/plain\n\nfailed\n' +
        '--zz\nContent-Type: message/delivery-status\n\nFinal-Recipient: rfc822; a@example.com\nAction: expanded\nStatus: 2.0.0\n',
    );
    expect((await dsn(raw)).recipients).toEqual([{ recipient: 'a@example.com', action: 'expanded', status: '2.0.0' }]);
  });
});

describe('parseReport: anything else is undefined, never an exception', () => {
  it('the malformed multipart/report fixture (no usable recipient group, truncated)', async () => {
    expect(await parseReport(fixture('malformed.eml'))).toBeUndefined();
  });

  it('a qmail plain-text bounce and an out-of-office reply', async () => {
    expect(await parseReport(fixture('qmail-nonstandard.eml'))).toBeUndefined();
    expect(await parseReport(fixture('out-of-office.eml'))).toBeUndefined();
  });

  it('empty input, plain text, binary noise, a multipart without a boundary', async () => {
    expect(await parseReport(Buffer.alloc(0))).toBeUndefined();
    expect(await parseReport(Buffer.from('hello'))).toBeUndefined();
    expect(await parseReport(Buffer.from('Content-Type: multipart/report; report-type=delivery-status\n\n--x\n'))).toBeUndefined();
    for (let i = 0; i < 50; i++) expect(await parseReport(randomBytes(2048))).toBeUndefined();
  });

  it('never throws on damaged copies of real reports', async () => {
    const names = fs.readdirSync(new URL('../../fixtures/reports/', import.meta.url));
    for (const name of names) {
      const original = fixture(name);
      for (let i = 0; i < 20; i++) {
        const damaged = Buffer.from(original);
        for (let j = 0; j < 30; j++) damaged[Math.floor(Math.random() * damaged.length)] = Math.floor(Math.random() * 256);
        const cut = damaged.subarray(0, Math.floor(Math.random() * damaged.length));
        for (const raw of [damaged, cut]) {
          const out = await parseReport(raw);
          expect(out === undefined || out.kind === 'dsn' || out.kind === 'arf').toBe(true);
        }
      }
    }
  });

  it('survives deep nesting and a flood of parts', async () => {
    let nested = 'Content-Type: message/delivery-status\n\nFinal-Recipient: rfc822; deep@example.com\nAction: failed\nStatus: 5.1.1\n';
    for (let i = 0; i < 50; i++) nested = `Content-Type: multipart/mixed; boundary="b${i}"\n\n--b${i}\n${nested}\n--b${i}--\n`;
    await expect(parseReport(Buffer.from(nested))).resolves.toBeUndefined();
    const flood = `Content-Type: multipart/mixed; boundary=f\n\n${'--f\nContent-Type: text/plain\n\nx\n'.repeat(5000)}--f--\n`;
    await expect(parseReport(Buffer.from(flood))).resolves.toBeUndefined();
  });
});

describe('classifyBounce', () => {
  const r = (status: string, diagnostic?: string, action: DsnRecipient['action'] = status.startsWith('4') ? 'delayed' : 'failed'): DsnRecipient => ({
    recipient: 'x@example.com',
    action,
    status,
    ...(diagnostic ? { diagnostic } : {}),
  });

  it.each([
    ['5.1.1', undefined, 'Permanent', 'NoEmail'],
    ['5.1.10', undefined, 'Permanent', 'NoEmail'],
    ['5.1.6', undefined, 'Permanent', 'NoEmail'],
    ['5.2.2', undefined, 'Permanent', 'MailboxFull'],
    ['4.2.2', '452 4.2.2 Mailbox full', 'Transient', 'MailboxFull'],
    ['5.3.4', undefined, 'Permanent', 'MessageTooLarge'],
    ['5.2.3', undefined, 'Permanent', 'MessageTooLarge'],
    ['5.7.1', '550 5.7.1 Message rejected as spam by Content Filtering', 'Permanent', 'ContentRejected'],
    ['5.7.1', '554 5.7.1 Virus found in message', 'Permanent', 'ContentRejected'],
    ['5.7.1', '552 5.7.1 Attachment type not allowed', 'Permanent', 'AttachmentRejected'],
    ['5.7.1', '554 5.7.1 Service unavailable; Client host [198.51.100.7] blocked using zen.spamhaus.org', 'Permanent', 'Suppressed'],
    ['5.7.26', '550 5.7.26 Unauthenticated email from acme.example is not accepted due to domain DMARC policy', 'Permanent', 'Suppressed'],
    ['5.4.1', undefined, 'Permanent', 'General'],
    ['5.0.0', '550 5.1.1 User unknown', 'Permanent', 'NoEmail'],
    ['5.0.0', '550 Requested action not taken', 'Permanent', 'General'],
    ['5.0.0', '450 4.2.2 Mailbox full', 'Permanent', 'General'],
    ['4.4.1', undefined, 'Transient', 'General'],
    ['4.0.0', '421 4.7.0 Try again later', 'Transient', 'General'],
    ['4.7.1', '451 4.7.1 Message deferred: spam content suspected', 'Transient', 'ContentRejected'],
  ] as const)('%s %s -> %s/%s', (status, diagnostic, type, subType) => {
    expect(classifyBounce(r(status, diagnostic))).toMatchObject({ type, subType });
  });

  it('the message is the diagnostic, or the status and its meaning', () => {
    expect(classifyBounce(r('5.1.1', '550 5.1.1 nope')).message).toBe('550 5.1.1 nope');
    expect(classifyBounce(r('5.1.1')).message).toBe('5.1.1 Bad destination mailbox address');
    expect(classifyBounce(r('4.4.7')).message).toBe('4.4.7 Delivery time expired');
    expect(classifyBounce(r('5.9.9')).message).toBe('5.9.9');
  });

  it('a failed action without a 4.x.x status is permanent', () => {
    expect(classifyBounce(r('2.0.0', undefined, 'failed')).type).toBe('Permanent');
    expect(classifyBounce(r('4.0.0', undefined, 'failed')).type).toBe('Transient');
  });
});

/** A multipart/report with the given parts: [content type, body, transfer encoding?]. */
function report(reportType: string, parts: Array<[string, string, string?]>): Buffer {
  const boundary = 'test-boundary-1';
  const body = parts
    .map(([type, content, encoding]) => `--${boundary}\nContent-Type: ${type}\n${encoding ? `Content-Transfer-Encoding: ${encoding}\n` : ''}\n${content}\n`)
    .join('');
  return Buffer.from(
    `From: MAILER-DAEMON@test.example\nSubject: report\nMIME-Version: 1.0\n` +
      `Content-Type: multipart/report; report-type=${reportType}; boundary="${boundary}"\n\n${body}--${boundary}--\n`,
  );
}
