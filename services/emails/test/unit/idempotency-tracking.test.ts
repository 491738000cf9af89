import { describe, expect, it } from 'vitest';
import { bodyHash, canonicalJson, decideIdempotency, type IdempotencyState } from '../../src/domain/idempotency.js';
import {
  addOpenPixel, createTrackingToken, deriveKey, openPixelUrl, platformOf, rewriteLinks, verifyTrackingToken,
} from '../../src/domain/tracking.js';

describe('canonical body hash', () => {
  it('ignores key order and undefined members, not values', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: undefined } })).toBe('{"a":{"d":[1,{"x":1,"y":2}]},"b":1}');
    expect(bodyHash('single', { to: ['a@x.com'], from: 'f@x.com' })).toBe(bodyHash('single', { from: 'f@x.com', to: ['a@x.com'] }));
    expect(bodyHash('single', { to: ['a@x.com'] })).not.toBe(bodyHash('single', { to: ['b@x.com'] }));
    expect(bodyHash('single', [{ a: 1 }])).not.toBe(bodyHash('batch', [{ a: 1 }]));
    expect(canonicalJson({ f: Buffer.from('hi'), d: new Date('2030-01-01T00:00:00Z') })).toBe('{"d":"2030-01-01T00:00:00.000Z","f":"aGk="}');
  });
});

describe('idempotency decisions', () => {
  const now = new Date('2030-01-01T12:00:00Z');
  const entry = (over: Partial<IdempotencyState>): IdempotencyState => ({
    state: 'COMPLETED', bodyHash: 'h1', claimedAt: new Date(now.getTime() - 1_000), expiresAt: new Date(now.getTime() + 86_400_000), emailIds: ['em_1'], ...over,
  });
  it('replays a finished request with the same body', () => {
    expect(decideIdempotency(entry({}), 'h1', now, 60_000)).toEqual({ kind: 'replay', emailIds: ['em_1'] });
  });
  it('refuses another body, finished or not', () => {
    expect(decideIdempotency(entry({}), 'h2', now, 60_000).kind).toBe('mismatch');
    expect(decideIdempotency(entry({ state: 'PROCESSING' }), 'h2', now, 60_000).kind).toBe('mismatch');
  });
  it('says in progress while the first runs, and lets a stale claim be taken over', () => {
    expect(decideIdempotency(entry({ state: 'PROCESSING' }), 'h1', now, 60_000).kind).toBe('in-progress');
    expect(decideIdempotency(entry({ state: 'PROCESSING', claimedAt: new Date(now.getTime() - 61_000) }), 'h1', now, 60_000).kind).toBe('take-over');
  });
  it('frees the key once the entry expired (whatever the body)', () => {
    expect(decideIdempotency(entry({ expiresAt: now }), 'h2', now, 60_000).kind).toBe('expired');
  });
});

describe('tracking tokens', () => {
  const key = deriveKey('a'.repeat(64), 'tracking');
  it('round-trips opens and clicks', () => {
    const open = createTrackingToken(key, { emailId: 'em_1', kind: 'open' });
    expect(verifyTrackingToken(key, open, 'open')).toEqual({ emailId: 'em_1', kind: 'open', url: undefined });
    const click = createTrackingToken(key, { emailId: 'em_1', kind: 'click', url: 'https://x.example/a?b=1&c=2' });
    expect(verifyTrackingToken(key, click, 'click')).toEqual({ emailId: 'em_1', kind: 'click', url: 'https://x.example/a?b=1&c=2' });
    expect(click).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/);
  });
  it('refuses forged, altered, cross-kind and other-key tokens', () => {
    const click = createTrackingToken(key, { emailId: 'em_1', kind: 'click', url: 'https://good.example/' });
    const [payload, sig] = click.split('.') as [string, string];
    const evil = Buffer.from(JSON.stringify({ e: 'em_1', k: 'c', u: 'https://evil.example/' })).toString('base64url');
    expect(verifyTrackingToken(key, `${evil}.${sig}`, 'click')).toBeUndefined();
    expect(verifyTrackingToken(key, `${payload}.${sig.slice(0, -1)}A`, 'click')).toBeUndefined();
    expect(verifyTrackingToken(key, click, 'open')).toBeUndefined();
    expect(verifyTrackingToken(deriveKey('b'.repeat(64), 'tracking'), click, 'click')).toBeUndefined();
    expect(verifyTrackingToken(key, 'garbage', 'click')).toBeUndefined();
    const js = createTrackingToken(key, { emailId: 'em_1', kind: 'click', url: 'javascript:alert(1)' });
    expect(verifyTrackingToken(key, js, 'click')).toBeUndefined();
  });
  it('derives distinct keys per purpose', () => {
    expect(deriveKey('k'.repeat(32), 'tracking')).not.toBe(deriveKey('k'.repeat(32), 'verp'));
  });
});

describe('link rewriting and the pixel', () => {
  const key = deriveKey('a'.repeat(64), 'tracking');
  const opts = { publicUrl: 'https://t.example.com/', key, emailId: 'em_1' };
  it('rewrites http(s) anchors (any quoting, entities decoded) and leaves the rest', () => {
    const html = `<a href="https://shop.example/a?x=1&amp;y=2">A</a> <A class=x HREF='http://b.example'>B</A> <a href=https://c.example/>C</a>
      <a href="mailto:x@y.com">m</a> <a href="#top">t</a> <a href="https://t.example.com/v1/unsubscribe/abc">u</a> <img src="https://img.example/x.png">`;
    const out = rewriteLinks(html, opts);
    const links = [...out.matchAll(/href\s*=\s*"([^"]+)"/gi)].map((m) => m[1]!);
    const targets = links.filter((l) => l.startsWith('https://t.example.com/v1/track/click?t='))
      .map((l) => verifyTrackingToken(key, l.split('?t=').pop()!, 'click')?.url);
    expect(targets).toEqual(['https://shop.example/a?x=1&y=2', 'http://b.example', 'https://c.example/']);
    expect(out).toContain('href="mailto:x@y.com"');
    expect(out).toContain('href="#top"');
    expect(out).toContain('href="https://t.example.com/v1/unsubscribe/abc"');
    expect(out).toContain('src="https://img.example/x.png"');
  });
  it('puts the pixel before </body>, or at the end', () => {
    const url = openPixelUrl('https://t.example.com', key, 'em_1');
    expect(addOpenPixel('<html><body><p>x</p></BODY></html>', url)).toMatch(/<p>x<\/p><img src="https:\/\/t\.example\.com\/v1\/track\/open\?t=[^"]+"[^>]*\/><\/BODY><\/html>$/);
    expect(addOpenPixel('<p>x</p>', url)).toMatch(/^<p>x<\/p><img /);
  });
  it('names the platform from the user agent', () => {
    expect(platformOf('Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)')).toBe('iOS');
    expect(platformOf('Mozilla/5.0 (Linux; Android 14; Pixel 8)')).toBe('Android');
    expect(platformOf('Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7)')).toBe('macOS');
    expect(platformOf('Mozilla/5.0 (Windows NT 10.0; Win64; x64)')).toBe('Windows');
    expect(platformOf('Mozilla/5.0 (X11; Linux x86_64)')).toBe('Linux');
    expect(platformOf('curl/8.0')).toBe('Bot');
    expect(platformOf('')).toBe('Unknown');
  });
});
