import { describe, expect, it } from 'vitest';
import { addressOfRecipient, canonicalAddress, normaliseAddress } from '../../src/addresses.js';

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
