import { describe, expect, it } from 'vitest';
import {
  addressOfRecipient, checkPaging, checkSearch, checkSource, escapeRegex, isSuppressionReason, lookupKeys, normalizeEmail, pickSuppressed,
} from '../../src/domain/suppressions.js';

describe('normalizeEmail', () => {
  it.each([
    ['user@example.com', 'user@example.com'],
    ['  User.Name@Example.COM  ', 'user.name@example.com'],
    ['a+tag@sub.example.co.uk', 'a+tag@sub.example.co.uk'],
    ["o'brien@example.ie", "o'brien@example.ie"],
    ['x_y-z!#$%&*/=?^`{|}~@example.org', 'x_y-z!#$%&*/=?^`{|}~@example.org'],
    ['bounce@simulator.mailfleet.test', 'bounce@simulator.mailfleet.test'],
    ['a@xn--bcher-kva.example', 'a@xn--bcher-kva.example'],
    [`${'l'.repeat(64)}@example.com`, `${'l'.repeat(64)}@example.com`],
    // One normalisation with contacts: Unicode local parts are addresses too.
    ['Jürgen@Example.com', 'jürgen@example.com'],
  ])('accepts %j as %j', (raw, expected) => {
    expect(normalizeEmail(raw)).toBe(expected);
  });

  it.each([
    '', '   ', 'plainaddress', '@example.com', 'user@', 'user@@example.com', 'us er@example.com', 'user@exa mple.com',
    'user@localhost', 'user@example', '.user@example.com', 'user.@example.com', 'us..er@example.com', 'user@-example.com',
    'user@example-.com', 'user@example..com', 'user@.example.com', 'user@example.com.', 'user@1.2.3.4', 'user@[1.2.3.4]',
    '"quoted"@example.com', 'user@exa_mple.com', 'Jane <jane@example.com>', 'a@b@example.com',
    `${'l'.repeat(65)}@example.com`, `a@${'d'.repeat(64)}.com`, `a@${Array.from({ length: 5 }, () => 'd'.repeat(60)).join('.')}.com`,
  ])('refuses %j', (raw) => {
    expect(normalizeEmail(raw)).toBeUndefined();
  });
});

describe('addressOfRecipient', () => {
  it('reads bare addresses and Name <address> mailboxes, lower-cased', () => {
    expect(addressOfRecipient('Bob@Example.com')).toBe('bob@example.com');
    expect(addressOfRecipient('"Jane Doe" <Jane@Example.com>')).toBe('jane@example.com');
    expect(addressOfRecipient('Jane <not an address>')).toBeUndefined();
    expect(addressOfRecipient('nonsense')).toBeUndefined();
  });
});

describe('escapeRegex', () => {
  it('makes user text match only itself', () => {
    for (const text of ['.', '+tag', 'a.b', '*', '(x)', '[a-z]', '^a$', 'a|b', '\\', '{2}', '?', '/']) {
      const re = new RegExp(escapeRegex(text));
      expect(re.test(text)).toBe(true);
    }
    expect(new RegExp(escapeRegex('a.c')).test('abc')).toBe(false);
    expect(new RegExp(escapeRegex('.')).test('abc@examplecom')).toBe(false);
    expect(new RegExp(escapeRegex('+tag')).test('tttag')).toBe(false);
    expect(new RegExp(escapeRegex('[a-z]')).test('q')).toBe(false);
  });
});

describe('checkPaging', () => {
  it('defaults 0 to page 1 and limit 20', () => {
    expect(checkPaging(0, 0)).toEqual({ ok: true, value: { page: 1, limit: 20, skip: 0 } });
    expect(checkPaging(3, 7)).toEqual({ ok: true, value: { page: 3, limit: 7, skip: 14 } });
    expect(checkPaging(1, 100)).toEqual({ ok: true, value: { page: 1, limit: 100, skip: 0 } });
  });
  it('refuses out-of-range values instead of clamping them', () => {
    for (const [page, limit] of [[-1, 20], [1, -1], [1, 101], [1.5, 20], [1, 2.5], [Number.NaN, 20]] as const) {
      expect(checkPaging(page, limit).ok).toBe(false);
    }
  });
});

describe('checkSearch and checkSource', () => {
  it('trims and lower-cases search; blank means no filter; caps the length', () => {
    expect(checkSearch(undefined)).toEqual({ ok: true, value: undefined });
    expect(checkSearch('  ')).toEqual({ ok: true, value: undefined });
    expect(checkSearch(' ACME.com ')).toEqual({ ok: true, value: 'acme.com' });
    expect(checkSearch('x'.repeat(321)).ok).toBe(false);
  });
  it('trims a source; blank means none; caps the length', () => {
    expect(checkSource(undefined)).toEqual({ ok: true, value: undefined });
    expect(checkSource(' ')).toEqual({ ok: true, value: undefined });
    expect(checkSource(' crm import ')).toEqual({ ok: true, value: 'crm import' });
    expect(checkSource('s'.repeat(501)).ok).toBe(false);
  });
});

describe('batch check helpers', () => {
  it('looks each distinct address up once, case-insensitively', () => {
    expect(lookupKeys(['A@x.com', 'a@x.com ', '', 'b@x.com'])).toEqual(['a@x.com', 'b@x.com']);
  });
  it('answers with the given spellings in request order', () => {
    const suppressed = new Set(['a@x.com', 'c@x.com']);
    expect(pickSuppressed(['C@X.com', 'b@x.com', 'A@x.com', 'c@x.com'], suppressed)).toEqual(['C@X.com', 'A@x.com', 'c@x.com']);
    expect(pickSuppressed([], suppressed)).toEqual([]);
  });
});

describe('isSuppressionReason', () => {
  it('knows the four reasons of SPEC 2.13', () => {
    expect(['HARD_BOUNCE', 'COMPLAINT', 'MANUAL', 'UNSUBSCRIBE'].every(isSuppressionReason)).toBe(true);
    expect(isSuppressionReason('hard_bounce')).toBe(false);
    expect(isSuppressionReason(undefined)).toBe(false);
  });
});
