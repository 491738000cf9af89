import { describe, expect, it } from 'vitest';
import { formatMailbox, isValidAddress, parseMailboxes, parseSingleMailbox } from '../../src/domain/addresses.js';
import { headerProblem, headersProblem } from '../../src/domain/headers.js';
import { validateEmail, ValidationProblem, type EmailInput } from '../../src/domain/validate.js';

const now = new Date('2030-01-01T00:00:00Z');
const limits = { maxAttachmentsBytes: 1000, now };
const base: EmailInput = {
  to: ['a@example.com'], from: 'Shop <shop@mail.example.com>', subject: 'Hi', text: 'x',
  replyTo: [], cc: [], bcc: [], headers: {}, attachments: [],
};

function problem(input: Partial<EmailInput>): { field: string; message: string } {
  try {
    validateEmail({ ...base, ...input }, limits);
  } catch (err) {
    if (err instanceof ValidationProblem) return { field: err.field, message: err.message };
    throw err;
  }
  throw new Error('expected a validation problem');
}

describe('addresses', () => {
  it('accepts plain and named addresses and lists', () => {
    expect(parseMailboxes('a@x.com')).toEqual([{ address: 'a@x.com', name: '' }]);
    expect(parseMailboxes('"Doe, J" <j@x.com>, k@y.org')).toEqual([{ address: 'j@x.com', name: 'Doe, J' }, { address: 'k@y.org', name: '' }]);
    expect(formatMailbox({ address: 'j@x.com', name: 'Doe, J' })).toBe('"Doe, J" <j@x.com>');
    expect(formatMailbox({ address: 'j@x.com', name: 'Jo' })).toBe('Jo <j@x.com>');
  });
  it('refuses malformed addresses, groups and header smuggling', () => {
    for (const bad of ['bad', 'a@b', 'a@@b.com', '.a@b.com', 'a..b@c.com', 'a@-b.com', 'a@b.123', 'Grp: a@b.com;', 'x@y.com\r\nBcc: q@q.com', '', '<>']) {
      expect(() => parseMailboxes(bad), bad).toThrow();
    }
    expect(isValidAddress(`${'a'.repeat(65)}@x.com`)).toBe(false);
    expect(() => parseSingleMailbox('a@x.com, b@x.com')).toThrow(/exactly one/);
  });
});

describe('validateEmail', () => {
  it('normalises recipients: distinct, lower case, across to, cc and bcc', () => {
    const v = validateEmail({ ...base, to: ['A@Example.com', 'b@example.com'], cc: ['a@example.com'], bcc: ['C@example.com'] }, limits);
    expect(v.recipients).toEqual(['a@example.com', 'b@example.com', 'c@example.com']);
    expect(v.from).toEqual({ address: 'shop@mail.example.com', name: 'Shop' });
  });
  it('needs to, from, a subject or template, and a body or template', () => {
    expect(problem({ to: [] }).field).toBe('to');
    expect(problem({ from: '' }).field).toBe('from');
    expect(problem({ from: 'nope' }).field).toBe('from');
    expect(problem({ subject: undefined }).message).toBe('subject or templateId is required');
    expect(problem({ subject: '  ' }).field).toBe('subject');
    expect(problem({ text: undefined }).message).toBe('one of text, html or templateId is required');
    expect(() => validateEmail({ ...base, subject: undefined, text: undefined, templateId: 'tpl_1' }, limits)).not.toThrow();
  });
  it('names the field of a bad address', () => {
    expect(problem({ cc: ['ok@x.com', 'broken'] })).toMatchObject({ field: 'cc', message: expect.stringContaining('"broken" is not a valid email address') });
    expect(problem({ replyTo: ['x'] }).field).toBe('replyTo');
  });
  it('caps recipients at 50', () => {
    expect(problem({ to: Array.from({ length: 51 }, (_, i) => `r${i}@x.com`) }).message).toContain('at most 50 recipients');
  });
  it('checks attachments: count, names, total size', () => {
    const file = (filename: string, size = 10) => ({ filename, content: Buffer.alloc(size) });
    expect(problem({ attachments: Array.from({ length: 11 }, (_, i) => file(`f${i}.txt`)) }).message).toBe('at most 10 attachments');
    expect(problem({ attachments: [file(' ')] }).field).toBe('attachments[0].filename');
    expect(problem({ attachments: [file('ok.txt'), file('../etc/passwd')] }).field).toBe('attachments[1].filename');
    expect(problem({ attachments: [file('a', 600), file('b', 401)] }).message).toContain('limit is 1000 bytes');
    expect(() => validateEmail({ ...base, attachments: [file('a', 600), file('b', 400)] }, limits)).not.toThrow();
  });
  it('refuses dangerous headers and schedules too far ahead', () => {
    expect(problem({ headers: { 'X-Ok': 'a\r\nBcc: x@y.com' } }).field).toBe('headers');
    expect(problem({ scheduledAt: new Date('2031-06-01T00:00:00Z') }).field).toBe('scheduledAt');
    expect(problem({ scheduledAt: new Date('nope') }).field).toBe('scheduledAt');
  });
});

describe('custom headers', () => {
  it('allows ordinary extension headers', () => {
    expect(headersProblem({ 'X-Campaign': 'spring', 'List-Unsubscribe': '<https://x.example/u>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click', Precedence: 'bulk' })).toBeUndefined();
  });
  it('refuses headers the platform owns or that would spoof it', () => {
    for (const name of ['From', 'sender', 'To', 'BCC', 'Subject', 'Message-ID', 'DKIM-Signature', 'Return-Path', 'Received', 'Content-Type', 'X-Mailfleet-Id', 'ARC-Seal', 'Authentication-Results']) {
      expect(headerProblem(name, 'x'), name).toMatch(/cannot be overridden/);
    }
  });
  it('refuses malformed names, line breaks, control characters and over-long values', () => {
    expect(headerProblem('Bad Name', 'x')).toMatch(/not a valid header field name/);
    expect(headerProblem('X-A:b', 'x')).toMatch(/not a valid/);
    expect(headerProblem('X-A', 'a\nb')).toMatch(/line breaks/);
    expect(headerProblem('X-A', 'a\u0000b')).toMatch(/control/);
    expect(headerProblem('X-A', 'a\tb')).toBeUndefined();
    expect(headerProblem('X-A', 'x'.repeat(1000))).toMatch(/longer than/);
    expect(headersProblem({ 'X-A': '1', 'x-a': '2' })).toMatch(/twice/);
  });
});
