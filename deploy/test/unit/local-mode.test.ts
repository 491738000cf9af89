import { localModeOn } from '@mailfleet/deploy';
import { describe, expect, it } from 'vitest';

describe('localModeOn', () => {
  it('is on when asked for, with the embedded SMTP sink and no DNS_SERVERS', () => {
    expect(localModeOn({ requested: true, smtpUrl: undefined, dnsServers: undefined })).toBe(true);
  });
  it('is off whenever SMTP_URL or DNS_SERVERS is set, and when not asked for', () => {
    expect(localModeOn({ requested: true, smtpUrl: 'smtp://relay.example:25', dnsServers: undefined })).toBe(false);
    expect(localModeOn({ requested: true, smtpUrl: undefined, dnsServers: '127.0.0.1:53' })).toBe(false);
    expect(localModeOn({ requested: undefined, smtpUrl: undefined, dnsServers: undefined })).toBe(false);
    expect(localModeOn({ requested: false, smtpUrl: undefined, dnsServers: undefined })).toBe(false);
  });
});
