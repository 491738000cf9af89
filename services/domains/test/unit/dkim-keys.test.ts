import { createPrivateKey, createSign, createVerify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createKeySealer, generateDkimKeyPair, KeyUnsealError, publicKeyOfPrivate } from '../../src/domain/dkim-keys.js';

const MASTER = 'ab'.repeat(32);

describe('DKIM keys', () => {
  it('generates a 2048-bit RSA pair whose public half is the p= value', async () => {
    const pair = await generateDkimKeyPair();
    const key = createPrivateKey(pair.privateKeyPem);
    expect(key.asymmetricKeyType).toBe('rsa');
    expect(key.asymmetricKeyDetails?.modulusLength).toBe(2048);
    expect(pair.privateKeyPem).toContain('BEGIN PRIVATE KEY');
    expect(publicKeyOfPrivate(pair.privateKeyPem)).toBe(pair.publicKey);
    const sig = createSign('sha256').update('mail').sign(pair.privateKeyPem);
    const pem = `-----BEGIN PUBLIC KEY-----\n${pair.publicKey.match(/.{1,64}/g)!.join('\n')}\n-----END PUBLIC KEY-----\n`;
    expect(createVerify('sha256').update('mail').verify(pem, sig)).toBe(true);
  });

  it('seals with AES-256-GCM: nothing of the key shows, and it opens only for its domain and master key', () => {
    const sealer = createKeySealer(MASTER);
    const secret = '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n';
    const sealed = sealer.seal(secret, 'dom_1');
    expect(JSON.stringify(sealed)).not.toContain('MIIEvQ');
    expect(Buffer.from(sealed.iv, 'base64')).toHaveLength(12);
    expect(Buffer.from(sealed.tag, 'base64')).toHaveLength(16);
    expect(sealer.seal(secret, 'dom_1').ct).not.toBe(sealed.ct);
    expect(sealer.open(sealed, 'dom_1')).toBe(secret);
    expect(createKeySealer(MASTER).open(sealed, 'dom_1')).toBe(secret);

    expect(() => sealer.open(sealed, 'dom_2')).toThrow(KeyUnsealError);
    const flipped = Buffer.from(sealed.ct, 'base64');
    flipped[0] = flipped[0]! ^ 1;
    expect(() => sealer.open({ ...sealed, ct: flipped.toString('base64') }, 'dom_1')).toThrow(/failed authentication/);
    expect(() => createKeySealer('cd'.repeat(32)).open(sealed, 'dom_1')).toThrow(/another DKIM_MASTER_KEY/);
    expect(createKeySealer('cd'.repeat(32)).kid).not.toBe(sealer.kid);
  });

  it('refuses a short master key', () => {
    expect(() => createKeySealer('ab'.repeat(16))).toThrow(/32 bytes/);
  });
});
