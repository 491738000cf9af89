import { describe, expect, it } from 'vitest';
import { classifyAddress, isPublicAddress } from '../../src/domain/addresses.js';

describe('address classifier (SSRF guard)', () => {
  it.each([
    ['127.0.0.1', 'loopback'], ['127.255.255.254', 'loopback'], ['0.0.0.0', 'unspecified'], ['0.1.2.3', 'unspecified'],
    ['10.0.0.1', 'private'], ['10.255.255.255', 'private'], ['172.16.0.1', 'private'], ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'], ['100.64.0.1', 'shared'], ['100.127.255.255', 'shared'], ['169.254.169.254', 'metadata'],
    ['169.254.1.1', 'link-local'], ['224.0.0.1', 'multicast'], ['239.255.255.250', 'multicast'], ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'reserved'], ['192.0.2.10', 'documentation'], ['198.18.0.1', 'benchmark'], ['192.0.0.170', 'reserved'],
  ])('%s is %s', (address, kind) => {
    expect(classifyAddress(address)).toBe(kind);
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each(['93.184.216.34', '8.8.8.8', '1.1.1.1', '172.15.255.255', '172.32.0.1', '100.63.255.255', '100.128.0.1', '169.253.0.1', '11.0.0.1', '192.169.0.1'])(
    '%s is public', (address) => {
      expect(classifyAddress(address)).toBe('public');
    },
  );

  it.each([
    ['::1', 'loopback'], ['::', 'unspecified'], ['fe80::1', 'link-local'], ['fe80::1%eth0', 'link-local'], ['febf::1', 'link-local'],
    ['fc00::1', 'unique-local'], ['fd12:3456::1', 'unique-local'], ['fd00:ec2::254', 'metadata'], ['ff02::1', 'multicast'],
    ['fec0::1', 'site-local'], ['2001:db8::1', 'documentation'], ['2001::1', 'reserved'], ['100::1', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback'], ['::ffff:7f00:1', 'loopback'], ['::ffff:10.1.2.3', 'private'], ['::ffff:169.254.169.254', 'metadata'],
    ['::127.0.0.1', 'loopback'], ['64:ff9b::a9fe:a9fe', 'metadata'], ['64:ff9b::10.0.0.1', 'private'], ['64:ff9b:1::1', 'private'],
    ['2002:7f00:1::1', 'loopback'], ['2002:c0a8:101::1', 'private'], ['4000::1', 'reserved'],
  ])('%s is %s', (address, kind) => {
    expect(classifyAddress(address)).toBe(kind);
  });

  it.each(['2606:4700:4700::1111', '2a00:1450:4001:82a::200e', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1', '2001:4860:4860::8888'])(
    '%s is public', (address) => {
      expect(classifyAddress(address)).toBe('public');
    },
  );

  it('rejects what is not an address', () => {
    expect(classifyAddress('localhost')).toBe('invalid');
    expect(classifyAddress('999.1.1.1')).toBe('invalid');
    expect(classifyAddress('')).toBe('invalid');
    expect(isPublicAddress('example.com')).toBe(false);
  });
});
