import { isIP } from 'node:net';
import { baseServiceConfigSpec, int, loadConfig, optionalStr, type Env, type FieldSpec } from '@mailfleet/kit';

export interface DnsServerAddress {
  readonly host: string;
  readonly port?: number | undefined;
}

/** Comma list of `host[:port]` (IPv6 as `[addr]:port` or bare); host names are resolved at start. */
function dnsServerList(env: string): FieldSpec<DnsServerAddress[] | undefined> {
  return {
    env,
    required: false,
    parse: (raw) => {
      const items = raw.split(',').map((s) => s.trim()).filter(Boolean);
      if (items.length === 0) throw new Error('must list at least one host[:port]');
      return items.map((item) => {
        let host = item;
        let port: string | undefined;
        const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(item);
        if (bracketed) {
          host = bracketed[1]!;
          port = bracketed[2];
        } else if (isIP(item) !== 6) {
          const m = /^([^:]+)(?::(\d+))?$/.exec(item);
          if (!m) throw new Error(`${item} is not host[:port]`);
          host = m[1]!;
          port = m[2];
        }
        if (isIP(host) === 0 && !/^[a-z0-9.-]+$/i.test(host)) throw new Error(`${item} is not host[:port]`);
        const n = port === undefined ? undefined : Number(port);
        if (n !== undefined && (n < 1 || n > 65535)) throw new Error(`${item}: port must be 1-65535`);
        return { host, port: n };
      });
    },
  };
}

/** A hex secret of at least `minBytes` bytes; its value never appears in an error. */
function hexSecret(env: string, minBytes: number): FieldSpec<string> {
  return {
    env,
    required: true,
    secret: true,
    parse: (raw) => {
      const v = raw.trim();
      if (!/^(?:[0-9a-fA-F]{2})+$/.test(v)) throw new Error('must be hex');
      if (v.length / 2 < minBytes) throw new Error(`must hold at least ${minBytes} bytes (${minBytes * 2} hex characters)`);
      return v.toLowerCase();
    },
  };
}

/** A DNS host name (for the SPF include and the bounce MX), lower-cased, without a trailing dot. */
function hostName(env: string, def?: string): FieldSpec<string> {
  const parse = (raw: string): string => {
    const v = raw.trim().toLowerCase().replace(/\.$/, '');
    if (!/^(?=.{1,253}$)([a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?)(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?)*$/.test(v)) {
      throw new Error('must be a host name');
    }
    return v;
  };
  return def === undefined ? { env, parse, required: false } : { env, parse, default: def, required: false };
}

/** One DNS label (MAIL FROM subdomain, DKIM selector prefix). */
function label(env: string, def: string, maxLength: number): FieldSpec<string> {
  return {
    env,
    default: def,
    required: false,
    parse: (raw) => {
      const v = raw.trim().toLowerCase();
      if (!new RegExp(`^[a-z0-9](?:[a-z0-9-]{0,${maxLength - 2}}[a-z0-9])?$`).test(v)) {
        throw new Error(`must be one DNS label of at most ${maxLength} characters ([a-z0-9-])`);
      }
      return v;
    },
  };
}

/** The domains service's configuration: the common fields plus DKIM, DNS and verification timings. */
export function domainsConfigSpec() {
  return {
    ...baseServiceConfigSpec('domains'),
    /** Master key (hex, 32 bytes) from which the key that encrypts DKIM private keys at rest is derived. */
    dkimMasterKey: hexSecret('DKIM_MASTER_KEY', 32),
    /** Prefix of each domain's DKIM selector; a short random part follows (`mf` -> `mfk3x9a2q1`). */
    dkimSelectorPrefix: label('DKIM_SELECTOR_PREFIX', 'mf', 20),
    /**
     * Local mode only (`npm start` sets it, the Helm chart never does): the control URL of the
     * platform's local DNS server, where each domain's records are published on creation.
     */
    localDnsControlUrl: optionalStr('LOCAL_DNS_CONTROL_URL'),
    /** DNS servers verification asks (`host[:port]`, comma separated); default the system's. */
    dnsServers: dnsServerList('DNS_SERVERS'),
    /** Time limit of one DNS query attempt. */
    dnsTimeoutMs: int('DNS_TIMEOUT_MS', 5_000, 100, 60_000),
    /** Attempts per DNS server before a lookup gives up (a timeout is then a temporary failure). */
    dnsTries: int('DNS_TRIES', 2, 1, 10),
    /** Host every domain's SPF record includes: `v=spf1 include:<this> ~all`. */
    spfInclude: hostName('SPF_INCLUDE', '_spf.mailfleet.local'),
    /** Subdomain of each domain used as the envelope sender (MAIL FROM / Return-Path) host; carries the SPF and MX records. */
    mailFromSubdomain: label('MAIL_FROM_SUBDOMAIN', 'bounces', 63),
    /** Host receiving bounces for the MAIL FROM host (the MX record); default BOUNCE_DOMAIN; no MX record when neither is set. */
    bounceMxHost: hostName('BOUNCE_MX_HOST'),
    /** The platform's bounce domain (ARCHITECTURE.md); the MX host when BOUNCE_MX_HOST is not set. */
    bounceDomain: optionalStr('BOUNCE_DOMAIN'),
    /** How often the verification worker looks for due checks (a PUT verify wakes it at once). */
    verifyPollIntervalMs: int('DOMAIN_VERIFY_POLL_INTERVAL_MS', 5_000, 50),
    /** How long a claimed check is owned by one replica before another may take it over. */
    verifyClaimLeaseMs: int('DOMAIN_VERIFY_CLAIM_LEASE_MS', 120_000, 1_000),
    /** Domains checked at once by one replica. */
    verifyConcurrency: int('DOMAIN_VERIFY_CONCURRENCY', 4, 1, 64),
    /** Checks that find a required record wrong or absent before the domain is FAILED. */
    verifyRetryAttempts: int('DOMAIN_VERIFY_RETRY_ATTEMPTS', 8, 1, 1_000),
    /** First delay after a check that found a record wrong or absent; doubles per attempt up to the max. */
    verifyRetryBaseMs: int('DOMAIN_VERIFY_RETRY_BASE_MS', 60_000, 10),
    verifyRetryMaxMs: int('DOMAIN_VERIFY_RETRY_MAX_MS', 3_600_000, 10),
    /** First delay after a temporary DNS failure (SERVFAIL, timeout); doubles per failure up to the max. */
    verifyTempRetryBaseMs: int('DOMAIN_VERIFY_TEMP_RETRY_BASE_MS', 30_000, 10),
    verifyTempRetryMaxMs: int('DOMAIN_VERIFY_TEMP_RETRY_MAX_MS', 900_000, 10),
    /** How long an unverified domain may stay in TEMPORARY_FAILURE before it is FAILED. */
    verifyTempFailureMaxMs: int('DOMAIN_VERIFY_TEMP_FAILURE_MAX_MS', 72 * 3_600_000, 1_000),
    /** Interval of the periodic re-check of verified domains (a removed record is noticed). */
    verifyRecheckIntervalMs: int('DOMAIN_VERIFY_RECHECK_INTERVAL_MS', 6 * 3_600_000, 1_000),
  };
}

export function loadDomainsConfig(env: Env) {
  const config = loadConfig(domainsConfigSpec(), env);
  return { ...config, mxHost: config.bounceMxHost ?? normalizeBounceDomain(config.bounceDomain) };
}
export type DomainsConfig = ReturnType<typeof loadDomainsConfig>;

function normalizeBounceDomain(v: string | undefined): string | undefined {
  const t = v?.trim().toLowerCase().replace(/\.$/, '');
  return t ? t : undefined;
}
