import path from 'node:path';
import { parseArgs } from 'node:util';

/**
 * `mailfleet inbox`: the dev inbox of local mode, i.e. what the embedded SMTP sink of `npm start`
 * holds. It reads the sink's mail dir (`<MAILFLEET_DATA_DIR>/mail`) and checks each message's
 * DKIM signature against local mode's DNS server, over DNS as a receiver would.
 *
 * The readers live in the deploy package (the local runner), which is not part of the auth
 * image: they are loaded from the repository checkout when the command runs, so the command
 * works from a clone (`npx mailfleet inbox`) and says so elsewhere.
 */
export const INBOX_USAGE = `mailfleet inbox — the messages the embedded SMTP sink of \`npm start\` holds (local mode)

Usage:
  mailfleet inbox [--limit N] [--json]
      Newest first: time, from, to, subject, email id, DKIM result (checked against the local DNS server).
  mailfleet inbox show ID [--json]
      One message (ID: the email id from the API, or the sink's message id): its headers and text.

Mailbox simulator: the sink answers these recipient addresses (any domain, also with a +tag,
e.g. bounce+1@example.org) like real mailboxes do:
  bounce@…       refused at RCPT TO with 550 5.1.1 (user unknown): the email is BOUNCED
                 (permanent) and the address goes on the team's suppression list.
  softbounce@…   the first attempt is deferred with 451 4.2.0, the retry is accepted: the email
                 shows a DELIVERY_DELAYED event and then DELIVERED.
  complaint@…    accepted, then a spam complaint (an ARF feedback report) comes back: the email
                 is COMPLAINED and the address is suppressed.
  anything else  accepted and kept here; a delivery report comes back: the email is DELIVERED.

Environment: MAILFLEET_DATA_DIR (default .data in the repository).`;

interface StoredMessage {
  id: string;
  receivedAt: Date;
  mailFrom: string | undefined;
  rcptTo: string[];
  raw: Buffer;
}
interface DkimResult {
  result: string;
  domain?: string;
  comment?: string;
}
/** The deploy package's readers this command uses (deploy/src/mail-store.ts, deploy/src/local-dns.ts). */
interface DevInboxReaders {
  readMailStore(mailDir: string): Promise<StoredMessage[]>;
  readLocalDnsState(dataDir: string): Promise<{ address: string } | undefined>;
  verifyDkim(raw: Buffer, dnsAddress: string): Promise<DkimResult[]>;
}

export class InboxUsageError extends Error {}

type Print = (text: string) => void;

/** `<repo>/deploy/dist/` seen from `<repo>/services/auth/dist/cli/inbox.js`. */
const DEPLOY_DIST = new URL('../../../../deploy/dist/', import.meta.url);

async function loadReaders(): Promise<DevInboxReaders> {
  try {
    const [store, dns] = await Promise.all([
      import(new URL('mail-store.js', DEPLOY_DIST).href) as Promise<Pick<DevInboxReaders, 'readMailStore'>>,
      import(new URL('local-dns.js', DEPLOY_DIST).href) as Promise<Omit<DevInboxReaders, 'readMailStore'>>,
    ]);
    return { readMailStore: store.readMailStore, readLocalDnsState: dns.readLocalDnsState, verifyDkim: dns.verifyDkim };
  } catch (err) {
    throw new Error(`the dev inbox needs the repository's built deploy package (run it from a clone after \`npm start\`): ${(err as Error).message}`);
  }
}

function dataDirOf(env: NodeJS.ProcessEnv): string {
  const fromEnv = env['MAILFLEET_DATA_DIR'];
  return fromEnv ? path.resolve(fromEnv) : path.resolve(new URL('../../../../', import.meta.url).pathname, '.data');
}

export async function runInbox(argv: string[], env: NodeJS.ProcessEnv, print: Print, readers?: DevInboxReaders): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { json: { type: 'boolean', default: false }, limit: { type: 'string' }, help: { type: 'boolean', short: 'h', default: false } },
    strict: true,
  });
  if (values.help) {
    print(INBOX_USAGE);
    return 0;
  }
  const [verb, id, ...rest] = positionals;
  if (rest.length > 0 || (verb !== undefined && verb !== 'show') || (verb === 'show' && !id)) {
    throw new InboxUsageError(verb === 'show' ? 'inbox show takes one ID' : `unknown inbox command: ${positionals.join(' ')}`);
  }
  const limit = values.limit === undefined ? 20 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1) throw new InboxUsageError('--limit must be an integer >= 1');

  const r = readers ?? (await loadReaders());
  const dataDir = dataDirOf(env);
  const messages = (await r.readMailStore(path.join(dataDir, 'mail'))).reverse();
  const dns = await r.readLocalDnsState(dataDir);
  const dkimOf = async (m: StoredMessage): Promise<string> => {
    if (!dns) return 'dkim=unknown (local mode is not running)';
    try {
      return formatDkim(await r.verifyDkim(m.raw, dns.address));
    } catch (err) {
      return `dkim=temperror (${(err as Error).message})`;
    }
  };

  if (verb === 'show') {
    const m = messages.find((x) => x.id === id || emailIdOf(parseHeaders(x.raw)) === id);
    if (!m) {
      print(`no message ${id} in ${path.join(dataDir, 'mail')} (npx mailfleet inbox lists them)`);
      return 1;
    }
    const headers = parseHeaders(m.raw);
    const dkim = await dkimOf(m);
    const text = textOf(m.raw);
    if (values.json) {
      print(JSON.stringify({ ...summary(m, headers), dkim, headers: headers.map(([k, v]) => ({ name: k, value: v })), text }));
      return 0;
    }
    print([
      `Sink-Id: ${m.id}`,
      `Received-At: ${m.receivedAt.toISOString()}`,
      `Envelope: MAIL FROM:<${m.mailFrom ?? '?'}> RCPT TO:${m.rcptTo.map((t) => `<${t}>`).join(',') || '?'}`,
      `DKIM: ${dkim}`,
      '',
      ...headers.map(([k, v]) => `${k}: ${v}`),
      '',
      text ?? '(no text part)',
    ].join('\n'));
    return 0;
  }

  const shown = messages.slice(0, limit);
  const rows = await Promise.all(shown.map(async (m) => ({ ...summary(m, parseHeaders(m.raw)), dkim: await dkimOf(m) })));
  if (values.json) {
    print(JSON.stringify(rows));
    return 0;
  }
  if (rows.length === 0) {
    print(`the inbox is empty (${path.join(dataDir, 'mail')})`);
    return 0;
  }
  const table = [
    ['TIME', 'FROM', 'TO', 'SUBJECT', 'EMAIL ID', 'DKIM'],
    ...rows.map((x) => [x.receivedAt.replace('T', ' ').replace(/\.\d+Z$/, 'Z'), x.from, x.to, x.subject, x.emailId ?? x.id, x.dkim]),
  ].map((cols) => cols.map((c, i) => (i < 4 ? clip(c, i === 3 ? 40 : 32) : c)));
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  print(table.map((row) => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n'));
  if (messages.length > shown.length) print(`(${messages.length - shown.length} older not shown; --limit N)`);
  return 0;
}

function summary(m: StoredMessage, headers: Array<[string, string]>) {
  const get = (name: string): string => headers.find(([k]) => k.toLowerCase() === name)?.[1] ?? '';
  return {
    id: m.id,
    emailId: emailIdOf(headers),
    receivedAt: m.receivedAt.toISOString(),
    from: get('from'),
    to: m.rcptTo.length > 0 ? m.rcptTo.join(', ') : get('to'),
    subject: get('subject'),
  };
}

function clip(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

function formatDkim(results: DkimResult[]): string {
  return results
    .map((r) => `dkim=${r.result}${r.domain ? ` (d=${r.domain})` : ''}${r.result !== 'pass' && r.comment ? ` ${r.comment}` : ''}`)
    .join(', ');
}

/** mailfleet's Message-ID is `<emailId@domain>`; other mail has no email id. */
function emailIdOf(headers: Array<[string, string]>): string | undefined {
  const mid = headers.find(([k]) => k.toLowerCase() === 'message-id')?.[1];
  const m = mid ? /^<([A-Za-z0-9_-]+)@[^>]+>$/.exec(mid.trim()) : null;
  return m?.[1];
}

/** The top-level header fields, unfolded, encoded words decoded, in order. */
export function parseHeaders(raw: Buffer): Array<[string, string]> {
  const text = raw.toString('utf8');
  const end = text.search(/\r?\n\r?\n/);
  const block = end < 0 ? text : text.slice(0, end);
  const fields: Array<[string, string]> = [];
  for (const line of block.split(/\r?\n/)) {
    if (/^[ \t]/.test(line) && fields.length > 0) {
      const last = fields[fields.length - 1]!;
      last[1] += ` ${line.trim()}`;
      continue;
    }
    const colon = line.indexOf(':');
    if (colon > 0) fields.push([line.slice(0, colon), line.slice(colon + 1).trim()]);
  }
  return fields.map(([k, v]) => [k, decodeWords(v)]);
}

/** RFC 2047 encoded words (`=?utf-8?Q?...?=`, `=?utf-8?B?...?=`). */
function decodeWords(value: string): string {
  return value
    .replace(/\?=\s+=\?/g, '?==?')
    .replace(/=\?([^?]+)\?([QqBb])\?([^?]*)\?=/g, (_all, _charset: string, enc: string, data: string) =>
      enc.toUpperCase() === 'B'
        ? Buffer.from(data, 'base64').toString('utf8')
        : Buffer.from(decodeQp(data.replace(/_/g, ' ')), 'latin1').toString('utf8'),
    );
}

function decodeQp(s: string): string {
  return s.replace(/=\r?\n/g, '').replace(/=([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)));
}

/** The first text/plain part, transfer-decoded (the message is mailfleet's own: UTF-8). */
export function textOf(raw: Buffer): string | undefined {
  return textPart(raw.toString('latin1'));
}

function textPart(entity: string): string | undefined {
  const split = entity.search(/\r?\n\r?\n/);
  const head = split < 0 ? entity : entity.slice(0, split);
  const body = split < 0 ? '' : entity.slice(split).replace(/^\r?\n\r?\n/, '');
  const headers = parseHeaders(Buffer.from(head, 'latin1'));
  const get = (name: string): string => headers.find(([k]) => k.toLowerCase() === name)?.[1] ?? '';
  const type = get('content-type').toLowerCase() || 'text/plain';
  if (type.startsWith('multipart/')) {
    const boundary = /boundary="?([^";]+)"?/i.exec(get('content-type'))?.[1];
    if (!boundary) return undefined;
    const parts = body.split(`--${boundary}`).slice(1);
    for (const part of parts) {
      if (part.startsWith('--')) break;
      const found = textPart(part.replace(/^\r?\n/, ''));
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (!type.startsWith('text/plain')) return undefined;
  const encoding = get('content-transfer-encoding').toLowerCase();
  const bytes =
    encoding === 'base64'
      ? Buffer.from(body.replace(/\s+/g, ''), 'base64')
      : encoding === 'quoted-printable'
        ? Buffer.from(decodeQp(body), 'latin1')
        : Buffer.from(body, 'latin1');
  return bytes.toString('utf8').replace(/\r\n/g, '\n').trimEnd();
}
