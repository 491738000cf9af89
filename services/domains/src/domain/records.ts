import { randomBytes } from 'node:crypto';
import { randomBase62 } from '@mailfleet/kit';

/** The records a domain publishes; verification, SPF and DKIM are required for SUCCESS. */
export type RecordKind = 'verification' | 'spf' | 'dkim' | 'mx' | 'dmarc';
export const REQUIRED_KINDS: readonly RecordKind[] = ['verification', 'spf', 'dkim'];

/** Per-record status: NOT_STARTED before any check, PENDING once asked for, then what the last lookup found. */
export type RecordStatus = 'NOT_STARTED' | 'PENDING' | 'SUCCESS' | 'FAILED' | 'TEMPORARY_FAILURE';

export interface DnsRecordSpec {
  readonly kind: RecordKind;
  readonly type: 'TXT' | 'MX';
  /** Fully qualified host name, no trailing dot. */
  readonly name: string;
  /** TXT: the text; MX: the exchange host. */
  readonly value: string;
  /** MX preference; null for TXT. */
  readonly priority: number | null;
  /** Recommended rather than required for SUCCESS. */
  readonly recommended: boolean;
}

export interface DnsRecordState extends DnsRecordSpec {
  readonly status: RecordStatus;
}

export interface RecordSettings {
  /** `include:` host of the SPF record. */
  readonly spfInclude: string;
  /** Label of the MAIL FROM host under the domain. */
  readonly mailFromSubdomain: string;
  /** Exchange of the MAIL FROM host's MX (bounces); no MX record when absent. */
  readonly mxHost?: string | undefined;
}

export const VERIFICATION_RECORD_LABEL = '_mailfleet';
export const VERIFICATION_VALUE_PREFIX = 'mailfleet-verification=';
export const RECOMMENDED_DMARC = 'v=DMARC1; p=none;';
export const MX_PRIORITY = 10;

/** A DKIM selector: the configured prefix and 8 random characters of [a-z0-9] (one DNS label). */
export function newSelector(prefix: string): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  let out = '';
  for (const b of randomBytes(16)) {
    if (b < 252) out += alphabet[b % 36];
    if (out.length === 8) break;
  }
  return `${prefix}${out.padEnd(8, 'x')}`;
}

/** The per-domain secret of the verification TXT record. */
export function newVerificationToken(): string {
  return randomBase62(32);
}

export function mailFromHost(domain: string, settings: Pick<RecordSettings, 'mailFromSubdomain'>): string {
  return `${settings.mailFromSubdomain}.${domain}`;
}

/** The records to publish, in the order they are shown. */
export function buildRecords(
  domain: string,
  parts: { verificationToken: string; selector: string; publicKey: string },
  settings: RecordSettings,
): DnsRecordSpec[] {
  const mailFrom = mailFromHost(domain, settings);
  const records: DnsRecordSpec[] = [
    { kind: 'verification', type: 'TXT', name: `${VERIFICATION_RECORD_LABEL}.${domain}`, value: `${VERIFICATION_VALUE_PREFIX}${parts.verificationToken}`, priority: null, recommended: false },
    { kind: 'spf', type: 'TXT', name: mailFrom, value: `v=spf1 include:${settings.spfInclude} ~all`, priority: null, recommended: false },
    { kind: 'dkim', type: 'TXT', name: `${parts.selector}._domainkey.${domain}`, value: `k=rsa; p=${parts.publicKey}`, priority: null, recommended: false },
  ];
  if (settings.mxHost) records.push({ kind: 'mx', type: 'MX', name: mailFrom, value: settings.mxHost, priority: MX_PRIORITY, recommended: true });
  records.push({ kind: 'dmarc', type: 'TXT', name: `_dmarc.${domain}`, value: RECOMMENDED_DMARC, priority: null, recommended: true });
  return records;
}

/** What one DNS lookup gave: values, a definitive absence, or a failure that says nothing about the record. */
export type LookupResult<T> =
  | { readonly kind: 'found'; readonly values: readonly T[] }
  | { readonly kind: 'missing'; readonly code: string }
  | { readonly kind: 'temporary'; readonly code: string };

export interface MxValue {
  readonly priority: number;
  readonly exchange: string;
}

export type RecordOutcome = 'match' | 'mismatch' | 'missing' | 'temporary';

export interface RecordCheck {
  readonly kind: RecordKind;
  readonly outcome: RecordOutcome;
  /** One sentence naming the record; empty for a match. */
  readonly detail: string;
}

const KIND_LABEL: Record<RecordKind, string> = {
  verification: 'Verification', spf: 'SPF', dkim: 'DKIM', mx: 'MX', dmarc: 'DMARC',
};

function describe(spec: DnsRecordSpec): string {
  return `${KIND_LABEL[spec.kind]} record ${spec.name} (${spec.type})`;
}

function clip(s: string, max = 80): string {
  return s.length > max ? `${s.slice(0, max)}...` : s;
}

function absentOrTemporary(spec: DnsRecordSpec, r: Exclude<LookupResult<unknown>, { kind: 'found' }>): RecordCheck {
  if (r.kind === 'temporary') {
    return { kind: spec.kind, outcome: 'temporary', detail: `DNS lookup of ${describe(spec)} failed temporarily (${r.code}); retrying automatically` };
  }
  return { kind: spec.kind, outcome: 'missing', detail: `${describe(spec)} was not found` };
}

/** DKIM tag list (`v=DKIM1; k=rsa; p=...`) as a map; whitespace inside values is folding and is dropped. */
export function parseTags(record: string): Map<string, string> {
  const tags = new Map<string, string>();
  for (const part of record.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const key = part.slice(0, eq).trim().toLowerCase();
    if (key && !tags.has(key)) tags.set(key, part.slice(eq + 1).replace(/\s+/g, ''));
  }
  return tags;
}

function isSpf(txt: string): boolean {
  return /^v=spf1(\s|$)/i.test(txt.trim());
}

/** Compares what DNS answered with the record the domain must publish. Pure: the lookups happen elsewhere. */
export function evaluateTxt(spec: DnsRecordSpec, result: LookupResult<string>): RecordCheck {
  if (result.kind !== 'found') return absentOrTemporary(spec, result);
  const values = result.values.map((v) => v.trim());
  const ok = (): RecordCheck => ({ kind: spec.kind, outcome: 'match', detail: '' });
  const wrong = (why: string): RecordCheck => ({ kind: spec.kind, outcome: 'mismatch', detail: `${describe(spec)} ${why}` });
  switch (spec.kind) {
    case 'verification': {
      if (values.includes(spec.value)) return ok();
      const ours = values.filter((v) => v.startsWith(VERIFICATION_VALUE_PREFIX));
      return ours.length > 0
        ? wrong(`has the wrong value "${clip(ours[0]!)}"; expected "${spec.value}"`)
        : wrong(`has no ${VERIFICATION_VALUE_PREFIX}... value; expected "${spec.value}"`);
    }
    case 'spf': {
      const spf = values.filter(isSpf);
      if (spf.length === 0) return wrong(`has no SPF (v=spf1) value; expected "${spec.value}"`);
      if (spf.length > 1) return wrong(`has ${spf.length} SPF values; a host may publish only one (RFC 7208)`);
      const include = /include:(\S+)/i.exec(spec.value)?.[1]?.toLowerCase() ?? '';
      const terms = spf[0]!.split(/\s+/).map((t) => t.toLowerCase().replace(/^[+?~]/, ''));
      if (terms.includes(`include:${include}`)) return ok();
      return wrong(`"${clip(spf[0]!)}" does not include ${include}; expected "${spec.value}"`);
    }
    case 'dkim': {
      const expected = parseTags(spec.value).get('p') ?? '';
      const keys = values.map(parseTags).filter((t) => t.has('p'));
      if (keys.length === 0) return wrong(`has no DKIM key (p=) value; expected "${clip(spec.value)}"`);
      const same = keys.find((t) => t.get('p') === expected);
      if (!same) return wrong(`has a public key that does not match this domain's DKIM key; expected "${clip(spec.value)}"`);
      const k = same.get('k');
      if (k && k.toLowerCase() !== 'rsa') return wrong(`declares key type k=${k}; expected k=rsa`);
      const v = same.get('v');
      if (v && v !== 'DKIM1') return wrong(`declares v=${v}; expected v=DKIM1 or no v tag`);
      return ok();
    }
    case 'dmarc': {
      if (values.some((v) => /^v=DMARC1(\s|;|$)/i.test(v))) return ok();
      return wrong(`has no DMARC (v=DMARC1) value; recommended "${spec.value}"`);
    }
    case 'mx':
      return wrong('is an MX record, not TXT');
  }
}

export function evaluateMx(spec: DnsRecordSpec, result: LookupResult<MxValue>): RecordCheck {
  if (result.kind !== 'found') return absentOrTemporary(spec, result);
  const want = spec.value.toLowerCase().replace(/\.$/, '');
  if (result.values.some((mx) => mx.exchange.toLowerCase().replace(/\.$/, '') === want)) return { kind: spec.kind, outcome: 'match', detail: '' };
  const found = result.values.map((mx) => `${mx.priority} ${mx.exchange}`).join(', ');
  return { kind: spec.kind, outcome: 'mismatch', detail: `${describe(spec)} points to ${clip(found)}; expected ${spec.priority ?? MX_PRIORITY} ${spec.value}` };
}
