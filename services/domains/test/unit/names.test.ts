import { describe, expect, it } from 'vitest';
import { domainOfAddress, parseDomainName, requireRegion } from '../../src/domain/names.js';

describe('parseDomainName', () => {
  it('normalises case, whitespace and a trailing dot', () => {
    expect(parseDomainName('  Example.COM. ')).toEqual({ name: 'example.com', subdomain: null });
  });

  it('reports the subdomain left of the registrable domain', () => {
    expect(parseDomainName('mail.example.com')).toEqual({ name: 'mail.example.com', subdomain: 'mail' });
    expect(parseDomainName('a.b.example.co.uk')).toEqual({ name: 'a.b.example.co.uk', subdomain: 'a.b' });
    expect(parseDomainName('example.co.uk').subdomain).toBeNull();
  });

  it('turns internationalised names into punycode', () => {
    expect(parseDomainName('Bücher.example').name).toBe('xn--bcher-kva.example');
  });

  it('accepts self-hosted and reserved TLDs', () => {
    expect(parseDomainName('mailfleet.test').name).toBe('mailfleet.test');
    expect(parseDomainName('corp.internal').name).toBe('corp.internal');
  });

  it.each([
    ['', /required/],
    ['   ', /required/],
    ['localhost', /at least two labels/],
    ['https://example.com', /only the host name/],
    ['user@example.com', /only the host name/],
    ['example.com/path', /only the host name/],
    ['example.com:25', /only the host name/],
    ['exa mple.com', /only the host name/],
    ['-bad.example.com', /each label/],
    ['bad-.example.com', /each label/],
    ['a..example.com', /each label|not a valid/],
    ['under_score.example.com', /each label/],
    [`${'a'.repeat(64)}.com`, /each label/],
    ['example.c0m', /top-level domain/],
    ['example.1', /top-level domain/],
    ['192.168.1.1', /top-level domain|IP address/],
    ['co.uk', /public suffix/],
    ['com.', /at least two labels/],
    [`${'a.'.repeat(130)}com`, /at most 253/],
  ])('refuses %j', (input, message) => {
    expect(() => parseDomainName(input)).toThrowError(message);
  });

  it('refuses with INVALID_ARGUMENT', () => {
    try {
      parseDomainName('nope');
      expect.unreachable();
    } catch (err) {
      expect((err as { grpcCode?: number }).grpcCode).toBe(3);
    }
  });
});

describe('domainOfAddress', () => {
  it.each([
    ['hello@Example.com', 'example.com'],
    ['Team <news@Mail.Example.com>', 'mail.example.com'],
    ['example.com', 'example.com'],
    ['EXAMPLE.com.', 'example.com'],
    ['x@bücher.example', 'xn--bcher-kva.example'],
  ])('%j -> %j', (input, out) => {
    expect(domainOfAddress(input)).toBe(out);
  });
  it('is undefined for nothing usable', () => {
    expect(domainOfAddress('')).toBeUndefined();
    expect(domainOfAddress('user@')).toBeUndefined();
  });
});

describe('requireRegion', () => {
  it('accepts us-east-1 only', () => {
    expect(requireRegion('us-east-1')).toBe('us-east-1');
    expect(() => requireRegion('eu-west-1')).toThrowError(/Region eu-west-1 is not supported; supported: us-east-1/);
    expect(() => requireRegion('')).toThrowError(/region is required/);
  });
});
