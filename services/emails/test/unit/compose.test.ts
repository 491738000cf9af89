import { generateKeyPairSync } from 'node:crypto';
import { simpleParser } from 'mailparser';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { describe, expect, it } from 'vitest';
import { deriveKey, verifyTrackingToken } from '../../src/domain/tracking.js';
import type { EmailRecord } from '../../src/repositories/emails.repository.js';
import { composeMessage, createSigningKeys } from '../../src/sending/compose.js';

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
