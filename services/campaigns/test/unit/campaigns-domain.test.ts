import { describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { checkBatching, checkCampaignInput, hasUnsubscribePlaceholder, resumedStatus, senderDomain } from '../../src/domain/campaign.js';
import { counterEffectsOf } from '../../src/domain/counters.js';
import { renderCampaignText } from '../../src/domain/render.js';
import { resolveSchedule, zoneOffsetMinutes } from '../../src/domain/schedule.js';
import { createUnsubscribeToken, unsubscribeUrl, verifyUnsubscribeToken } from '../../src/domain/unsubscribe-token.js';
import { InvalidArgumentError, toGrpcError } from '@mailfleet/kit';
import { chunkIdempotencyKey, permanentFailureReason, refusedRecipientIndex, retryDelay } from '../../src/workers/batch-sender.js';

const NOW = new Date('2026-03-10T15:30:00.000Z');
const at = (input: string, zone = 'UTC') => {
  const r = resolveSchedule(input, NOW, zone);
  return r.ok ? r.at.toISOString() : `error: ${r.message}`;
};

describe('schedule resolution', () => {
  it('reads natural language relative to now, in UTC by default', () => {
    expect(at('in 2 hours')).toBe('2026-03-10T17:30:00.000Z');
    expect(at('tomorrow at 9am')).toBe('2026-03-11T09:00:00.000Z');
    expect(at('in 30 minutes')).toBe('2026-03-10T16:00:00.000Z');
  });
  it('reads phrases in the configured time zone', () => {
    expect(at('tomorrow at 9am', 'Europe/Paris')).toBe('2026-03-11T08:00:00.000Z');
    expect(at('tomorrow at 9am', 'America/New_York')).toBe('2026-03-11T13:00:00.000Z');
    expect(zoneOffsetMinutes('Asia/Kolkata', NOW)).toBe(330);
    // Paris moves to summer time on 29 March: a phrase landing after it uses +02:00.
    expect(at('April 1 at 9am', 'Europe/Paris')).toBe('2026-04-01T07:00:00.000Z');
  });
  it('takes ISO 8601, with an offset as given and without one in the zone', () => {
    expect(at('2026-04-01T10:00:00Z')).toBe('2026-04-01T10:00:00.000Z');
    expect(at('2026-04-01T10:00:00+02:00')).toBe('2026-04-01T08:00:00.000Z');
    expect(at('2026-04-01T10:00:00', 'Europe/Paris')).toBe('2026-04-01T08:00:00.000Z');
  });
  it('refuses the unparseable and the past', () => {
    expect(at('whenever you like')).toMatch(/^error: .*neither an ISO 8601/);
    expect(at('yesterday at 9am')).toMatch(/^error: .*in the past/);
    expect(at('2020-01-01T00:00:00Z')).toMatch(/^error: .*in the past/);
    expect(at('   ')).toMatch(/^error/);
  });
});

describe('campaign input', () => {
  const base = { name: 'N', from: 'a@x.com', subject: 'S', contactBookId: 'b', html: '<a href="{{service_unsubscribe_url}}">u</a>' };
  it('requires the unsubscribe placeholder, spaces inside the braces tolerated, in html or content', () => {
    expect(hasUnsubscribePlaceholder('x {{ service_unsubscribe_url }} y')).toBe(true);
    expect(hasUnsubscribePlaceholder('x {{service_unsubscribe}} y')).toBe(false);
    expect(checkCampaignInput(base)).toBeUndefined();
    expect(checkCampaignInput({ ...base, html: undefined, content: 'bye: {{service_unsubscribe_url}}' })).toBeUndefined();
    expect(checkCampaignInput({ ...base, html: '<p>hi</p>' })?.message).toContain('{{service_unsubscribe_url}}');
    expect(checkCampaignInput({ ...base, html: undefined })?.message).toBe('html or content is required');
  });
  it('bounds batch size and window', () => {
    expect(checkBatching(1, 0)).toBeUndefined();
    expect(checkBatching(100_000, 10_080)).toBeUndefined();
    expect(checkBatching(0, undefined)?.message).toMatch(/batchSize/);
    expect(checkBatching(100_001, undefined)?.message).toMatch(/batchSize/);
    expect(checkBatching(undefined, -1)?.message).toMatch(/batchWindowMinutes/);
  });
  it('finds the From domain', () => {
    expect(senderDomain('News <news@Mail.Example.com>')).toBe('mail.example.com');
    expect(senderDomain('a@b.io')).toBe('b.io');
    expect(senderDomain('nobody')).toBeUndefined();
  });
});

describe('rendering', () => {
  const contact = { email: 'ann@x.com', firstName: 'Ann <b>', lastName: undefined, properties: { plan: 'pro & more' } };
  it('replaces contact placeholders, escaping in HTML, missing values empty', () => {
    expect(renderCampaignText('<p>Hi {{firstName}} {{ lastName }} ({{email}}), {{properties.plan}} {{properties.none}} <a href="{{service_unsubscribe_url}}">x</a> {{other}}</p>', contact, 'https://u/?a=1&b=2', true))
      .toBe('<p>Hi Ann &lt;b&gt;  (ann@x.com), pro &amp; more  <a href="https://u/?a=1&amp;b=2">x</a> {{other}}</p>');
    expect(renderCampaignText('Hi {{firstName}}: {{service_unsubscribe_url}}', contact, 'https://u/?a=1&b=2', false)).toBe('Hi Ann <b>: https://u/?a=1&b=2');
  });
});

describe('unsubscribe tokens', () => {
  const key = 'k'.repeat(32);
  it('round-trips and refuses forgeries', () => {
    const t = createUnsubscribeToken(key, { teamId: 't1', campaignId: 'c1', contactId: 'p1' });
    expect(verifyUnsubscribeToken(key, t)).toEqual({ teamId: 't1', campaignId: 'c1', contactId: 'p1' });
    expect(verifyUnsubscribeToken('x'.repeat(32), t)).toBeUndefined();
    const forged = `${Buffer.from(JSON.stringify(['t2', 'c1', 'p1'])).toString('base64url')}.${t.split('.')[1]}`;
    expect(verifyUnsubscribeToken(key, forged)).toBeUndefined();
    expect(verifyUnsubscribeToken(key, 'garbage')).toBeUndefined();
    expect(unsubscribeUrl('https://mail.example.com/', t)).toBe(`https://mail.example.com/v1/campaigns/unsubscribe?token=${t}`);
  });
});

describe('counters and keys', () => {
  it('maps email events with a campaign to counters, opens and clicks once per email', () => {
    const ev = (type: string, data: Record<string, unknown>) => counterEffectsOf({ id: 'ev1', type, data: { id: 'em1', campaignId: 'c1', ...data } });
    expect(ev('email.sent', {})).toEqual([{ campaignId: 'c1', counters: ['sent'], onceKey: 'sent:em1' }]);
    expect(ev('email.opened', {})[0]?.onceKey).toBe('opened:em1');
    expect(ev('email.clicked', {})[0]?.onceKey).toBe('clicked:em1');
    // A bounce counts as sent too, under the same key as the email's own email.sent (never twice).
    expect(ev('email.bounced', { bounce: { type: 'Permanent' } })).toEqual([
      { campaignId: 'c1', counters: ['bounced', 'hardBounced'], onceKey: 'ev1' },
      { campaignId: 'c1', counters: ['sent'], onceKey: 'sent:em1' },
    ]);
    expect(ev('email.bounced', { bounce: { type: 'Transient' } })[0]?.counters).toEqual(['bounced']);
    expect(ev('email.complained', {})).toEqual([{ campaignId: 'c1', counters: ['complained'], onceKey: 'ev1' }]);
    expect(ev('email.queued', {})).toEqual([]);
    expect(counterEffectsOf({ id: 'e', type: 'email.sent', data: { id: 'em1' } })).toEqual([]);
    expect(chunkIdempotencyKey('c1', 2, 3)).toBe('campaign:c1:batch:2:chunk:3');
  });
});

describe('campaigns that cannot send', () => {
  const input = { name: 'n', from: 'a@b.com', subject: 's', contactBookId: 'b', html: '{{service_unsubscribe_url}}' };

  it('refuses Reply-To, Cc and Bcc entries that are not addresses, naming the field', () => {
    expect(checkCampaignInput({ ...input, replyTo: ['not an address'] })).toMatchObject({ field: 'replyTo', message: expect.stringMatching(/^replyTo: /) });
    expect(checkCampaignInput({ ...input, cc: ['a@b.com', 'c@'] })).toMatchObject({ field: 'cc' });
    expect(checkCampaignInput({ ...input, bcc: [''] })).toMatchObject({ field: 'bcc' });
    expect(checkCampaignInput({ ...input, replyTo: ['R <r@example.org>'], cc: ['c@example.org, d@example.org'], bcc: [] })).toBeUndefined();
  });

  it('a resume before the scheduled time waits for it again; after it, sends', () => {
    const now = new Date('2026-03-10T15:30:00Z');
    expect(resumedStatus(new Date('2026-03-10T17:30:00Z'), now)).toBe('SCHEDULED');
    expect(resumedStatus(new Date('2026-03-10T15:00:00Z'), now)).toBe('SENDING');
    expect(resumedStatus(now, now)).toBe('SENDING');
    expect(resumedStatus(null, now)).toBe('SENDING');
  });

  it('tells permanent upstream refusals from transient failures', () => {
    const err = (code: number, details: string) => Object.assign(new Error(details), { code, details, metadata: {} });
    expect(permanentFailureReason(err(status.INVALID_ARGUMENT, 'emails[0]: replyTo: bad'))).toBe('emails[0]: replyTo: bad');
    expect(permanentFailureReason(err(status.FAILED_PRECONDITION, 'x'))).toBe('x');
    expect(permanentFailureReason(err(status.NOT_FOUND, 'book not found'))).toBe('book not found');
    expect(permanentFailureReason(err(status.UNAVAILABLE, 'down'))).toBeUndefined();
    expect(permanentFailureReason(err(status.DEADLINE_EXCEEDED, 'slow'))).toBeUndefined();
    expect(permanentFailureReason(new Error('mongo went away'))).toBeUndefined();
  });

  it('recognises a chunk refused for one recipient\'s own address, and only that', () => {
    const remote = (e: InvalidArgumentError) => Object.assign(new Error(e.message), toGrpcError(e));
    expect(refusedRecipientIndex(remote(new InvalidArgumentError('emails[3]: to: bad', { details: { index: 3, field: 'to' } })))).toBe(3);
    expect(refusedRecipientIndex(remote(new InvalidArgumentError('emails[0]: replyTo: bad', { details: { index: 0, field: 'replyTo' } })))).toBeUndefined();
    expect(refusedRecipientIndex(remote(new InvalidArgumentError('emails[0]: from: not verified', { details: { index: 0, field: 'from' } })))).toBeUndefined();
    expect(refusedRecipientIndex(new Error('boom'))).toBeUndefined();
  });

  it('backs off transient failures, doubling up to a bound', () => {
    expect([1, 2, 3, 4].map((n) => retryDelay(5000, n))).toEqual([5000, 10_000, 20_000, 40_000]);
    expect(retryDelay(5000, 50)).toBe(300_000);
  });
});
