import { describe, expect, it } from 'vitest';
import { resultOfError, resultOfSuccess, retryDelayMs } from '../../src/domain/delivery.js';
import { emailEventData } from '../../src/domain/event-data.js';
import { advanceStatus, eventTypeOf } from '../../src/domain/status.js';
import { reportMutation } from '../../src/inbound/report-handler.js';
import type { EmailRecord } from '../../src/repositories/emails.repository.js';
import { failMutation, outcomeMutation, suppressMutation, whyNotSendable, type OutcomeContext } from '../../src/sending/outcomes.js';

const now = new Date('2030-01-01T00:00:00Z');

function email(over: Partial<EmailRecord> = {}): EmailRecord {
  return {
    id: 'em_1', teamId: 'team_1', domainId: 'dom_1', from: 'Shop <shop@x.com>', fromAddress: 'shop@x.com', to: ['a@y.com', 'b@y.com'],
    toAddresses: ['a@y.com', 'b@y.com'], cc: [], bcc: [], replyTo: [], subject: 'Hi', hasAttachments: false,
    messageId: '<em_1@x.com>', references: [], latestStatus: 'QUEUED', events: [], sendState: 'PENDING',
    recipients: { pending: ['a@y.com', 'b@y.com'], accepted: [], bounced: [], suppressed: [], failed: [] },
    attempts: 0, nextAttemptAt: now, suppressionCheckedAt: now,
    reportKeys: [], trackingEventCount: 0, outbox: [], version: 2, createdAt: now, updatedAt: now, ...over,
  };
}

const ctx: OutcomeContext = {
  attempt: 1, now, maxAttempts: 3, retryDelayMs: (n) => n * 1000,
  classify: (r) => ({ type: 'Permanent', subType: 'NoEmail', message: r.response }),
};

describe('status', () => {
  it('never goes back: out-of-order events keep the most advanced status', () => {
    expect(advanceStatus('DELIVERED', 'SENT')).toBe('DELIVERED');
    expect(advanceStatus('CLICKED', 'OPENED')).toBe('CLICKED');
    expect(advanceStatus('QUEUED', 'DELIVERY_DELAYED')).toBe('DELIVERY_DELAYED');
    expect(advanceStatus('DELIVERY_DELAYED', 'SENT')).toBe('SENT');
    expect(advanceStatus('DELIVERY_DELAYED', 'FAILED')).toBe('FAILED');
    expect(advanceStatus('SENT', 'FAILED')).toBe('SENT');
    expect(advanceStatus('DELIVERED', 'BOUNCED')).toBe('BOUNCED');
    expect(eventTypeOf('DELIVERY_DELAYED')).toBe('email.delivery_delayed');
  });
  it('builds the SPEC 6.3 payload', () => {
    const e = email({ campaignId: 'cmp_1', templateId: 'tpl_1', metadata: { k: 'v' } });
    expect(emailEventData(e, 'BOUNCED', now, { to: ['a@y.com'], bounce: { type: 'Permanent', subType: 'NoEmail', message: '550' } })).toEqual({
      id: 'em_1', status: 'BOUNCED', from: 'Shop <shop@x.com>', to: ['a@y.com'], occurredAt: now.toISOString(), subject: 'Hi',
      campaignId: 'cmp_1', domainId: 'dom_1', templateId: 'tpl_1', metadata: { k: 'v' }, bounce: { type: 'Permanent', subType: 'NoEmail', message: '550' },
    });
  });
});

describe('reading nodemailer results', () => {
  it('separates accepted, refused (5xx) and deferred (4xx) recipients', () => {
    const r = resultOfSuccess({
      accepted: ['a@y.com'], response: '250 ok',
      rejectedErrors: [{ recipient: 'B@y.com', responseCode: 550, response: '550 5.1.1 no such user' }, { recipient: 'c@y.com', responseCode: 451, response: '451 later' }],
    });
    expect(r).toEqual({
      kind: 'accepted', accepted: ['a@y.com'], response: '250 ok',
      refused: [{ recipient: 'b@y.com', responseCode: 550, response: '550 5.1.1 no such user' }],
      deferred: [{ recipient: 'c@y.com', responseCode: 451, response: '451 later' }],
    });
  });
  it('tells recipient refusals, message rejections and transient faults apart', () => {
    expect(resultOfError({ code: 'EENVELOPE', command: 'RCPT TO', rejectedErrors: [{ recipient: 'a@y.com', responseCode: 550, response: '550 x' }] }).kind).toBe('recipients-refused');
    expect(resultOfError({ code: 'EMESSAGE', command: 'DATA', responseCode: 554, response: '554 spam' })).toEqual({ kind: 'rejected', responseCode: 554, message: '554 spam' });
    expect(resultOfError({ code: 'EENVELOPE', command: 'MAIL FROM', responseCode: 451, response: '451 try later' }).kind).toBe('transient');
    expect(resultOfError({ code: 'ECONNECTION', message: 'connect ECONNREFUSED' })).toEqual({ kind: 'transient', message: 'connect ECONNREFUSED' });
  });
  it('backs off exponentially with a cap and bounded jitter', () => {
    expect(retryDelayMs(1, 1000, 60_000, () => 0)).toBe(1000);
    expect(retryDelayMs(3, 1000, 60_000, () => 0)).toBe(4000);
    expect(retryDelayMs(20, 1000, 60_000, () => 0)).toBe(60_000);
    expect(retryDelayMs(1, 1000, 60_000, () => 1)).toBe(1200);
  });
});

describe('attempt outcomes', () => {
  it('marks the taken recipients sent, bounces the refused ones and finishes', () => {
    const m = outcomeMutation(email(), { kind: 'accepted', accepted: ['a@y.com'], refused: [{ recipient: 'b@y.com', responseCode: 550, response: '550 unknown' }], deferred: [], response: '250 queued' }, ctx)!;
    expect(m.events?.map((e) => e.status)).toEqual(['SENT', 'BOUNCED']);
    expect(m.events?.[1]?.extras).toMatchObject({ to: ['b@y.com'], bounce: { type: 'Permanent', subType: 'NoEmail', message: '550 unknown' } });
    expect(m.set).toMatchObject({ sendState: 'DONE', 'recipients.pending': [], 'recipients.accepted': ['a@y.com'], 'recipients.bounced': ['b@y.com'], sentAt: now, bouncedEmail: 'b@y.com', attempts: 1 });
    expect(m.unset).toEqual(['nextAttemptAt']);
  });
  it('retries deferred recipients with backoff and fails them once attempts run out', () => {
    const deferred = { kind: 'accepted' as const, accepted: ['a@y.com'], refused: [], deferred: [{ recipient: 'b@y.com', responseCode: 451, response: '451 greylisted' }], response: '250' };
    const m = outcomeMutation(email(), deferred, { ...ctx, attempt: 2 })!;
    expect(m.events?.map((e) => e.status)).toEqual(['SENT', 'DELIVERY_DELAYED']);
    expect(m.set).toMatchObject({ sendState: 'PENDING', 'recipients.pending': ['b@y.com'], nextAttemptAt: new Date(now.getTime() + 2000) });
    const last = outcomeMutation(email(), deferred, { ...ctx, attempt: 3 })!;
    expect(last.events?.map((e) => e.status)).toEqual(['SENT', 'FAILED']);
    expect(last.set).toMatchObject({ sendState: 'DONE', 'recipients.failed': ['b@y.com'] });
  });
  it('retries a relay outage, rejects on a message-level 5xx', () => {
    const t = outcomeMutation(email(), { kind: 'transient', message: 'ECONNREFUSED' }, ctx)!;
    expect(t.events?.map((e) => e.status)).toEqual(['DELIVERY_DELAYED']);
    expect(t.set).toMatchObject({ sendState: 'PENDING', 'recipients.pending': ['a@y.com', 'b@y.com'] });
    const r = outcomeMutation(email(), { kind: 'rejected', responseCode: 554, message: '554 content refused' }, ctx)!;
    expect(r.events?.map((e) => e.status)).toEqual(['REJECTED']);
    expect(r.set).toMatchObject({ sendState: 'DONE', 'recipients.failed': ['a@y.com', 'b@y.com'] });
  });
  it('does nothing once the email is decided (a delivery report or a cancel got there first)', () => {
    const result = { kind: 'transient' as const, message: 'x' };
    expect(outcomeMutation(email({ sendState: 'DONE' }), result, ctx)).toBeNull();
  });
  it('tells a claimed entry whose email is done or not due yet', () => {
    expect(whyNotSendable(email(), now)).toBeUndefined();
    expect(whyNotSendable(email({ sendState: 'DONE' }), now)).toBe('done');
    expect(whyNotSendable(email({ nextAttemptAt: new Date(now.getTime() + 1) }), now)).toBe('not-due');
  });
  it('suppresses recipients found suppressed at send time', () => {
    const m = suppressMutation(email(), new Set(['a@y.com']), now)!;
    expect(m.events?.[0]).toMatchObject({ status: 'SUPPRESSED', extras: { to: ['a@y.com'] } });
    expect(m.set).toMatchObject({ 'recipients.pending': ['b@y.com'], 'recipients.suppressed': ['a@y.com'] });
    expect(suppressMutation(email(), new Set(), now)).toBeNull();
    const all = suppressMutation(email(), new Set(['a@y.com', 'b@y.com']), now)!;
    expect(all.set).toMatchObject({ sendState: 'DONE' });
  });
  it('fails an email whose domain went away, once', () => {
    expect(failMutation(email(), 'gone')?.events?.[0]?.status).toBe('FAILED');
    expect(failMutation(email({ sendState: 'DONE' }), 'gone')).toBeNull();
  });
});

describe('delivery reports', () => {
  const classify = () => ({ type: 'Permanent' as const, subType: 'NoEmail', message: '550 5.1.1 unknown' });
  const sent = email({ sendState: 'DONE', sentAt: now, recipients: { pending: [], accepted: ['a@y.com', 'b@y.com'], bounced: [], suppressed: [], failed: [] } });
  it('maps DSN actions to DELIVERED, BOUNCED and DELIVERY_DELAYED', () => {
    const m = reportMutation(sent, {
      kind: 'dsn', recipients: [
        { recipient: 'a@y.com', action: 'delivered', status: '2.0.0' },
        { recipient: 'B@y.com', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 unknown' },
      ],
    }, 'k1', classify, now)!;
    expect(m.events?.map((e) => [e.status, e.extras?.to])).toEqual([['DELIVERED', ['a@y.com']], ['BOUNCED', ['b@y.com']]]);
    expect(m.events?.[1]?.extras?.bounce).toEqual(classify());
    expect(m.set).toMatchObject({ bouncedEmail: 'b@y.com' });
    expect(m.addReportKey).toBe('k1');
    const d = reportMutation(sent, { kind: 'dsn', recipients: [{ recipient: 'a@y.com', action: 'delayed', status: '4.4.1', diagnostic: 'timeout' }] }, 'k2', classify, now)!;
    expect(d.events?.[0]?.status).toBe('DELIVERY_DELAYED');
  });
  it('maps a feedback report to COMPLAINED for the reported recipient', () => {
    const m = reportMutation(sent, { kind: 'arf', feedbackType: 'abuse', originalRecipient: 'a@y.com', userAgent: 'Yahoo' }, 'k3', classify, now)!;
    expect(m.events).toEqual([{ status: 'COMPLAINED', extras: { to: ['a@y.com'], details: { feedbackType: 'abuse', userAgent: 'Yahoo' } } }]);
    expect(m.set).toMatchObject({ complainedEmail: 'a@y.com' });
  });
  it('applies a report once', () => {
    expect(reportMutation({ ...sent, reportKeys: ['k1'] }, { kind: 'arf', feedbackType: 'abuse' }, 'k1', classify, now)).toBeNull();
  });
  it('takes a report about a still-pending recipient as proof the relay accepted it (no second send)', () => {
    const crashed = email();
    const m = reportMutation(crashed, { kind: 'dsn', recipients: [{ recipient: 'a@y.com', action: 'delivered', status: '2.0.0' }, { recipient: 'b@y.com', action: 'delivered', status: '2.0.0' }] }, 'k4', classify, now)!;
    expect(m.events?.map((e) => e.status)).toEqual(['SENT', 'DELIVERED', 'DELIVERED']);
    expect(m.set).toMatchObject({ sendState: 'DONE', 'recipients.pending': [], 'recipients.accepted': ['a@y.com', 'b@y.com'], sentAt: now });
    expect(m.unset).toEqual(['nextAttemptAt']);
  });
});
