import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { newId } from '@mailfleet/kit';
import { parseVerpAddress, verpAddress } from '../../src/domain/verp.js';

const secret = 'verp-test-secret-0123456789abcdef';
const bounceDomain = 'bounces.mailfleet.local';

describe('verpAddress', () => {
  it('is bounces+<emailId>-<10-char lower-case signature>@<bounce domain>', () => {
    const emailId = newId('em');
    const address = verpAddress({ secret, emailId, bounceDomain });
    expect(address).toMatch(new RegExp(`^bounces\\+${emailId}-[a-z2-7]{10}@bounces\\.mailfleet\\.local$`));
    // Fits an SMTP local part (64 characters).
    expect(address.split('@')[0]!.length).toBeLessThanOrEqual(64);
  });

  it('signs with HMAC-SHA256(secret, emailId): the first 10 base32 characters', () => {
    const emailId = 'em_0123456789abcdefghijkl';
    const mac = createHmac('sha256', secret).update(emailId).digest();
    // First 50 bits of the MAC, 5 bits per base32 character.
    const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
    let bits = '';
    for (const byte of mac.subarray(0, 7)) bits += byte.toString(2).padStart(8, '0');
    const expected = Array.from({ length: 10 }, (_, i) => alphabet[parseInt(bits.slice(i * 5, i * 5 + 5), 2)]).join('');
    expect(verpAddress({ secret, emailId, bounceDomain })).toBe(`bounces+${emailId}-${expected}@${bounceDomain}`);
  });

  it('is stable for one secret and differs between secrets and emails', () => {
    const emailId = newId('em');
    expect(verpAddress({ secret, emailId, bounceDomain })).toBe(verpAddress({ secret, emailId, bounceDomain }));
    expect(verpAddress({ secret: `${secret}x`, emailId, bounceDomain })).not.toBe(verpAddress({ secret, emailId, bounceDomain }));
    expect(verpAddress({ secret, emailId: newId('em'), bounceDomain })).not.toBe(verpAddress({ secret, emailId, bounceDomain }));
  });

  it('lower-cases the domain and refuses ids it could not parse back', () => {
    expect(verpAddress({ secret, emailId: 'em_A', bounceDomain: 'Bounces.Example.COM' })).toMatch(/@bounces\.example\.com$/);
    expect(() => verpAddress({ secret, emailId: 'em-1', bounceDomain })).toThrow(/email id/);
    expect(() => verpAddress({ secret, emailId: '', bounceDomain })).toThrow(/email id/);
    expect(() => verpAddress({ secret, emailId: 'a'.repeat(60), bounceDomain })).toThrow(/too long/);
    expect(() => verpAddress({ secret: '', emailId: 'em_A', bounceDomain })).toThrow(/secret/);
    expect(() => verpAddress({ secret, emailId: 'em_A', bounceDomain: ' ' })).toThrow(/domain/);
  });
});

describe('parseVerpAddress', () => {
  const emailId = newId('em');
  const address = verpAddress({ secret, emailId, bounceDomain });
  const [local, domain] = address.split('@') as [string, string];
  const sig = local.slice(-10);

  it('gives back the email id of a signed address', () => {
    expect(parseVerpAddress({ secret, address, bounceDomain })).toBe(emailId);
    expect(parseVerpAddress({ secret, address: `<${address}>`, bounceDomain })).toBe(emailId);
    expect(parseVerpAddress({ secret, address: ` ${address} `, bounceDomain })).toBe(emailId);
    expect(parseVerpAddress({ secret, address: verpAddress({ secret, emailId: 'x_1', bounceDomain }), bounceDomain })).toBe('x_1');
  });

  it('compares the domain case-insensitively (and ignores a trailing dot)', () => {
    expect(parseVerpAddress({ secret, address: `${local}@${domain.toUpperCase()}`, bounceDomain })).toBe(emailId);
    expect(parseVerpAddress({ secret, address, bounceDomain: 'BOUNCES.mailfleet.LOCAL' })).toBe(emailId);
    expect(parseVerpAddress({ secret, address: `${local}@${domain}.`, bounceDomain })).toBe(emailId);
  });

  it('accepts the prefix and the signature in any case, but keeps the id as written', () => {
    expect(parseVerpAddress({ secret, address: `BOUNCES+${emailId}-${sig.toUpperCase()}@${domain}`, bounceDomain })).toBe(emailId);
  });

  it('refuses another domain', () => {
    expect(parseVerpAddress({ secret, address: `${local}@example.com`, bounceDomain })).toBeUndefined();
    expect(parseVerpAddress({ secret, address: `${local}@sub.${domain}`, bounceDomain })).toBeUndefined();
  });

  it('refuses a wrong, truncated or missing signature and another secret', () => {
    const flipped = sig.slice(0, -1) + (sig.endsWith('a') ? 'b' : 'a');
    expect(parseVerpAddress({ secret, address: `bounces+${emailId}-${flipped}@${domain}`, bounceDomain })).toBeUndefined();
    expect(parseVerpAddress({ secret, address: `bounces+${emailId}-${sig.slice(0, 9)}@${domain}`, bounceDomain })).toBeUndefined();
    expect(parseVerpAddress({ secret, address: `bounces+${emailId}@${domain}`, bounceDomain })).toBeUndefined();
    expect(parseVerpAddress({ secret: `${secret}x`, address, bounceDomain })).toBeUndefined();
    expect(parseVerpAddress({ secret: '', address, bounceDomain })).toBeUndefined();
  });

  it('refuses a signature moved to another email id (case matters in the id)', () => {
    const otherId = newId('em');
    expect(parseVerpAddress({ secret, address: `bounces+${otherId}-${sig}@${domain}`, bounceDomain })).toBeUndefined();
    const swapped = `E${emailId.slice(1)}`;
    expect(parseVerpAddress({ secret, address: `bounces+${swapped}-${sig}@${domain}`, bounceDomain })).toBeUndefined();
  });

  it('refuses other shapes', () => {
    for (const bad of [
      '',
      '@',
      domain,
      `postmaster@${domain}`,
      `bounce+${emailId}-${sig}@${domain}`,
      `xbounces+${emailId}-${sig}@${domain}`,
      `bounces+${emailId}-${sig}x@${domain}`,
      `bounces+-${sig}@${domain}`,
      `bounces+${emailId}.x-${sig}@${domain}`,
      `"bounces+${emailId}-${sig}"@${domain}`,
      `${local}@`,
    ]) {
      expect(parseVerpAddress({ secret, address: bad, bounceDomain }), bad).toBeUndefined();
    }
  });
});
