import {
  createCipheriv, createDecipheriv, createHmac, createPublicKey, generateKeyPair, hkdfSync, randomBytes,
} from 'node:crypto';
import { promisify } from 'node:util';

const generateKeyPairAsync = promisify(generateKeyPair);

export const DKIM_KEY_BITS = 2048;

export interface DkimKeyPair {
  /** Base64 of the DER SubjectPublicKeyInfo: the `p=` of the DKIM record. */
  readonly publicKey: string;
  /** PKCS#8 PEM. Secret: encrypt before storing, never log. */
  readonly privateKeyPem: string;
}

/** A fresh 2048-bit RSA key pair (generated off the event loop). */
export async function generateDkimKeyPair(): Promise<DkimKeyPair> {
  const { publicKey, privateKey } = await generateKeyPairAsync('rsa', {
    modulusLength: DKIM_KEY_BITS,
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { publicKey: Buffer.from(publicKey).toString('base64'), privateKeyPem: String(privateKey) };
}

/** The `p=` value of a PEM or DER public key, for tests and checks. */
export function publicKeyOfPrivate(privateKeyPem: string): string {
  return createPublicKey(privateKeyPem).export({ type: 'spki', format: 'der' }).toString('base64');
}

/** A private key as stored: AES-256-GCM ciphertext with its nonce, tag and the id of the key that sealed it. */
export interface SealedKey {
  readonly v: 1;
  /** Identifies the derived key (not secret): a different master key is told apart from corruption. */
  readonly kid: string;
  readonly iv: string;
  readonly tag: string;
  readonly ct: string;
}

export class KeyUnsealError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeyUnsealError';
  }
}

export interface KeySealer {
  /** Id of the derived key in force. */
  readonly kid: string;
  /** Encrypts a private key bound to `context` (the domain id): a sealed key moved to another domain does not open. */
  seal(plaintext: string, context: string): SealedKey;
  open(sealed: SealedKey, context: string): string;
}

/**
 * Encryption at rest of DKIM private keys. The AES-256-GCM key is derived
 * from the configured master key with HKDF-SHA256 (a purpose label as info),
 * so the master key itself never encrypts anything and can serve other
 * purposes under other labels.
 */
export function createKeySealer(masterKeyHex: string): KeySealer {
  const master = Buffer.from(masterKeyHex, 'hex');
  if (master.length < 32) throw new Error('DKIM master key must hold at least 32 bytes');
  const key = Buffer.from(hkdfSync('sha256', master, Buffer.from('mailfleet/domains'), Buffer.from('dkim-private-key/v1'), 32));
  const kid = createHmac('sha256', key).update('key-id').digest('hex').slice(0, 16);
  return {
    kid,
    seal(plaintext, context) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(context, 'utf8'));
      const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return { v: 1, kid, iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), ct: ct.toString('base64') };
    },
    open(sealed, context) {
      if (sealed.v !== 1) throw new KeyUnsealError(`unknown sealed key version ${String(sealed.v)}`);
      if (sealed.kid !== kid) {
        throw new KeyUnsealError('DKIM private key was encrypted under another DKIM_MASTER_KEY than the one configured');
      }
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(sealed.iv, 'base64'));
        decipher.setAAD(Buffer.from(context, 'utf8'));
        decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
        return Buffer.concat([decipher.update(Buffer.from(sealed.ct, 'base64')), decipher.final()]).toString('utf8');
      } catch {
        throw new KeyUnsealError('DKIM private key failed authentication (corrupted, or sealed for another domain)');
      }
    },
  };
}
