/**
 * Just enough MIME to read delivery reports: header fields (unfolded), content
 * types with parameters, the multipart tree and the two transfer encodings.
 * Liberal on purpose: LF or CRLF line ends, missing closing boundaries, odd
 * case. mailparser is not used here because it folds message/delivery-status
 * parts into the text body and explodes message/rfc822 parts into their own
 * text, which loses exactly the parts a report is made of.
 */

export interface HeaderField {
  /** Lower case. */
  name: string;
  /** Unfolded, trimmed. */
  value: string;
}

export interface MimePart {
  headers: HeaderField[];
  /** Lower case `type/subtype`; `text/plain` when absent (RFC 2045). */
  contentType: string;
  /** Content-Type parameters, names in lower case. */
  params: Record<string, string>;
  /** The body as it appears in the message (not transfer-decoded). */
  rawBody: Buffer;
  /** Parts of a multipart; empty otherwise. message/* parts are not opened. */
  children: MimePart[];
}

const MAX_DEPTH = 8;
const MAX_PARTS = 200;

export function parseMime(raw: Buffer): MimePart {
  const budget = { parts: MAX_PARTS };
  return parseEntity(raw.toString('latin1'), 0, budget);
}

/** Header fields of a header block (an entity's head or a message/delivery-status group). */
export function parseHeaderBlock(text: string): HeaderField[] {
  const fields: HeaderField[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (/^[ \t]/.test(line)) {
      const last = fields[fields.length - 1];
      if (last) last.value = `${last.value} ${line.trim()}`.trim();
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!/^[\x21-\x39\x3b-\x7e]+$/.test(name)) continue;
    fields.push({ name, value: line.slice(colon + 1).trim() });
  }
  return fields;
}

export function headerValue(headers: readonly HeaderField[], name: string): string | undefined {
  return headers.find((h) => h.name === name)?.value;
}

/** Splits an entity into its header text and its body at the first empty line. */
export function splitHead(text: string): { head: string; body: string } {
  const match = /\r?\n\r?\n/.exec(text);
  if (!match) return { head: text, body: '' };
  // An entity that starts with an empty line has no header fields.
  if (/^\r?\n/.test(text)) return { head: '', body: text.replace(/^\r?\n/, '') };
  return { head: text.slice(0, match.index), body: text.slice(match.index + match[0].length) };
}

export function parseContentType(value: string | undefined): { type: string; params: Record<string, string> } {
  const params: Record<string, string> = {};
  if (!value) return { type: 'text/plain', params };
  const [first = '', ...rest] = splitParams(value);
  const type = first.trim().toLowerCase().replace(/\s+/g, '');
  for (const item of rest) {
    const eq = item.indexOf('=');
    if (eq <= 0) continue;
    const name = item.slice(0, eq).trim().toLowerCase();
    let val = item.slice(eq + 1).trim();
    if (val.startsWith('"')) val = val.slice(1, val.endsWith('"') && val.length > 1 ? -1 : undefined).replace(/\\(.)/g, '$1');
    if (!(name in params)) params[name] = val;
  }
  return { type: /^[\w.+-]+\/[\w.+-]+$/.test(type) ? type : 'text/plain', params };
}

/** The body with its Content-Transfer-Encoding undone. */
export function decodeBody(part: MimePart): Buffer {
  const encoding = (headerValue(part.headers, 'content-transfer-encoding') ?? '').trim().toLowerCase();
  if (encoding === 'base64') return Buffer.from(part.rawBody.toString('latin1').replace(/[^A-Za-z0-9+/=]/g, ''), 'base64');
  if (encoding === 'quoted-printable') return decodeQuotedPrintable(part.rawBody.toString('latin1'));
  return part.rawBody;
}

/** The decoded body as text (UTF-8 unless the part names a charset this runtime knows). */
export function bodyText(part: MimePart): string {
  const bytes = decodeBody(part);
  const charset = part.params['charset'];
  if (charset) {
    try {
      return new TextDecoder(charset).decode(bytes);
    } catch {
      // An unknown charset: UTF-8 is the best guess for report fields, which are ASCII.
    }
  }
  return bytes.toString('utf8');
}

/** Every part of the tree, depth first, the root included. */
export function walk(root: MimePart): MimePart[] {
  const out: MimePart[] = [];
  const visit = (part: MimePart): void => {
    out.push(part);
    for (const child of part.children) visit(child);
  };
  visit(root);
  return out;
}

function parseEntity(text: string, depth: number, budget: { parts: number }): MimePart {
  budget.parts -= 1;
  const { head, body } = splitHead(text);
  const headers = parseHeaderBlock(head);
  const { type, params } = parseContentType(headerValue(headers, 'content-type'));
  const part: MimePart = { headers, contentType: type, params, rawBody: Buffer.from(body, 'latin1'), children: [] };
  const boundary = params['boundary'];
  if (type.startsWith('multipart/') && boundary && depth < MAX_DEPTH) {
    for (const chunk of splitMultipart(body, boundary)) {
      if (budget.parts <= 0) break;
      part.children.push(parseEntity(chunk, depth + 1, budget));
    }
  }
  return part;
}

/** The body parts between `--boundary` lines; a missing closing delimiter ends at the end of the text. */
function splitMultipart(body: string, boundary: string): string[] {
  const lines = body.split(/(?<=\n)/);
  const open = `--${boundary}`;
  const close = `--${boundary}--`;
  const parts: string[] = [];
  let current: string[] | undefined;
  const finish = (): void => {
    if (!current) return;
    // The line break before a delimiter belongs to the delimiter (RFC 2046 section 5.1.1).
    parts.push(current.join('').replace(/\r?\n$/, ''));
  };
  for (const line of lines) {
    const bare = line.replace(/[ \t]*\r?\n$/, '');
    if (bare === close || bare.startsWith(`${close} `)) {
      finish();
      current = undefined;
      return parts;
    }
    if (bare === open) {
      finish();
      current = [];
      continue;
    }
    current?.push(line);
  }
  finish();
  return parts;
}

function splitParams(value: string): string[] {
  const out: string[] = [];
  let current = '';
  let quoted = false;
  for (let i = 0; i < value.length; i++) {
    const ch = value[i] as string;
    if (ch === '\\' && quoted && i + 1 < value.length) {
      current += ch + value[++i];
      continue;
    }
    if (ch === '"') quoted = !quoted;
    if (ch === ';' && !quoted) {
      out.push(current);
      current = '';
      continue;
    }
    current += ch;
  }
  out.push(current);
  return out;
}

function decodeQuotedPrintable(text: string): Buffer {
  const unwrapped = text.replace(/=\r?\n/g, '');
  const bytes: number[] = [];
  for (let i = 0; i < unwrapped.length; i++) {
    const ch = unwrapped.charCodeAt(i);
    if (ch === 0x3d && /^[0-9A-Fa-f]{2}$/.test(unwrapped.slice(i + 1, i + 3))) {
      bytes.push(parseInt(unwrapped.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(ch & 0xff);
    }
  }
  return Buffer.from(bytes);
}
