import { generateKeyPairSync } from 'node:crypto';
import type { Readable } from 'node:stream';
import { simpleParser, type AddressObject, type ParsedMail } from 'mailparser';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import DKIM from 'nodemailer/lib/dkim/index.js';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { describe, expect, it } from 'vitest';
import { deriveKey, verifyTrackingToken } from '../../src/domain/tracking.js';
import type { EmailContent, EmailRecord } from '../../src/repositories/emails.repository.js';
import { composeMessage, createSigningKeys, outgoingHtml, type ComposeInput } from '../../src/sending/compose.js';
import { quotedPrintable } from '../../src/sending/mime.js';

const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const p = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
const now = new Date('2030-01-01T00:00:00Z');
const key = deriveKey('t'.repeat(64), 'tracking');

const email: EmailRecord = {
  id: 'em_abc', teamId: 'team_1', domainId: 'dom_1', from: 'Shop <shop@mail.example.com>', fromAddress: 'shop@mail.example.com',
  to: ['Ann <ann@example.org>'], toAddresses: ['ann@example.org'], cc: ['cc@example.org'], bcc: ['hidden@example.org'], replyTo: ['help@example.com'],
  subject: 'Grüße & hello', hasAttachments: true,
  messageId: '<em_abc@mail.example.com>', inReplyTo: '<em_prev@mail.example.com>', references: ['<em_root@mail.example.com>', '<em_prev@mail.example.com>'],
  latestStatus: 'QUEUED', events: [], sendState: 'PENDING',
  recipients: { pending: ['ann@example.org', 'cc@example.org', 'hidden@example.org'], accepted: [], bounced: [], suppressed: [], failed: [] },
  attempts: 1, suppressionCheckedAt: now, reportKeys: [], trackingEventCount: 0, outbox: [], version: 1, createdAt: now, updatedAt: now,
};

const content = {
  html: '<html><body><p>Hi</p><a href="https://shop.example/x">shop</a></body></html>', text: 'Hi',
  headers: [['X-Campaign', 'spring'], ['List-Unsubscribe', '<https://u.example/1>']] as const,
};

const identity = {
  domainId: 'dom_1', domainName: 'mail.example.com', dkimSelector: 'mf1', dkimPrivateKeyPem: pem, clickTracking: true, openTracking: true,
};

async function compose(over: Partial<typeof identity> = {}) {
  return composeMessage({
    email, content, identity: { ...identity, ...over }, attachments: [{ filename: 'report.pdf', content: Buffer.from('%PDF-1.4 test') }],
    tracking: { publicUrl: 'https://t.example.com', key }, date: now,
  });
}

describe('composeMessage', () => {
  it('builds a DKIM-signed message that verifies against the published key', async () => {
    const raw = await compose();
    const res = await dkimVerify(raw, {
      resolver: async (name: string, type: string) => {
        if (type === 'TXT' && name === 'mf1._domainkey.mail.example.com') return [[`v=DKIM1; k=rsa; p=${p}`]];
        throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
      },
    });
    expect(res.results).toHaveLength(1);
    expect(res.results[0]?.status.result).toBe('pass');
    expect(res.results[0]?.signingDomain).toBe('mail.example.com');
  });

  it('signs with a key parsed once and kept: the signature still verifies, and the same key object serves the next message', async () => {
    const keys = createSigningKeys(2);
    const resolver = async (name: string, type: string) => {
      if (type === 'TXT' && name === 'mf1._domainkey.mail.example.com') return [[`v=DKIM1; k=rsa; p=${p}`]];
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    };
    for (let i = 0; i < 2; i++) {
      const raw = await composeMessage({ email, content, identity, attachments: [], tracking: { publicUrl: 'https://t.example.com', key }, date: now, signingKeys: keys });
      expect((await dkimVerify(raw, { resolver })).results[0]?.status.result).toBe('pass');
    }
    expect(keys.of(pem)).toBe(keys.of(pem));
    // Bounded: past `max` keys the oldest is parsed again when it comes back.
    const first = keys.of(pem);
    for (const bits of [1024, 1024]) keys.of(generateKeyPairSync('rsa', { modulusLength: bits }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
    expect(keys.of(pem)).not.toBe(first);
  });

  it('carries the stored headers, hides Bcc, and attaches files', async () => {
    const raw = await compose();
    const parsed = await simpleParser(raw);
    expect(parsed.messageId).toBe('<em_abc@mail.example.com>');
    expect(parsed.inReplyTo).toBe('<em_prev@mail.example.com>');
    expect(parsed.references).toEqual(['<em_root@mail.example.com>', '<em_prev@mail.example.com>']);
    expect(parsed.subject).toBe('Grüße & hello');
    expect(parsed.headers.get('x-campaign')).toBe('spring');
    expect(raw.toString()).not.toMatch(/hidden@example\.org/);
    expect(parsed.attachments.map((a) => a.filename)).toEqual(['report.pdf']);
    expect(parsed.text?.trim()).toBe('Hi');
  });

  it('adds the pixel and tracked links only where the domain enables them', async () => {
    const tracked = (await simpleParser(await compose())).html as string;
    const link = /href="https:\/\/t\.example\.com\/v1\/track\/click\?t=([^"]+)"/.exec(tracked)?.[1];
    expect(verifyTrackingToken(key, link ?? '', 'click')?.url).toBe('https://shop.example/x');
    expect(tracked).toMatch(/<img src="https:\/\/t\.example\.com\/v1\/track\/open\?t=[^"]+"/);
    const plain = (await simpleParser(await compose({ clickTracking: false, openTracking: false }))).html as string;
    expect(plain).toContain('href="https://shop.example/x"');
    expect(plain).not.toContain('/v1/track/');
  });
});

// ---- the direct composer against nodemailer's MailComposer + DKIM signer (the composer it replaced) ----------

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  return Buffer.concat(chunks);
}

/** The previous composeMessage, kept here as the reference: what nodemailer sends for the same input. */
async function referenceCompose(input: ComposeInput, sign = true): Promise<Buffer> {
  const { email, identity, content } = input;
  const composer = new MailComposer({
    from: email.from,
    to: [...email.to],
    ...(email.cc.length > 0 ? { cc: [...email.cc] } : {}),
    ...(email.replyTo.length > 0 ? { replyTo: [...email.replyTo] } : {}),
    subject: email.subject,
    ...(content.text !== undefined ? { text: content.text } : {}),
    ...(content.html !== undefined ? { html: outgoingHtml(email.id, content.html, identity, input.tracking) } : {}),
    messageId: email.messageId,
    date: input.date,
    ...(email.inReplyTo ? { inReplyTo: email.inReplyTo } : {}),
    ...(email.references.length > 0 ? { references: [...email.references] } : {}),
    headers: content.headers.map(([key, value]) => ({ key, value })),
    attachments: input.attachments.map((a) => ({ filename: a.filename, content: a.content })),
    ...(content.text === undefined && content.html === undefined ? { text: '' } : {}),
  });
  const unsigned = await collect(composer.compile().createReadStream());
  if (!sign) return unsigned;
  const signer = new DKIM({
    domainName: identity.domainName,
    keySelector: identity.dkimSelector,
    privateKey: identity.dkimPrivateKeyPem,
    headerFieldNames: 'from:sender:reply-to:subject:date:message-id:to:cc:mime-version:content-type:content-transfer-encoding:in-reply-to:references:list-unsubscribe:list-unsubscribe-post',
  });
  return collect(signer.sign(unsigned));
}

const resolver = async (name: string, type: string) => {
  if (type === 'TXT' && name === 'mf1._domainkey.mail.example.com') return [[`v=DKIM1; k=rsa; p=${p}`]];
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
};

const plain: EmailRecord = {
  ...email, to: ['ann@example.org'], cc: [], bcc: ['hidden@example.org'], replyTo: [], subject: 'Spring news', inReplyTo: undefined, references: [], hasAttachments: false,
};
const longLine = `${'0123456789 abcdefghij'.repeat(40)}${'x'.repeat(1200)}`;
const paragraphs = Array.from({ length: 8 }, (_, i) => `Line ${i}: the quick brown fox jumps over the lazy dog, again and again (${i}).`).join('\n');

interface Case {
  readonly name: string;
  readonly email?: Partial<EmailRecord>;
  readonly content: EmailContent;
  readonly attachments?: readonly { filename: string; content: Buffer }[];
  readonly tracking?: boolean;
  /** Whether the header block is expected byte for byte as nodemailer wrote it (boundaries aside). */
  readonly sameHeaders?: boolean;
}

const cases: readonly Case[] = [
  { name: 'ASCII, text and html', content: { text: paragraphs, html: `<p>${paragraphs.replace(/\n/g, '</p>\n<p>')}</p>`, headers: [] } },
  {
    name: 'Unicode subject and display names, cc, reply-to',
    email: {
      subject: 'Grüße aus Köln – 春の便り 🌸 "quoted"', from: 'Jürgen Müller <shop@mail.example.com>',
      to: ['Zoë Ångström <zoe@example.org>', '山田 太郎 <taro@example.jp>', 'plain@example.net'], cc: ['"Doe, Jane" <jane@example.org>', 'Ünal <unal@example.org>'],
      replyTo: ['Support Team (EU) <help@example.com>'],
    },
    content: { text: 'Grüße, 世界! 🌸', html: '<p>Grüße, 世界! 🌸</p>', headers: [] },
  },
  {
    name: 'Unicode local part and domain',
    email: { to: ['Jürgen <jürgen@bücher.example>', 'ÄNN@EXAMPLE.ORG'], cc: ['x@ÜBER.example'] },
    content: { text: 'Hi', headers: [] },
  },
  { name: 'long ASCII subject', email: { subject: Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ') }, content: { text: 'Hi', headers: [] } },
  { name: 'long Unicode subject', email: { subject: 'Привет, мир! Это длинная тема письма. '.repeat(10) }, content: { text: 'Привет', headers: [] } },
  { name: 'subject of one 990-character word', email: { subject: 'a'.repeat(990) }, content: { text: 'Hi', headers: [] }, sameHeaders: false },
  { name: 'text only', content: { text: 'Just text.\nTwo lines.', headers: [] } },
  { name: 'quotes in an ASCII subject and header', email: { subject: 'Say "hello" to spring' }, content: { text: 'Hi', headers: [['X-Quote', 'say "hi"']] } },
  { name: 'emoji and CJK in mostly Latin text (quoted-printable)', content: { text: `Hello there, a flower 🌸 and 世界 for you, with a long line: ${'more words here '.repeat(8)}🌸`, headers: [] } },
  { name: 'html only', content: { html: '<h1>Only html</h1>', headers: [] } },
  { name: 'neither text nor html', content: { headers: [] } },
  { name: 'empty text and html', content: { text: '', html: '', headers: [] } },
  { name: 'lines longer than 998 characters', content: { text: `start\n${longLine}\nend`, html: `<div>${longLine}</div>`, headers: [] } },
  { name: 'long Unicode line', content: { text: `${'é'.repeat(500)} ${'ß'.repeat(700)}`, headers: [] } },
  {
    name: 'lines starting with "From " and "."',
    content: { text: 'From here on\n.\n..dots\n.leading dot\nFrom: not a header\n', html: '<p>\nFrom the html\n.\n</p>', headers: [] },
  },
  {
    name: 'CRLF, LF and CR mixed, trailing and repeated whitespace',
    content: { text: 'a\r\nb\nc\rd\r\n\ne  f\t\tg \nh\t\n\n\n', html: '<p>a</p>\r<p>b</p>\n<p>c  d</p> \r\n\r\n', headers: [] },
  },
  {
    name: 'custom headers',
    content: {
      text: 'Hi', headers: [
        ['List-Unsubscribe', '<https://u.example.com/unsubscribe?t=abcdefghijklmnopqrstuvwxyz0123456789>, <mailto:u@example.com?subject=unsub>'],
        ['List-Unsubscribe-Post', 'List-Unsubscribe=One-Click'],
        ['x-entity-ref-id', 'abc-123'], ['X-Campaign', 'Grüße "spring"'], ['X-Empty', ''], ['X-Long', Array.from({ length: 30 }, (_, i) => `v${i}`).join(' ')],
      ],
    },
  },
  {
    name: 'threading',
    email: { inReplyTo: '<em_prev@mail.example.com>', references: ['<em_root@mail.example.com>', '<em_a@mail.example.com> <em_b@mail.example.com>', '<em_prev@mail.example.com>'] },
    content: { text: 'Re: hi', headers: [] },
  },
  { name: 'Cyrillic text (base64)', content: { text: 'Здравствуйте! Это письмо на русском языке.\nВторая строка.', headers: [] } },
  { name: 'tracked html', content: { text: 'Hi', html: '<html><body><p>Hi</p><a href="https://shop.example/x">shop</a></body></html>', headers: [] }, tracking: true },
  {
    name: 'an attachment with text and html',
    content: { text: 'See attached.', html: '<p>See attached.</p>', headers: [['List-Unsubscribe', '<https://u.example/1>']] },
    attachments: [{ filename: 'report.pdf', content: Buffer.from('%PDF-1.4 test '.repeat(40)) }],
  },
  {
    name: 'attachments without text, Unicode and spaced file names',
    content: { headers: [] },
    attachments: [{ filename: 'Übersicht März 2030.csv', content: Buffer.from('a,b\n1,2\n') }, { filename: 'logo image.png', content: Buffer.from([0, 1, 2, 250, 251, 252]) }],
  },
  { name: 'one attachment and nothing else', content: { headers: [] }, attachments: [{ filename: 'data.json', content: Buffer.from('{"a":1}') }] },
  {
    name: 'an attachment with text only',
    content: { text: 'One part.', headers: [] },
    attachments: [{ filename: 'a-very-long-file-name-that-goes-on-and-on-and-on-past-the-parameter-limit.txt', content: Buffer.from('x') }],
  },
];

function inputOf(c: Case): ComposeInput {
  return {
    email: { ...plain, ...c.email, hasAttachments: (c.attachments ?? []).length > 0 }, content: c.content,
    identity: { ...identity, clickTracking: c.tracking ?? false, openTracking: c.tracking ?? false },
    attachments: c.attachments ?? [], tracking: { publicUrl: 'https://t.example.com', key }, date: now,
  };
}

function split(raw: Buffer): { head: string; body: string } {
  const s = raw.toString('utf8');
  const at = s.indexOf('\r\n\r\n');
  return { head: s.slice(0, at + 2), body: s.slice(at + 4) };
}

/** The header fields without the DKIM signature, boundaries named by their part number only. */
function comparableHeaders(raw: Buffer): string {
  const fields = split(raw).head.split(/\r\n(?![ \t])/).filter((f) => f !== '' && !/^dkim-signature:/i.test(f));
  return fields.join('\r\n').replace(/--_NmP-[0-9a-f]{16}-Part_(\d+)/g, 'BOUNDARY_$1');
}

const lf = (s: string | false | undefined): string | undefined => (typeof s === 'string' ? s.replace(/\r\n?/g, '\n') : undefined);
const addresses = (a: AddressObject | AddressObject[] | undefined) => [a ?? []].flat().flatMap((o) => o.value.map((v) => ({ name: v.name, address: v.address })));

function decoded(m: ParsedMail) {
  return {
    subject: m.subject, from: addresses(m.from), to: addresses(m.to), cc: addresses(m.cc), replyTo: addresses(m.replyTo),
    messageId: m.messageId, inReplyTo: m.inReplyTo, references: m.references, date: m.date?.toISOString(),
    text: lf(m.text), html: lf(m.html),
    attachments: m.attachments.map((a) => ({ filename: a.filename, contentType: a.contentType, content: a.content.toString('base64') })),
    headers: ['list-unsubscribe', 'list-unsubscribe-post', 'x-entity-ref-id', 'x-campaign', 'x-long', 'x-empty', 'x-quote'].map((h) => m.headers.get(h)),
  };
}

describe('composeMessage builds what nodemailer built, signed', () => {
  it.each(cases)('$name: DKIM passes and the message parses as nodemailer\'s did', async (c) => {
    const input = inputOf(c);
    const raw = await composeMessage(input);
    const reference = await referenceCompose(input, false);

    const verified = await dkimVerify(raw, { resolver });
    expect(verified.results).toHaveLength(1);
    expect(verified.results[0]?.status.result).toBe('pass');
    expect(verified.results[0]?.signingDomain).toBe('mail.example.com');

    expect(decoded(await simpleParser(raw))).toEqual(decoded(await simpleParser(reference)));
    if (c.sameHeaders !== false) expect(comparableHeaders(raw)).toBe(comparableHeaders(reference));
    // The same transfer encoding for every part, in the same order.
    const encodings = (b: Buffer) => [...b.toString('utf8').matchAll(/^Content-Transfer-Encoding: (.*)$/gim)].map((m) => m[1]);
    expect(encodings(raw)).toEqual(encodings(reference));
  });

  it.each(cases)('$name: CRLF only, lines folded, DKIM-Signature first with the headers present, no Bcc', async (c) => {
    const raw = await composeMessage(inputOf(c));
    const text = raw.toString('utf8');
    expect(text).not.toMatch(/\r(?!\n)|(?<!\r)\n/);
    expect(text.endsWith('\r\n')).toBe(true);
    const { head, body } = split(raw);
    for (const line of head.split('\r\n')) {
      expect(line.length).toBeLessThanOrEqual(998);
      // Longer than 78 only where there is no whitespace to fold at (a long file name parameter).
      if (line.length > 78) expect(line).toMatch(/^[ \t]?\S+$/);
    }
    for (const line of body.split('\r\n')) {
      // Body text is encoded to lines of at most 76; only a part's header (a folded parameter) may be longer.
      if (line.length > 78) expect(line).toMatch(/^[ \t]\S+$/);
    }
    expect(head.replace(/\r\n[ \t]/g, ' ')).toMatch(/^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=mail\.example\.com; q=dns\/txt; s=mf1;/);
    const h = /; h=([^;]+);/.exec(head.replace(/\r\n[ \t]/g, ' '))?.[1]?.replace(/\s/g, '').split(':');
    const present = (name: string) => new RegExp(`^${name}:`, 'im').test(head);
    expect(h).toEqual(['from', 'sender', 'reply-to', 'subject', 'date', 'message-id', 'to', 'cc', 'mime-version', 'content-type', 'content-transfer-encoding', 'in-reply-to', 'references', 'list-unsubscribe', 'list-unsubscribe-post'].filter(present));
    expect(h).toContain('from');
    expect(text).not.toMatch(/hidden@example\.org|^bcc:/im);
    expect(head).toMatch(/^Message-ID: <em_abc@mail\.example\.com>$/m);
  });

  it('a changed body or a changed signed header fails DKIM', async () => {
    for (const c of cases) {
      const raw = (await composeMessage(inputOf(c))).toString('utf8');
      const at = raw.indexOf('\r\n\r\n') + 4;
      let bodyTampered: string;
      const i = raw.slice(at + Math.floor((raw.length - at) / 2)).search(/[A-Za-z0-9]/);
      if (i < 0) {
        bodyTampered = `${raw}x\r\n`;
      } else {
        const pos = at + Math.floor((raw.length - at) / 2) + i;
        bodyTampered = raw.slice(0, pos) + (raw[pos] === 'Q' ? 'R' : 'Q') + raw.slice(pos + 1);
      }
      const body = await dkimVerify(Buffer.from(bodyTampered), { resolver });
      expect(body.results[0]?.status.result, c.name).toBe('neutral');
      expect(body.results[0]?.status.comment, c.name).toBe('body hash did not verify');
      const header = await dkimVerify(Buffer.from(raw.replace(/^Message-ID: <em_abc@/m, 'Message-ID: <em_abd@')), { resolver });
      expect(header.results[0]?.status.result, c.name).toBe('fail');
    }
  });

  it('gives every message its own boundaries', async () => {
    const c = cases.find((x) => x.name === 'an attachment with text and html') as Case;
    const boundaries = async () => [...(await composeMessage(inputOf(c))).toString().matchAll(/boundary="([^"]+)"/g)].map((m) => m[1]);
    const [a, b] = [await boundaries(), await boundaries()];
    expect(a).toHaveLength(2);
    expect(new Set([...a, ...(b ?? [])]).size).toBe(4);
  });

  it('signs as nodemailer signed: the reference signature verifies over the same headers', async () => {
    // Both signatures are over the same relaxed header set, so the h= lists match.
    const input = inputOf(cases[1] as Case);
    const mine = (await composeMessage(input)).toString();
    const theirs = (await referenceCompose(input)).toString();
    const tags = (m: string) => /^DKIM-Signature:[\s\S]*?bh=/m.exec(m)?.[0].replace(/\s+/g, ' ');
    expect(tags(mine)).toBe(tags(theirs));
    const hOf = (m: string) => /; h=([^;]+);/.exec(m.replace(/\r\n[ \t]/g, ' '))?.[1]?.replace(/\s/g, '');
    expect(hOf(mine)).toBe(hOf(theirs));
    expect((await dkimVerify(Buffer.from(theirs), { resolver })).results[0]?.status.result).toBe('pass');
  });
});

describe('quotedPrintable', () => {
  const decode = (qp: string) => Buffer.from(qp.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16))), 'latin1').toString('utf8');

  it('escapes "=", control characters, non-ASCII and whitespace at line ends, keeps hard breaks, soft-breaks at 76 without cutting an escape', () => {
    const text = `a = b\tc \r\ntab\t\r\n\u0001ctl\r\nGrüße 🌸 ${'é'.repeat(60)}\r\n${'x'.repeat(74)}=yz${'w'.repeat(200)} \r\n`;
    const qp = quotedPrintable(text);
    expect(decode(qp)).toBe(text);
    const lines = qp.split('\r\n');
    for (const line of lines) {
      expect(line.length).toBeLessThanOrEqual(76);
      expect(line).not.toMatch(/[ \t]$/);
      expect(line).toMatch(/^(?:[\t\x20-\x3c\x3e-\x7e]|=[0-9A-F]{2})*=?$/);
    }
    expect(lines.slice(0, 3)).toEqual(['a =3D b\tc=20', 'tab=09', '=01ctl']);
    expect(qp).toContain('Gr=C3=BC=C3=9Fe =F0=9F=8C=B8');
  });

  it('never cuts an escape at a soft break, wherever it falls', () => {
    for (let k = 70; k <= 76; k++) {
      const text = `${'x'.repeat(k)}=é${'y'.repeat(100)}`;
      const qp = quotedPrintable(text);
      expect(decode(qp)).toBe(text);
      for (const line of qp.split('\r\n')) {
        expect(line.length).toBeLessThanOrEqual(76);
        expect(line).toMatch(/^(?:[\t\x20-\x3c\x3e-\x7e]|=[0-9A-F]{2})*=?$/);
      }
    }
  });
});
