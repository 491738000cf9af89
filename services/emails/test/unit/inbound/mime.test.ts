import { describe, expect, it } from 'vitest';
import { bodyText, decodeBody, headerValue, parseContentType, parseHeaderBlock, parseMime, walk } from '../../../src/inbound/mime.js';

describe('MIME reading for reports', () => {
  it('unfolds header fields, lower-cases names and skips lines that are not fields', () => {
    const fields = parseHeaderBlock('From  x\nSubject: one\n two\n\tthree\nX-Empty:\nbroken line\nTo: a@b');
    expect(fields).toEqual([
      { name: 'subject', value: 'one two three' },
      { name: 'x-empty', value: '' },
      { name: 'to', value: 'a@b' },
    ]);
    expect(headerValue(fields, 'subject')).toBe('one two three');
  });

  it('parses content types with quoted, escaped and odd-case parameters', () => {
    expect(parseContentType('Multipart/Report; Report-Type="delivery-status";\tboundary="a;b \\"c\\""')).toEqual({
      type: 'multipart/report',
      params: { 'report-type': 'delivery-status', boundary: 'a;b "c"' },
    });
    expect(parseContentType(undefined)).toEqual({ type: 'text/plain', params: {} });
    expect(parseContentType('garbage')).toEqual({ type: 'text/plain', params: {} });
  });

  it('splits nested multiparts, tolerating a preamble, an epilogue and whitespace after a delimiter', () => {
    const raw = Buffer.from(
      'Content-Type: multipart/mixed; boundary=outer\r\n\r\npreamble\r\n--outer \r\nContent-Type: multipart/alternative; boundary=inner\r\n\r\n' +
        '--inner\r\nContent-Type: text/plain\r\n\r\nplain\r\n--inner\r\nContent-Type: text/html\r\n\r\n<p>html</p>\r\n--inner--\r\n' +
        '--outer\r\nContent-Type: message/rfc822\r\n\r\nSubject: inner message\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\n\r\nnot opened\r\n--x--\r\n' +
        '--outer--\r\nepilogue\r\n',
    );
    const parts = walk(parseMime(raw));
    expect(parts.map((p) => p.contentType)).toEqual(['multipart/mixed', 'multipart/alternative', 'text/plain', 'text/html', 'message/rfc822']);
    expect(parts[2]!.rawBody.toString()).toBe('plain');
    expect(parts[4]!.rawBody.toString()).toContain('Subject: inner message');
  });

  it('undoes base64 and quoted-printable and honours the charset', () => {
    const part = (cte: string, charset: string, body: string) =>
      parseMime(Buffer.from(`Content-Type: text/plain; charset=${charset}\nContent-Transfer-Encoding: ${cte}\n\n${body}`, 'latin1'));
    expect(bodyText(part('base64', 'utf-8', Buffer.from('héllo wörld').toString('base64').replace(/(.{8})/g, '$1\n')))).toBe('héllo wörld');
    expect(bodyText(part('quoted-printable', 'utf-8', 'caf=C3=A9 =\nsoft break, =3D sign, =ZZ kept'))).toBe('café soft break, = sign, =ZZ kept');
    expect(bodyText(part('8bit', 'iso-8859-1', 'caf\xe9'))).toBe('café');
    expect(bodyText(part('7bit', 'x-unknown-charset', 'plain'))).toBe('plain');
    expect(decodeBody(part('binary', 'utf-8', 'raw')).toString()).toBe('raw');
  });
});
