import { describe, expect, it } from 'vitest';
import { addressEntryProblem, addressOfRecipient, canonicalAddress, isValidAddress, normaliseAddress } from '../../src/addresses.js';

describe('the one address normalisation', () => {
  it('keys an address trimmed, NFC and lower case', () => {
    expect(canonicalAddress('  Ann.Lee@Example.COM ')).toBe('ann.lee@example.com');
    // "ü" composed and "u" + combining diaeresis are one address.
    expect(canonicalAddress('Ju\u0308rgen@example.com')).toBe('j\u00fcrgen@example.com');
    expect(canonicalAddress('J\u00dcRGEN@example.com')).toBe('j\u00fcrgen@example.com');
  });

  it.each([
    ['Jürgen@Example.com', 'jürgen@example.com'],
    ['jörg@bücher.de', 'jörg@bücher.de'],
    ['x@xn--bcher-kva.example', 'x@xn--bcher-kva.example'],
    ["o'brien+news@sub.example.co.uk", "o'brien+news@sub.example.co.uk"],
    [`${'l'.repeat(64)}@${'d'.repeat(63)}.${'e'.repeat(63)}.${'f'.repeat(57)}.com`, `${'l'.repeat(64)}@${'d'.repeat(63)}.${'e'.repeat(63)}.${'f'.repeat(57)}.com`],
  ])('accepts %j as %j', (raw, expected) => {
    expect(normaliseAddress(raw)).toBe(expected);
  });

  it.each([
    '', 'plain', '@example.com', 'a@', 'a@example', 'a@@example.com', 'a@b@example.com', 'a b@example.com', '.a@example.com',
    'a.@example.com', 'a..b@example.com', 'a@-example.com', 'a@example-.com', 'a@example.c', 'a@1.2.3.4', 'a@[127.0.0.1]',
    '"a"@example.com', `${'l'.repeat(65)}@example.com`, `${'l'.repeat(64)}@${'d'.repeat(63)}.${'e'.repeat(63)}.${'f'.repeat(58)}.com`,
  ])('refuses %j', (raw) => {
    expect(normaliseAddress(raw)).toBeUndefined();
  });

  it('reads the address out of a mailbox', () => {
    expect(addressOfRecipient('"Jürgen" <Jürgen@Example.com>')).toBe('jürgen@example.com');
    expect(addressOfRecipient('Ann <nonsense>')).toBeUndefined();
  });
});

describe('address syntax', () => {
  it('accepts plain RFC 5321 addresses and refuses malformed ones', () => {
    expect(isValidAddress('a.b+tag@mail.example.com')).toBe(true);
    expect(isValidAddress(`${'a'.repeat(64)}@${'b'.repeat(63)}.com`)).toBe(true);
    for (const bad of ['not an address', 'a@', '@b.com', 'a@b', 'a..b@c.com', '.a@c.com', 'a@-b.com', 'a@b.123', `${'a'.repeat(65)}@b.com`]) {
      expect(isValidAddress(bad), bad).toBe(false);
    }
  });

  it('reads an entry as one mailbox or a comma list, with display names', () => {
    expect(addressEntryProblem('a@example.org')).toBeUndefined();
    expect(addressEntryProblem('Ann <a@example.org>')).toBeUndefined();
    expect(addressEntryProblem('"Last, First" <a@example.org>, b@example.org')).toBeUndefined();
    expect(addressEntryProblem('"Quote \\" inside" <a@example.org>')).toBeUndefined();
  });

  it('names what is wrong', () => {
    expect(addressEntryProblem('not an address')).toBe('"not an address" is not a valid email address');
    expect(addressEntryProblem('  ')).toBe('must not be empty');
    expect(addressEntryProblem('a@example.org\r\nBcc: x@example.org')).toBe('must not contain line breaks or control characters');
    expect(addressEntryProblem('a@example.org, nope')).toMatch(/"nope"/);
    expect(addressEntryProblem('Ann <a@example.org')).toMatch(/not a valid/);
    expect(addressEntryProblem('team: a@example.org;')).toMatch(/not a valid/);
    expect(addressEntryProblem('x@y.org <a@example.org>')).toMatch(/not a valid/);
  });
});
