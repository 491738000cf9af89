import { describe, expect, it } from 'vitest';
import { addressEntryProblem, isValidAddress } from '../../src/addresses.js';

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
