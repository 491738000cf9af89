import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PUBLIC_EVENT_TYPES, isPublicEventType, validateEventTypes } from '../../src/domain/event-types.js';
import { serializePayload, testEnvelope } from '../../src/domain/payload.js';
import { DEFAULT_RETRY_POLICY, decideOutcome, retryDelayMs } from '../../src/domain/retry-policy.js';
import { generateSecret, maskSecret, validateSecret } from '../../src/domain/secrets.js';
import { deliveryHeaders, signBody } from '../../src/domain/signature.js';
import { parseWebhookUrl } from '../../src/domain/urls.js';

describe('event types (SPEC 6.2)', () => {
  it('are exactly the public types of the SPEC, webhook.test excluded', () => {
    expect(PUBLIC_EVENT_TYPES).toHaveLength(20);
    expect(new Set(PUBLIC_EVENT_TYPES).size).toBe(20);
    for (const t of ['email.delivery_delayed', 'email.rendering_failure', 'contact.deleted', 'domain.verified']) expect(isPublicEventType(t)).toBe(true);
    for (const t of ['webhook.test', 'key.revoked', 'contact.unsubscribed', 'email.unknown', '']) expect(isPublicEventType(t)).toBe(false);
  });

  it('validates a subscription: at least one, all public, duplicates dropped', () => {
    expect(validateEventTypes(['email.sent', 'domain.created', 'email.sent'])).toEqual(['email.sent', 'domain.created']);
    expect(() => validateEventTypes([])).toThrow(/at least one/);
    expect(() => validateEventTypes(['webhook.test'])).toThrow(/cannot be subscribed/);
    expect(() => validateEventTypes(['email.sent', 'key.revoked'])).toThrow(/Unknown event type "key.revoked"/);
    expect(() => validateEventTypes(['Email.Sent'])).toThrow(/Unknown event type/);
  });
});

describe('webhook URLs', () => {
  it('accepts HTTPS and normalises', () => {
    expect(parseWebhookUrl(' https://Hooks.Example.com/in?x=1#frag ')).toEqual({
      url: 'https://hooks.example.com/in?x=1', host: 'hooks.example.com', port: 443, path: '/in?x=1', isIpLiteral: false,
    });
    expect(parseWebhookUrl('https://127.0.0.1:8443/')).toMatchObject({ host: '127.0.0.1', port: 8443, isIpLiteral: true });
    expect(parseWebhookUrl('https://[::1]:9000/h')).toMatchObject({ host: '::1', port: 9000, path: '/h', isIpLiteral: true });
  });

  it.each([
    ['http://example.com/hook', /HTTPS/], ['ftp://example.com', /HTTPS/], ['example.com/hook', /absolute/], ['', /required/],
    ['https://user:pass@example.com/', /credentials/], [`https://example.com/${'a'.repeat(2100)}`, /at most/],
  ])('refuses %s', (url, message) => {
    expect(() => parseWebhookUrl(url)).toThrow(message);
  });
});

describe('secrets', () => {
  it('generates whsec_ secrets of 32 random characters', () => {
    const a = generateSecret();
    expect(a).toMatch(/^whsec_[0-9A-Za-z]{32}$/);
    expect(generateSecret()).not.toBe(a);
  });

  it('masks all but the prefix and the last four characters', () => {
    expect(maskSecret('whsec_abcdefghijklmnopqrstuvwxyz123456')).toBe('whsec_****3456');
    expect(maskSecret('my-own-secret-value-1234')).toBe('****1234');
  });

  it('needs 16 to 256 characters', () => {
    expect(validateSecret('0123456789abcdef')).toBe('0123456789abcdef');
    expect(() => validateSecret('0123456789abcde')).toThrow(/at least 16/);
    expect(() => validateSecret('x'.repeat(257))).toThrow(/at most 256/);
    expect(() => validateSecret('0123456789abcdef\n')).toThrow(/control/);
  });
});

describe('signature (SPEC 6.4)', () => {
  it('is sha256= and the lowercase hex HMAC of the exact body', () => {
    const body = '{"id":"evt_1","type":"email.sent","createdAt":"2026-01-01T00:00:00.000Z","data":{"a":"é"}}';
    const expected = createHmac('sha256', 'whsec_secret_secret').update(Buffer.from(body, 'utf8')).digest('hex');
    expect(signBody('whsec_secret_secret', body)).toBe(`sha256=${expected}`);
    expect(expected).toMatch(/^[0-9a-f]{64}$/);
    // Known vector (RFC 4231 style check against a fixed key and message).
    expect(signBody('key', 'The quick brown fox jumps over the lazy dog')).toBe('sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8');
    expect(deliveryHeaders('key', body, { id: 'evt_1', type: 'email.sent' })).toEqual({
      'X-Service-Signature': `sha256=${createHmac('sha256', 'key').update(body).digest('hex')}`, 'X-Service-Event-Id': 'evt_1', 'X-Service-Event-Type': 'email.sent',
    });
  });
});

describe('payload (SPEC 6.1)', () => {
  it('is the envelope without teamId, in a fixed key order', () => {
    const body = serializePayload({ id: 'evt_1', type: 'domain.created', createdAt: '2026-01-01T00:00:00.000Z', data: { id: 'dom_1' }, teamId: 't' } as never);
    expect(body).toBe('{"id":"evt_1","type":"domain.created","createdAt":"2026-01-01T00:00:00.000Z","data":{"id":"dom_1"}}');
    const test = testEnvelope('evt_2', new Date('2026-01-02T00:00:00.000Z'));
    expect(test).toMatchObject({ id: 'evt_2', type: 'webhook.test', createdAt: '2026-01-02T00:00:00.000Z' });
    expect(typeof (test.data as { message: unknown }).message).toBe('string');
  });
});

describe('retry policy', () => {
  it('doubles the delay with +-20 % jitter, capped', () => {
    const p = { baseDelayMs: 1_000, maxDelayMs: 5_000 };
    expect(retryDelayMs(1, p, 0.5)).toBe(1_000);
    expect(retryDelayMs(2, p, 0.5)).toBe(2_000);
    expect(retryDelayMs(3, p, 0)).toBe(3_200);
    expect(retryDelayMs(3, p, 0.999999)).toBe(4_800);
    expect(retryDelayMs(10, p, 0.5)).toBe(5_000);
    expect(retryDelayMs(1000, p, 0.5)).toBe(5_000);
  });

  it('defaults to 6 attempts over about 10 minutes', () => {
    const total = [1, 2, 3, 4, 5].reduce((sum, n) => sum + retryDelayMs(n, DEFAULT_RETRY_POLICY, 0.5), 0);
    expect(DEFAULT_RETRY_POLICY.maxAttempts).toBe(6);
    expect(total).toBeGreaterThan(9 * 60_000);
    expect(total).toBeLessThan(11 * 60_000);
    expect(DEFAULT_RETRY_POLICY.failureThreshold).toBe(10);
  });

  const policy = { ...DEFAULT_RETRY_POLICY, maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 1_000 };
  const now = new Date('2026-01-01T00:00:00.000Z');

  it('retries a failed scheduled attempt until the last, then fails the event', () => {
    expect(decideOutcome({ attemptsBefore: 0, scheduled: true, result: { ok: false }, policy, now, random: 0.5 }))
      .toEqual({ status: 'PENDING', attempt: 1, nextAttemptAt: new Date(now.getTime() + 100), eventFailed: false });
    expect(decideOutcome({ attemptsBefore: 1, scheduled: true, result: { ok: false }, policy, now, random: 0.5 }))
      .toEqual({ status: 'PENDING', attempt: 2, nextAttemptAt: new Date(now.getTime() + 200), eventFailed: false });
    expect(decideOutcome({ attemptsBefore: 2, scheduled: true, result: { ok: false }, policy, now }))
      .toEqual({ status: 'FAILED', attempt: 3, nextAttemptAt: null, eventFailed: true });
  });

  it('a success ends the delivery; a manual retry is one attempt that never counts the event twice', () => {
    expect(decideOutcome({ attemptsBefore: 2, scheduled: true, result: { ok: true }, policy, now }))
      .toEqual({ status: 'SUCCESS', attempt: 3, nextAttemptAt: null, eventFailed: false });
    expect(decideOutcome({ attemptsBefore: 3, scheduled: false, result: { ok: false }, policy, now }))
      .toEqual({ status: 'FAILED', attempt: 4, nextAttemptAt: null, eventFailed: false });
    expect(decideOutcome({ attemptsBefore: 3, scheduled: false, result: { ok: true }, policy, now }))
      .toEqual({ status: 'SUCCESS', attempt: 4, nextAttemptAt: null, eventFailed: false });
  });
});
