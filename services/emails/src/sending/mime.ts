import { randomHex } from '@mailfleet/kit';
import { createRequire } from 'node:module';
import addressparser from 'nodemailer/lib/addressparser/index.js';
import mimeFuncs from 'nodemailer/lib/mime-funcs/index.js';

/*
 * The MIME message as nodemailer's MailComposer writes it (same header order, encodings, address and encoded-word
 * rules, boundary form), built as one string with no stream: MailComposer pipes every part through transform
 * streams and a DKIM parser that re-reads what it just wrote, which cost more CPU per mail than the RSA signature.
 * nodemailer's own pure helpers (address parser, encoded words, header folding, parameter encoding) are reused
 * so that headers come out byte for byte as before. Differences on purpose: body line breaks are always CRLF
 * (MailComposer kept a body's bare LF or CR as given), and an unstructured header that would still have a line
 * over 998 characters after folding (one long word) is sent as encoded words, which fold.
 */

// No type declarations ship for it; it is the punycode nodemailer applies to address domains and DKIM's d=.
const punycode = createRequire(import.meta.url)('nodemailer/lib/punycode/index.js') as { toASCII(domain: string): string };

/** A domain name as nodemailer writes it: IDN labels in punycode (no other mapping). */
export function asciiDomain(domain: string): string {
  return punycode.toASCII(domain);
}

export interface MessageInput {
  readonly from: string;
  readonly to: readonly string[];
  readonly cc: readonly string[];
  readonly replyTo: readonly string[];
  readonly subject: string;
  /** `<id@domain>` */
  readonly messageId: string;
  readonly inReplyTo?: string | undefined;
  readonly references: readonly string[];
  readonly date: Date;
  /** Custom headers, in order. */
  readonly headers: readonly (readonly [string, string])[];
  readonly text?: string | undefined;
  readonly html?: string | undefined;
  readonly attachments: readonly { readonly filename: string; readonly content: Buffer }[];
}

export interface HeaderField {
  /** The field name in lower case (what DKIM's relaxed canonicalisation uses). */
  readonly key: string;
  /** The whole field as written, folded with CRLF + space, without its final CRLF. */
  readonly line: string;
}

export interface BuiltMessage {
  readonly headers: readonly HeaderField[];
  /** Everything after the blank line; CRLF line ends, ends with CRLF unless empty. ASCII only. */
  readonly body: string;
}

/** Names the composer sets itself: a custom header of these names is dropped (the accept refuses them already). */
const MANAGED = new Set([
  'from', 'sender', 'to', 'cc', 'bcc', 'reply-to', 'in-reply-to', 'references', 'subject', 'message-id', 'date',
  'mime-version', 'content-type', 'content-transfer-encoding', 'content-disposition', 'dkim-signature',
]);

const MAX_LINE = 998;
const HEX = '0123456789ABCDEF';

interface Leaf {
  /** Content-Type value. */
  readonly type: string;
  /** Fields MailComposer sets when it creates the part (they precede the custom headers on a root part). */
  readonly early: readonly (readonly [string, string])[];
  /** Content-Transfer-Encoding as chosen when the part is written, if any. */
  readonly encoding?: string | undefined;
  readonly body: string;
}

/**
 * Builds the message. `boundaryBase` makes the multipart boundaries (`--_NmP-<base>-Part_<n>`, as MailComposer
 * names them) unique per message: 16 random hex digits unless given.
 */
export function buildMessage(input: MessageInput, boundaryBase: string = randomHex(8)): BuiltMessage {
  const alternatives: Leaf[] = [];
  // MailComposer leaves out an empty text or html.
  if (input.text) alternatives.push(textLeaf('text/plain; charset=utf-8', input.text));
  if (input.html) alternatives.push(textLeaf('text/html; charset=utf-8', input.html));
  const attached = input.attachments.map((a) => attachmentLeaf(a.filename, a.content));
  const useAlternative = alternatives.length > 1;
  const useMixed = attached.length > 1 || (alternatives.length > 0 && attached.length === 1);

  const fields: (readonly [string, string])[] = [];
  let body: string;
  let tail: (readonly [string, string])[];
  if (useMixed || useAlternative) {
    const boundary = `--_NmP-${boundaryBase}-Part_1`;
    const children: string[] = [];
    if (useMixed) {
      if (useAlternative) {
        const inner = `--_NmP-${boundaryBase}-Part_2`;
        children.push(`${fold('Content-Type', multipartType('alternative', inner))}\r\n\r\n${multipartBody(inner, alternatives.map(childText))}`);
      } else {
        children.push(...alternatives.map(childText));
      }
      children.push(...attached.map(childText));
    } else {
      children.push(...alternatives.map(childText));
    }
    body = multipartBody(boundary, children);
    tail = [['MIME-Version', '1.0'], ['Content-Type', multipartType(useMixed ? 'mixed' : 'alternative', boundary)]];
  } else {
    const leaf = alternatives[0] ?? attached[0] ?? { type: 'text/plain', early: [], body: '' };
    fields.push(...leaf.early);
    body = leaf.body;
    // A message ends with a line break (MailComposer adds one after a body that does not end with one).
    if (body !== '' && !body.endsWith('\n')) body += '\r\n';
    tail = [...(leaf.encoding ? [['Content-Transfer-Encoding', leaf.encoding] as const] : []), ['MIME-Version', '1.0'], ['Content-Type', leaf.type]];
  }

  const out: HeaderField[] = [];
  const push = (key: string, value: string, unstructured = false): void => {
    if (!value.trim()) return;
    out.push({ key: key.toLowerCase(), line: fold(key, value, unstructured) });
  };
  for (const [k, v] of fields) push(k, v);
  for (const [name, value] of input.headers) {
    const key = normalizeHeaderKey(name);
    if (MANAGED.has(key.toLowerCase())) continue;
    push(key, unstructuredValue(value), true);
  }
  push('From', addressList([input.from]));
  push('To', addressList(input.to));
  if (input.cc.length > 0) push('Cc', addressList(input.cc));
  if (input.replyTo.length > 0) push('Reply-To', addressList(input.replyTo));
  if (input.inReplyTo) push('In-Reply-To', angled(input.inReplyTo));
  if (input.references.length > 0) push('References', referenceList(input.references));
  if (input.subject) push('Subject', unstructuredValue(input.subject), true);
  push('Message-ID', angled(input.messageId));
  push('Date', input.date.toUTCString().replace(/GMT/, '+0000'));
  for (const [k, v] of tail) push(k, v);
  return { headers: out, body };
}

/** The whole message text: header fields, a blank line, the body. */
export function messageText(m: BuiltMessage): string {
  let head = '';
  for (const h of m.headers) head += `${h.line}\r\n`;
  return `${head}\r\n${m.body}`;
}

// ---- parts -----------------------------------------------------------------------------------------------

function childText(leaf: Leaf): string {
  let head = fold('Content-Type', leaf.type);
  for (const [k, v] of leaf.early) head += `\r\n${fold(k, v)}`;
  if (leaf.encoding) head += `\r\n${fold('Content-Transfer-Encoding', leaf.encoding)}`;
  return `${head}\r\n\r\n${leaf.body}`;
}

function multipartType(sub: string, boundary: string): string {
  return `multipart/${sub}; boundary="${boundary}"`;
}

function multipartBody(boundary: string, children: readonly string[]): string {
  let s = '';
  children.forEach((c, i) => { s += `${i > 0 ? '\r\n' : ''}--${boundary}\r\n${c}`; });
  return `${s}\r\n--${boundary}--\r\n`;
}

/** A text alternative: 7bit when pure ASCII with lines of at most 76 characters, else quoted-printable or base64. */
function textLeaf(type: string, content: string): Leaf {
  const text = crlf(content);
  if (content.length <= 128 * 1024 && !NOT_7BIT.test(text) && !hasLongLine(text, 76)) return { type, early: [], encoding: '7bit', body: text };
  return textEncoding(content) === 'Q'
    ? { type, early: [], encoding: 'quoted-printable', body: quotedPrintable(text) }
    : { type, early: [], encoding: 'base64', body: base64Lines(Buffer.from(text, 'utf8')) };
}

// eslint-disable-next-line no-control-regex -- control characters (but tab and line breaks) rule out 7bit, as in nodemailer
const NOT_7BIT = /[\x00-\x08\x0b\x0c\x0e-\x1f\u0080-\uffff]/;

/** Whether a line of CRLF-broken text is longer than `max`. */
function hasLongLine(text: string, max: number): boolean {
  for (let pos = 0; ; ) {
    const br = text.indexOf('\r\n', pos);
    if ((br < 0 ? text.length : br) - pos > max) return true;
    if (br < 0) return false;
    pos = br + 2;
  }
}

function attachmentLeaf(filename: string, content: Buffer): Leaf {
  let name = unstructuredValue(filename);
  if (name !== filename || /[\s'"\\;:/=(),<>@[\]?]|^-/.test(name)) name = `"${name}"`;
  return {
    type: `${mimeFuncs.detectMimeType(filename)}; name=${name}`,
    early: [['Content-Transfer-Encoding', 'base64'], ['Content-Disposition', mimeFuncs.buildHeaderValue({ value: 'attachment', params: { filename } }).replace(/\r?\n|\r/g, ' ')]],
    body: base64Lines(content),
  };
}

function crlf(s: string): string {
  if (!s.includes('\r')) return s.includes('\n') ? s.replace(/\n/g, '\r\n') : s;
  return s.replace(/\r\n?|\n/g, '\r\n');
}

/** MailComposer's choice between Q and B: Q when Latin letters outnumber non-ASCII and control characters. */
function textEncoding(value: string): 'Q' | 'B' {
  let latin = 0;
  let other = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if ((c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a)) latin++;
    else if (c >= 0x80 || (c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d)) other++;
  }
  return other < latin ? 'Q' : 'B';
}

function base64Lines(content: Buffer): string {
  const b64 = content.toString('base64');
  if (b64.length <= 76) return b64;
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 76) lines.push(b64.slice(i, i + 76));
  return lines.join('\r\n');
}

/** Quoted-printable (RFC 2045 6.7) of text whose line breaks are CRLF: hard breaks kept, soft breaks at 76. */
export function quotedPrintable(text: string): string {
  const lines = text.split('\r\n');
  for (let n = 0; n < lines.length; n++) {
    let enc = lines[n] as string;
    // Everything but printable ASCII other than "=", spaces and tabs: non-ASCII as the escapes of its UTF-8 bytes.
    if (QP_UNSAFE.test(enc)) enc = enc.replace(QP_UNSAFE_RUNS, escapeRun);
    // Whitespace at the end of a line would be lost in transport.
    const last = enc.charCodeAt(enc.length - 1);
    if (last === 0x20 || last === 0x09) enc = enc.slice(0, -1) + escape(last);
    if (enc.length > 76) {
      let wrapped = '';
      let pos = 0;
      while (enc.length - pos > 76) {
        // 75 characters and the soft break "=", never cutting an "=XX" escape.
        let end = pos + 75;
        if (enc.charCodeAt(end - 1) === 0x3d) end -= 1;
        else if (enc.charCodeAt(end - 2) === 0x3d) end -= 2;
        wrapped += `${enc.slice(pos, end)}=\r\n`;
        pos = end;
      }
      enc = wrapped + enc.slice(pos);
    }
    lines[n] = enc;
  }
  return lines.join('\r\n');
}

// Control characters are escaped too.
const QP_UNSAFE = /[^\t\x20-\x3c\x3e-\x7e]/;
const QP_UNSAFE_RUNS = /[^\t\x20-\x3c\x3e-\x7e]+/g;

function escapeRun(run: string): string {
  const bytes = Buffer.from(run, 'utf8');
  let s = '';
  for (const b of bytes) s += escape(b);
  return s;
}

function escape(byte: number): string {
  return `=${HEX[byte >> 4] as string}${HEX[byte & 0x0f] as string}`;
}

// ---- headers -----------------------------------------------------------------------------------------------

/** MailComposer's header name form: Camel-Case, MIME/DKIM/ARC/BIMI and -ID/-SPF/-FBL/-MD5 upper case. */
function normalizeHeaderKey(key: string): string {
  return key
    .replace(/\r?\n|\r/g, ' ')
    .trim()
    .toLowerCase()
    .replace(/^X-SMTPAPI$|^(MIME|DKIM|ARC|BIMI)\b|^[a-z]|-(SPF|FBL|ID|MD5)$|-[a-z]/gi, (c) => c.toUpperCase())
    .replace(/^Content-Features$/i, 'Content-features');
}

/** Folds at whitespace to 76 characters where it can; an unstructured value that cannot fold under 998 is re-encoded. */
function fold(key: string, value: string, unstructured = false): string {
  const line = mimeFuncs.foldLines(`${key}: ${value}`, 76);
  if (unstructured && line.length > MAX_LINE && line.split('\r\n').some((l) => l.length > MAX_LINE)) {
    return mimeFuncs.foldLines(`${key}: ${mimeFuncs.encodeWord(value, 'Q', 52)}`, 76);
  }
  return line;
}

/** Subject and custom headers: the whole value as RFC 2047 encoded words when it holds non-ASCII or a quote. */
function unstructuredValue(value: string): string {
  const v = value.replace(/\r?\n|\r/g, ' ');
  return /["\u0080-\uFFFF]/.test(v) ? mimeFuncs.encodeWord(v, textEncoding(v), 52) : v;
}

function angled(value: string): string {
  let v = value.replace(/\r?\n|\r/g, ' ');
  if (!v.startsWith('<')) v = `<${v}`;
  if (!v.endsWith('>')) v = `${v}>`;
  return v;
}

function referenceList(refs: readonly string[]): string {
  return refs
    .flatMap((r) => r.replace(/\r?\n|\r/g, ' ').trim().replace(/<[^>]*>/g, (s) => s.replace(/\s/g, '')).split(/\s+/))
    .map(angled)
    .join(' ')
    .trim();
}

function addressList(values: readonly string[]): string {
  const out: string[] = [];
  for (const v of values) out.push(...renderAddresses(addressparser(v)));
  return out.join(', ');
}

function renderAddresses(list: readonly addressparser.AddressOrGroup[]): string[] {
  const values: string[] = [];
  for (const a of list) {
    if ('address' in a && a.address) {
      const address = normalizeAddress(a.address);
      if (a.name) values.push(`${addressName(a.name)} <${address}>`);
      else values.push(address.includes(' ') ? `<${address}>` : address);
    } else if ('group' in a && a.group) {
      values.push(`${addressName(a.name)}:${renderAddresses(a.group).join(', ').trim()};`);
    }
  }
  return values;
}

/** The local part as given (UTF-8 if so: SMTPUTF8), the domain in lower case and punycode. */
function normalizeAddress(value: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are what is removed
  const address = value.replace(/[\x00-\x1F<>]+/g, ' ').trim();
  const at = address.lastIndexOf('@');
  if (at < 0) return address;
  let user = address.slice(0, at);
  let domain = address.slice(at + 1).toLowerCase();
  try {
    domain = punycode.toASCII(domain);
  } catch {
    // kept as given, lower case
  }
  if (user.includes(' ')) {
    if (!user.startsWith('"')) user = `"${user}`;
    if (!user.endsWith('"')) user = `${user}"`;
  }
  return `${user}@${domain}`;
}

function addressName(name: string): string {
  if (/^[\w ]*$/.test(name)) return name;
  if (/^[\x20-\x7e]*$/.test(name)) return `"${name.replace(/([\\"])/g, '\\$1')}"`;
  return mimeFuncs.encodeWord(name, textEncoding(name), 52);
}
