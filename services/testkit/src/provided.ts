import type { PlatformPorts } from '@mailfleet/deploy';

// What the global setups hand to tests through vitest's provide/inject.
declare module 'vitest' {
  export interface ProvidedContext {
    /** Both projects: the FerretDB (or MONGO_URL) and NATS servers of this run. */
    mongoUrl: string;
    natsUrl: string;
    /** Both projects: loopback HTTP endpoint behind stopNats()/startNats() and friends. */
    infraControlUrl: string;
    /** e2e only. */
    gatewayUrl: string;
    smtpUrl: string;
    /** e2e only: where the platform's SMTP sink stores mail. */
    mailDir: string;
    /** e2e only: the DNS server the platform asks (DNS_SERVERS); records are set through infra control. */
    dnsServer: string;
    /** e2e only: the CA the platform trusts (NODE_EXTRA_CA_CERTS); load with loadTestCa(). */
    testCaDir: string;
    platformPorts: PlatformPorts;
    platformDataDir: string;
    /** e2e only: one `<name>.log` per child process. */
    platformLogDir: string;
  }
}

export {};
