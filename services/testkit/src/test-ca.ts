import { generateKeyPairSync, randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import forge from 'node-forge';

export interface IssuedCert {
  certPem: string;
  keyPem: string;
}

export interface TestCa {
  /** Directory holding `ca.pem` and `ca-key.pem`. */
  readonly dir: string;
  /** The CA certificate file: what NODE_EXTRA_CA_CERTS of a child process points at. */
  readonly caFile: string;
  readonly certPem: string;
  /** A server certificate for these names (DNS names or IP addresses), signed by this CA. */
  issueServerCert(hosts?: string[]): IssuedCert;
}

/*
 * Certificates are made with node-forge (pure JavaScript) rather than the
 * openssl CLI, which a fresh CI machine may not have. Keys come from Node's
 * own crypto, which is much faster than forge's.
 */

function newKeyPair(): { privateKey: forge.pki.rsa.PrivateKey; publicKey: forge.pki.rsa.PublicKey; keyPem: string } {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyPem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const forgeKey = forge.pki.privateKeyFromPem(keyPem);
  return {
    privateKey: forgeKey,
    publicKey: forge.pki.setRsaPublicKey(forgeKey.n, forgeKey.e),
    keyPem,
  };
}

function serialNumber(): string {
  // Positive: the high bit clear.
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] ?? 0) & 0x7f;
  return bytes.toString('hex');
}

function validity(cert: forge.pki.Certificate, days: number): void {
  const now = Date.now();
  cert.validity.notBefore = new Date(now - 24 * 3600 * 1000);
  cert.validity.notAfter = new Date(now + days * 24 * 3600 * 1000);
}

function makeCa(dir: string, certPem: string, keyPem: string): TestCa {
  const caCert = forge.pki.certificateFromPem(certPem);
  const caKey = forge.pki.privateKeyFromPem(keyPem);
  return {
    dir,
    caFile: path.join(dir, 'ca.pem'),
    certPem,
    issueServerCert(hosts = ['localhost', '127.0.0.1']) {
      const keys = newKeyPair();
      const cert = forge.pki.createCertificate();
      cert.publicKey = keys.publicKey;
      cert.serialNumber = serialNumber();
      validity(cert, 30);
      cert.setSubject([{ name: 'commonName', value: hosts[0] ?? 'localhost' }]);
      cert.setIssuer(caCert.subject.attributes);
      cert.setExtensions([
        { name: 'basicConstraints', cA: false },
        { name: 'keyUsage', critical: true, digitalSignature: true, keyEncipherment: true },
        { name: 'extKeyUsage', serverAuth: true },
        {
          name: 'subjectAltName',
          altNames: hosts.map((h) => (/^[\d.]+$/.test(h) || h.includes(':') ? { type: 7, ip: h } : { type: 2, value: h })),
        },
        { name: 'subjectKeyIdentifier' },
        { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
      ]);
      cert.sign(caKey, forge.md.sha256.create());
      return { certPem: forge.pki.certificateToPem(cert), keyPem: keys.keyPem };
    },
  };
}

/** A fresh CA written to `dir` (default a new temp dir) as `ca.pem` and `ca-key.pem`. */
export async function createTestCa(opts: { dir?: string; commonName?: string } = {}): Promise<TestCa> {
  const dir = opts.dir ?? (await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-ca-')));
  await fsp.mkdir(dir, { recursive: true });
  const keys = newKeyPair();
  const cert = forge.pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = serialNumber();
  validity(cert, 365);
  const subject = [
    { name: 'commonName', value: opts.commonName ?? 'mailfleet test CA' },
    { name: 'organizationName', value: 'mailfleet tests' },
  ];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', critical: true, cA: true, pathLenConstraint: 0 },
    { name: 'keyUsage', critical: true, keyCertSign: true, cRLSign: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(keys.privateKey, forge.md.sha256.create());
  const certPem = forge.pki.certificateToPem(cert);
  await fsp.writeFile(path.join(dir, 'ca.pem'), certPem);
  await fsp.writeFile(path.join(dir, 'ca-key.pem'), keys.keyPem, { mode: 0o600 });
  return makeCa(dir, certPem, keys.keyPem);
}

/** The CA that createTestCa wrote to `dir` (for example the e2e run's, provided as `testCaDir`). */
export async function loadTestCa(dir: string): Promise<TestCa> {
  const [certPem, keyPem] = await Promise.all([
    fsp.readFile(path.join(dir, 'ca.pem'), 'utf8'),
    fsp.readFile(path.join(dir, 'ca-key.pem'), 'utf8'),
  ]);
  return makeCa(dir, certPem, keyPem);
}
