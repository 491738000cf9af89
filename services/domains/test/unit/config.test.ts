import { ConfigError } from '@mailfleet/kit';
import { describe, expect, it } from 'vitest';
import { loadDomainsConfig } from '../../src/config.js';

const KEY = 'ab'.repeat(32);

describe('domains config', () => {
  it('has production defaults and no MX host unless a bounce domain is configured', () => {
    const c = loadDomainsConfig({ DKIM_MASTER_KEY: KEY });
    expect(c).toMatchObject({
      dkimSelectorPrefix: 'mf', dnsServers: undefined, spfInclude: '_spf.mailfleet.local', mailFromSubdomain: 'bounces', mxHost: undefined,
      verifyRetryAttempts: 8, verifyRecheckIntervalMs: 6 * 3_600_000,
    });
    expect(loadDomainsConfig({ DKIM_MASTER_KEY: KEY, BOUNCE_DOMAIN: 'Bounce.Example.NET.' }).mxHost).toBe('bounce.example.net');
    expect(loadDomainsConfig({ DKIM_MASTER_KEY: KEY, BOUNCE_DOMAIN: 'b.example.net', BOUNCE_MX_HOST: 'mx.example.net' }).mxHost).toBe('mx.example.net');
  });

  it('parses DNS_SERVERS as host[:port] entries', () => {
    expect(loadDomainsConfig({ DKIM_MASTER_KEY: KEY, DNS_SERVERS: '127.0.0.1:5353, 8.8.8.8,[::1]:53,::1,ns.example.net:53' }).dnsServers).toEqual([
      { host: '127.0.0.1', port: 5353 }, { host: '8.8.8.8', port: undefined }, { host: '::1', port: 53 }, { host: '::1', port: undefined },
      { host: 'ns.example.net', port: 53 },
    ]);
  });

  it('reports every problem at once and never shows the master key', () => {
    let err: unknown;
    try {
      loadDomainsConfig({ DKIM_MASTER_KEY: 'zz-not-hex-secret-value', DNS_SERVERS: '1.2.3.4:99999', SPF_INCLUDE: 'bad host!', MAIL_FROM_SUBDOMAIN: 'a.b' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const text = (err as ConfigError).message;
    expect(text).toContain('DKIM_MASTER_KEY=<redacted>: must be hex');
    expect(text).not.toContain('zz-not-hex');
    expect(text).toContain('port must be 1-65535');
    expect(text).toContain('SPF_INCLUDE');
    expect(text).toContain('MAIL_FROM_SUBDOMAIN');
    expect(() => loadDomainsConfig({})).toThrow(/DKIM_MASTER_KEY is required/);
    expect(() => loadDomainsConfig({ DKIM_MASTER_KEY: 'ab'.repeat(16) })).toThrow(/at least 32 bytes/);
  });
});
