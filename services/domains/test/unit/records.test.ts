import { describe, expect, it } from 'vitest';
import {
  buildRecords, evaluateMx, evaluateTxt, newSelector, newVerificationToken, parseTags, type DnsRecordSpec, type LookupResult,
} from '../../src/domain/records.js';

const settings = { spfInclude: '_spf.mailfleet.local', mailFromSubdomain: 'bounces', mxHost: 'bounce.mailfleet.local' };
const parts = { verificationToken: 'tok123', selector: 'mfabcdefgh', publicKey: 'MIIBIjANBgkq' };
const records = buildRecords('example.com', parts, settings);
const spec = (kind: string): DnsRecordSpec => records.find((r) => r.kind === kind)!;
const found = (...values: string[]): LookupResult<string> => ({ kind: 'found', values });

describe('buildRecords', () => {
  it('lists verification, SPF, DKIM, MX and DMARC records with full host names', () => {
    expect(records).toEqual([
      { kind: 'verification', type: 'TXT', name: '_mailfleet.example.com', value: 'mailfleet-verification=tok123', priority: null, recommended: false },
      { kind: 'spf', type: 'TXT', name: 'bounces.example.com', value: 'v=spf1 include:_spf.mailfleet.local ~all', priority: null, recommended: false },
      { kind: 'dkim', type: 'TXT', name: 'mfabcdefgh._domainkey.example.com', value: 'k=rsa; p=MIIBIjANBgkq', priority: null, recommended: false },
      { kind: 'mx', type: 'MX', name: 'bounces.example.com', value: 'bounce.mailfleet.local', priority: 10, recommended: true },
      { kind: 'dmarc', type: 'TXT', name: '_dmarc.example.com', value: 'v=DMARC1; p=none;', priority: null, recommended: true },
    ]);
  });

  it('has no MX record when no bounce host is configured', () => {
    expect(buildRecords('example.com', parts, { ...settings, mxHost: undefined }).map((r) => r.kind)).toEqual(['verification', 'spf', 'dkim', 'dmarc']);
  });
});

describe('selectors and tokens', () => {
  it('makes one-label selectors with the prefix and distinct tokens', () => {
    const s = newSelector('mf');
    expect(s).toMatch(/^mf[a-z0-9]{8}$/);
    expect(newSelector('mf')).not.toBe(s);
    expect(newVerificationToken()).toMatch(/^[0-9A-Za-z]{32}$/);
    expect(newVerificationToken()).not.toBe(newVerificationToken());
  });
});

describe('evaluateTxt', () => {
  it('classifies absence and temporary failures, naming the record', () => {
    expect(evaluateTxt(spec('dkim'), { kind: 'missing', code: 'NXDOMAIN' })).toEqual({
      kind: 'dkim', outcome: 'missing', detail: 'DKIM record mfabcdefgh._domainkey.example.com (TXT) was not found',
    });
    expect(evaluateTxt(spec('spf'), { kind: 'temporary', code: 'SERVFAIL' })).toEqual({
      kind: 'spf', outcome: 'temporary', detail: 'DNS lookup of SPF record bounces.example.com (TXT) failed temporarily (SERVFAIL); retrying automatically',
    });
  });

  it('verification: exact token among other TXT values', () => {
    expect(evaluateTxt(spec('verification'), found('google-site-verification=x', 'mailfleet-verification=tok123')).outcome).toBe('match');
    const wrong = evaluateTxt(spec('verification'), found('mailfleet-verification=other'));
    expect(wrong.outcome).toBe('mismatch');
    expect(wrong.detail).toContain('Verification record _mailfleet.example.com (TXT) has the wrong value "mailfleet-verification=other"');
    expect(evaluateTxt(spec('verification'), found('unrelated')).outcome).toBe('mismatch');
  });

  it('SPF: one v=spf1 record that includes the configured host', () => {
    expect(evaluateTxt(spec('spf'), found('v=spf1 include:_spf.mailfleet.local ~all')).outcome).toBe('match');
    expect(evaluateTxt(spec('spf'), found('V=SPF1 ip4:192.0.2.1 +include:_SPF.mailfleet.local -all', 'other')).outcome).toBe('match');
    expect(evaluateTxt(spec('spf'), found('v=spf1 include:_spf.google.com ~all')).detail).toContain('does not include _spf.mailfleet.local');
    expect(evaluateTxt(spec('spf'), found('v=spf1 include:_spf.mailfleet.local ~all', 'v=spf1 -all')).detail).toContain('2 SPF values');
    expect(evaluateTxt(spec('spf'), found('v=spf10 include:_spf.mailfleet.local')).outcome).toBe('mismatch');
  });

  it('DKIM: the same public key, folding whitespace ignored, k=rsa', () => {
    expect(evaluateTxt(spec('dkim'), found('k=rsa; p=MIIBIjANBgkq')).outcome).toBe('match');
    expect(evaluateTxt(spec('dkim'), found('v=DKIM1; k=rsa; p=MIIBIj ANBgkq')).outcome).toBe('match');
    expect(evaluateTxt(spec('dkim'), found('p=MIIBIjANBgkq')).outcome).toBe('match');
    const wrongKey = evaluateTxt(spec('dkim'), found('k=rsa; p=SOMETHINGELSE'));
    expect(wrongKey.outcome).toBe('mismatch');
    expect(wrongKey.detail).toContain('DKIM record mfabcdefgh._domainkey.example.com (TXT) has a public key that does not match');
    expect(evaluateTxt(spec('dkim'), found('k=ed25519; p=MIIBIjANBgkq')).detail).toContain('k=ed25519');
    expect(evaluateTxt(spec('dkim'), found('v=DKIM2; p=MIIBIjANBgkq')).outcome).toBe('mismatch');
    expect(evaluateTxt(spec('dkim'), found('hello')).detail).toContain('no DKIM key');
  });

  it('DMARC: any v=DMARC1 policy counts', () => {
    expect(evaluateTxt(spec('dmarc'), found('v=DMARC1; p=reject; rua=mailto:d@example.com')).outcome).toBe('match');
    expect(evaluateTxt(spec('dmarc'), found('v=spf1 -all')).outcome).toBe('mismatch');
  });

  it('parses DKIM tags, first occurrence wins', () => {
    expect([...parseTags(' v=DKIM1 ; K=rsa; p=AB CD; p=zz; junk')]).toEqual([['v', 'DKIM1'], ['k', 'rsa'], ['p', 'ABCD']]);
  });
});

describe('evaluateMx', () => {
  it('matches the bounce host by exchange, case and trailing dot aside', () => {
    expect(evaluateMx(spec('mx'), { kind: 'found', values: [{ priority: 20, exchange: 'Bounce.Mailfleet.Local.' }] }).outcome).toBe('match');
    const wrong = evaluateMx(spec('mx'), { kind: 'found', values: [{ priority: 10, exchange: 'mx.other.net' }] });
    expect(wrong).toMatchObject({ outcome: 'mismatch', detail: 'MX record bounces.example.com (MX) points to 10 mx.other.net; expected 10 bounce.mailfleet.local' });
    expect(evaluateMx(spec('mx'), { kind: 'missing', code: 'NXDOMAIN' }).outcome).toBe('missing');
  });
});
