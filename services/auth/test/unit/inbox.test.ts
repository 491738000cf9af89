import { describe, expect, it } from 'vitest';
import { INBOX_USAGE, InboxUsageError, runInbox, textOf } from '../../src/cli/inbox.js';
import { runCli } from '../../src/cli/mailfleet.js';

const message = (id: string, at: string, emailId: string, subject: string) => ({
  id,
  receivedAt: new Date(at),
  mailFrom: 'bounces+x@bounces.example.com',
  rcptTo: ['you@example.org'],
  raw: Buffer.from(
    [
      'DKIM-Signature: v=1; a=rsa-sha256; d=example.com; s=mf1; b=abc',
      'From: Example <hello@example.com>',
      'To: you@example.org',
      `Subject: ${subject}`,
      `Message-ID: <${emailId}@example.com>`,
      'Content-Type: multipart/alternative; boundary="--b1"',
      '',
      '----b1',
      'Content-Type: text/plain; charset=utf-8',
      'Content-Transfer-Encoding: quoted-printable',
      '',
      'Caf=C3=A9 is open.',
      '----b1',
      'Content-Type: text/html; charset=utf-8',
      '',
      '<p>Café</p>',
      '----b1--',
      '',
    ].join('\r\n'),
  ),
});

function fakeReaders(dkim = 'pass') {
  const checked: string[] = [];
  return {
    checked,
    readers: {
      readMailStore: async () => [
        message('1700000000000-a', '2026-11-23T10:00:00Z', 'em_old', 'Older'),
        message('1700000001000-b', '2026-11-23T11:00:00Z', 'em_new', '=?UTF-8?Q?Caf=C3=A9?= news'),
      ],
      readLocalDnsState: async () => ({ address: '127.0.0.1:5300' }),
      verifyDkim: async (raw: Buffer, address: string) => {
        checked.push(address);
        return [{ result: dkim, domain: 'example.com', ...(dkim === 'pass' ? {} : { comment: 'bad signature' }) }];
      },
    },
  };
}

async function run(argv: string[], readers = fakeReaders().readers): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const code = await runInbox(argv, { MAILFLEET_DATA_DIR: '/tmp/nowhere' }, (t) => lines.push(t), readers);
  return { code, out: lines.join('\n') };
}

describe('mailfleet inbox', () => {
  it('lists newest first with the email id and the DKIM result checked against the local DNS', async () => {
    const fake = fakeReaders();
    const { code, out } = await run([], fake.readers);
    expect(code).toBe(0);
    const rows = out.split('\n');
    expect(rows[0]).toMatch(/^TIME\s+FROM\s+TO\s+SUBJECT\s+EMAIL ID\s+DKIM$/);
    expect(rows[1]).toMatch(/2026-11-23 11:00:00Z .*Café news\s+em_new\s+dkim=pass \(d=example\.com\)$/);
    expect(rows[2]).toContain('em_old');
    expect(fake.checked).toEqual(['127.0.0.1:5300', '127.0.0.1:5300']);
  });

  it('says when a signature does not verify', async () => {
    const { out } = await run(['--limit', '1', '--json'], fakeReaders('fail').readers);
    const rows = JSON.parse(out) as Array<{ emailId: string; dkim: string }>;
    expect(rows).toEqual([expect.objectContaining({ emailId: 'em_new', dkim: 'dkim=fail (d=example.com) bad signature' })]);
  });

  it('shows one message by email id: headers and its text part', async () => {
    const { code, out } = await run(['show', 'em_old']);
    expect(code).toBe(0);
    expect(out).toContain('DKIM: dkim=pass (d=example.com)');
    expect(out).toContain('Subject: Older');
    expect(out.trimEnd().endsWith('Café is open.')).toBe(true);
    expect((await run(['show', 'em_missing'])).code).toBe(1);
  });

  it('--help lists the mailbox simulator addresses; bad usage is a usage error', async () => {
    const { code, out } = await run(['--help']);
    expect(code).toBe(0);
    expect(out).toBe(INBOX_USAGE);
    for (const address of ['bounce@', 'softbounce@', 'complaint@']) expect(out).toContain(address);
    await expect(run(['delete'])).rejects.toBeInstanceOf(InboxUsageError);
    await expect(run(['show'])).rejects.toBeInstanceOf(InboxUsageError);
  });

  it('decodes base64 single-part text', () => {
    const raw = Buffer.from(`Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n${Buffer.from('héllo\r\n').toString('base64')}\r\n`);
    expect(textOf(raw)).toBe('héllo');
  });

  it('is dispatched by the mailfleet command without reaching for the auth service', async () => {
    const lines: string[] = [];
    const code = await runCli(['inbox', '--help'], { AUTH_GRPC_ADDR: '127.0.0.1:1' }, { json: false, print: (t) => lines.push(t) });
    expect(code).toBe(0);
    expect(lines.join('\n')).toBe(INBOX_USAGE);
  });
});
