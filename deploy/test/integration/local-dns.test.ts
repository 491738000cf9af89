import { generateKeyPairSync } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { createSmtpSink, readLocalDnsState, readMailStore, startLocalDns, verifyDkim, type LocalDns } from '@mailfleet/deploy';
import nodemailer from 'nodemailer';
import DKIM from 'nodemailer/lib/dkim/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let dataDir: string;
let dns: LocalDns;

const resolverFor = (address: string): Resolver => {
  const r = new Resolver({ timeout: 1_000, tries: 1 });
  r.setServers([address]);
  return r;
};
const txt = async (address: string, name: string): Promise<string[]> =>
  (await resolverFor(address).resolveTxt(name)).map((chunks) => chunks.join('')).sort();

async function put(owner: string, records: unknown[], base = dns.controlUrl): Promise<number> {
  const res = await fetch(`${base}/owners/${owner}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ records }) });
  return res.status;
}

beforeAll(async () => {
  dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-local-dns-'));
  dns = await startLocalDns({ dataDir });
});
afterAll(async () => {
  await dns?.close();
  await fsp.rm(dataDir, { recursive: true, force: true });
});

describe('local DNS server', () => {
  it('serves the union of the owners, equal values once, and forgets one owner on delete', async () => {
    const spf = { name: 'bounces.shared.example.test', type: 'TXT', value: 'v=spf1 include:_spf.mailfleet.local ~all' };
    expect(await put('dom_a', [spf, { name: '_mailfleet.shared.example.test', type: 'TXT', value: 'mailfleet-verification=a' }])).toBe(204);
    expect(await put('dom_b', [spf, { name: '_mailfleet.shared.example.test', type: 'TXT', value: 'mailfleet-verification=b' },
      { name: 'bounces.shared.example.test', type: 'MX', value: 'bounces.mailfleet.local', priority: 10 }])).toBe(204);

    expect(await txt(dns.address, '_mailfleet.shared.example.test')).toEqual(['mailfleet-verification=a', 'mailfleet-verification=b']);
    expect(await txt(dns.address, 'bounces.shared.example.test')).toEqual([spf.value]);
    expect(await resolverFor(dns.address).resolveMx('bounces.shared.example.test')).toEqual([{ exchange: 'bounces.mailfleet.local', priority: 10 }]);

    expect((await fetch(`${dns.controlUrl}/owners/dom_a`, { method: 'DELETE' })).status).toBe(204);
    expect(await txt(dns.address, '_mailfleet.shared.example.test')).toEqual(['mailfleet-verification=b']);
    expect(await txt(dns.address, 'bounces.shared.example.test')).toEqual([spf.value]);
  });

  it('refuses a control call without its secret prefix and a malformed record', async () => {
    const bare = new URL(dns.controlUrl).origin;
    expect(await put('dom_x', [{ name: 'x.example.test', type: 'TXT', value: 'x' }], bare)).toBe(404);
    expect(await put('dom_x', [{ name: 'x.example.test', type: 'A', value: '127.0.0.1' }])).toBe(400);
    expect(dns.records()['dom_x']).toBeUndefined();
  });

  it('keeps the zone across a restart and says where it runs while it runs', async () => {
    expect((await readLocalDnsState(dataDir))?.address).toBe(dns.address);
    await dns.close();
    expect(await readLocalDnsState(dataDir)).toBeUndefined();
    dns = await startLocalDns({ dataDir });
    expect(await txt(dns.address, '_mailfleet.shared.example.test')).toEqual(['mailfleet-verification=b']);
  });
});

describe('verifyDkim against the local DNS server', () => {
  it('passes a message signed with the published key, fails a changed one, says none for an unsigned one', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const p = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
    expect(await put('dom_dkim', [{ name: 'mf1._domainkey.signed.example.test', type: 'TXT', value: `k=rsa; p=${p}` }])).toBe(204);

    const unsigned = Buffer.from('From: a@signed.example.test\r\nTo: b@example.org\r\nSubject: hi\r\nMessage-ID: <em_1@signed.example.test>\r\n\r\nHello.\r\n');
    const signer = new DKIM({ domainName: 'signed.example.test', keySelector: 'mf1', privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() });
    const chunks: Buffer[] = [];
    for await (const c of signer.sign(unsigned) as Readable) chunks.push(Buffer.from(c as Buffer));
    const signed = Buffer.concat(chunks);

    expect(await verifyDkim(signed, dns.address)).toEqual([expect.objectContaining({ result: 'pass', domain: 'signed.example.test' })]);
    const changed = Buffer.from(signed.toString().replace('Subject: hi', 'Subject: ho'));
    expect((await verifyDkim(changed, dns.address))[0]?.result).toBe('fail');
    expect(await verifyDkim(unsigned, dns.address)).toEqual([expect.objectContaining({ result: 'none' })]);
  });
});

describe('readMailStore', () => {
  it('reads what the sink stored, oldest first, with each envelope', async () => {
    const dir = path.join(dataDir, 'mail');
    const sink = await createSmtpSink({ port: 0, dir });
    try {
      const transport = nodemailer.createTransport({ host: '127.0.0.1', port: sink.port, secure: false, ignoreTLS: true });
      await transport.sendMail({ envelope: { from: '', to: ['z@b.test'] }, raw: 'Subject: first\r\n\r\nx' });
      await transport.sendMail({ envelope: { from: 'x@a.test', to: ['y@b.test'] }, raw: 'Subject: second\r\n\r\nx' });
      transport.close();
    } finally {
      await sink.close();
    }
    const messages = await readMailStore(dir);
    expect(messages.map((m) => [m.mailFrom, m.rcptTo])).toEqual([
      ['', ['z@b.test']],
      ['x@a.test', ['y@b.test']],
    ]);
    expect(messages[0]!.receivedAt.getTime()).toBeLessThanOrEqual(messages[1]!.receivedAt.getTime());
    expect(messages[1]!.raw.toString()).toContain('Subject: second');
    expect(await readMailStore(path.join(dataDir, 'nothing-here'))).toEqual([]);
  });
});
