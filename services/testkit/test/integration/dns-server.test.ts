import { Resolver } from 'node:dns/promises';
import net from 'node:net';
import * as dnsPacket from 'dns-packet';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startDnsServer, type DnsServer } from '@mailfleet/testkit';

/** One query over TCP, framed as RFC 1035 4.2.2 says. */
function queryTcp(port: number, name: string, type: 'TXT' | 'MX' | 'A'): Promise<dnsPacket.DecodedPacket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    let buffered = Buffer.alloc(0);
    socket.on('connect', () => {
      socket.write(dnsPacket.streamEncode({ type: 'query', id: 4242, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type, name }] }));
    });
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        socket.end();
        resolve(dnsPacket.decode(buffered.subarray(2, 2 + buffered.readUInt16BE(0))));
      }
    });
    socket.on('error', reject);
  });
}

describe('DNS server', () => {
  let dns: DnsServer;
  let resolver: Resolver;

  beforeAll(async () => {
    dns = await startDnsServer();
    resolver = new Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers([dns.address]);
  });
  afterAll(() => dns.close());
  beforeEach(() => dns.clear());

  it('answers TXT over UDP, including multi-string records', async () => {
    dns.setRecords('example.test', 'TXT', ['v=spf1 -all', ['part one ', 'part two']]);
    const records = await resolver.resolveTxt('example.test');
    expect(records).toEqual(expect.arrayContaining([['v=spf1 -all'], ['part one ', 'part two']]));
    expect(records).toHaveLength(2);
    expect(dns.queries().at(-1)).toMatchObject({ name: 'example.test', type: 'TXT', transport: 'udp' });
  });

  it('splits a long TXT value into 255-byte strings (as a DKIM key is published)', async () => {
    const key = `v=DKIM1; k=rsa; p=${'A'.repeat(400)}`;
    dns.setRecords('mf._domainkey.example.test', 'TXT', [key]);
    const [record] = await resolver.resolveTxt('mf._domainkey.example.test');
    expect(record).toHaveLength(2);
    expect(record?.join('')).toBe(key);
  });

  it('answers MX, is case-insensitive and ignores a trailing dot', async () => {
    dns.setRecords('Mail.Example.Test.', 'MX', [
      { priority: 10, exchange: 'mx1.example.test' },
      { priority: 20, exchange: 'mx2.example.test' },
    ]);
    const records = await resolver.resolveMx('mail.example.test');
    expect(records.sort((a, b) => a.priority - b.priority)).toEqual([
      { priority: 10, exchange: 'mx1.example.test' },
      { priority: 20, exchange: 'mx2.example.test' },
    ]);
  });

  it('answers A and follows CNAME', async () => {
    dns.setRecords('target.example.test', 'A', ['192.0.2.7']);
    dns.setRecords('alias.example.test', 'CNAME', ['target.example.test']);
    expect(await resolver.resolve4('alias.example.test')).toEqual(['192.0.2.7']);
    expect(await resolver.resolveCname('alias.example.test')).toEqual(['target.example.test']);
  });

  it('answers NXDOMAIN for unknown names and NODATA for a missing type', async () => {
    await expect(resolver.resolveTxt('nowhere.example.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    dns.setRecords('only-mx.example.test', 'MX', [{ priority: 1, exchange: 'mx.example.test' }]);
    await expect(resolver.resolveTxt('only-mx.example.test')).rejects.toMatchObject({ code: 'ENODATA' });
  });

  it('answers over TCP on the same port', async () => {
    dns.setRecords('tcp.example.test', 'TXT', ['over tcp']);
    dns.setRecords('tcp.example.test', 'MX', [{ priority: 5, exchange: 'mx.tcp.example.test' }]);
    const txt = await queryTcp(dns.port, 'tcp.example.test', 'TXT');
    expect(txt.id).toBe(4242);
    expect(txt.answers?.[0]).toMatchObject({ type: 'TXT', data: [Buffer.from('over tcp')] });
    const mx = await queryTcp(dns.port, 'tcp.example.test', 'MX');
    expect(mx.answers?.[0]).toMatchObject({ type: 'MX', data: { preference: 5, exchange: 'mx.tcp.example.test' } });
    const missing = await queryTcp(dns.port, 'missing.example.test', 'TXT');
    expect((missing as dnsPacket.DecodedPacket & { rcode?: string }).rcode).toBe('NXDOMAIN');
  });

  it('answers SERVFAIL for a failing name and the names below it, until the failure is lifted', async () => {
    dns.setRecords('flaky.example.test', 'TXT', ['still here']);
    dns.setRecords('mf._domainkey.flaky.example.test', 'TXT', ['k=rsa; p=abc']);
    dns.setRecords('steady.example.test', 'TXT', ['fine']);
    dns.setFailure('Flaky.Example.Test.', 'servfail');
    await expect(resolver.resolveTxt('flaky.example.test')).rejects.toMatchObject({ code: 'ESERVFAIL' });
    await expect(resolver.resolveTxt('mf._domainkey.flaky.example.test')).rejects.toMatchObject({ code: 'ESERVFAIL' });
    await expect(resolver.resolveMx('flaky.example.test')).rejects.toMatchObject({ code: 'ESERVFAIL' });
    expect(await resolver.resolveTxt('steady.example.test')).toEqual([['fine']]);
    const overTcp = await queryTcp(dns.port, 'flaky.example.test', 'TXT');
    expect((overTcp as dnsPacket.DecodedPacket & { rcode?: string }).rcode).toBe('SERVFAIL');
    expect(dns.queries().some((q) => q.name === 'mf._domainkey.flaky.example.test')).toBe(true);

    dns.setFailure('flaky.example.test', null);
    expect(await resolver.resolveTxt('flaky.example.test')).toEqual([['still here']]);
    expect(await resolver.resolveTxt('mf._domainkey.flaky.example.test')).toEqual([['k=rsa; p=abc']]);
  });

  it('fails every name with "*", and clear() lifts failures with the records', async () => {
    dns.setRecords('one.example.test', 'TXT', ['1']);
    dns.setFailure('*', 'servfail');
    await expect(resolver.resolveTxt('one.example.test')).rejects.toMatchObject({ code: 'ESERVFAIL' });
    await expect(resolver.resolveTxt('unknown.example.test')).rejects.toMatchObject({ code: 'ESERVFAIL' });
    dns.setFailure('*', null);
    expect(await resolver.resolveTxt('one.example.test')).toEqual([['1']]);
    dns.setFailure('*', 'servfail');
    dns.clear();
    await expect(resolver.resolveTxt('one.example.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    expect(() => dns.setFailure('x.example.test', 'nonsense' as never)).toThrow(TypeError);
  });

  it('does not answer a name in timeout mode', async () => {
    dns.setRecords('slow.example.test', 'TXT', ['eventually']);
    dns.setFailure('slow.example.test', 'timeout');
    const quick = new Resolver({ timeout: 200, tries: 1 });
    quick.setServers([dns.address]);
    await expect(quick.resolveTxt('slow.example.test')).rejects.toMatchObject({ code: 'ETIMEOUT' });
    dns.setFailure('slow.example.test', null);
    expect(await quick.resolveTxt('slow.example.test')).toEqual([['eventually']]);
  });

  it('truncates a large UDP answer so the resolver retries over TCP', async () => {
    const values = Array.from({ length: 12 }, (_, i) => `record-${i}-${'x'.repeat(120)}`);
    dns.setRecords('big.example.test', 'TXT', values);
    const records = await resolver.resolveTxt('big.example.test');
    expect(records.map((r) => r.join('')).sort()).toEqual([...values].sort());
    const transports = dns.queries().filter((q) => q.name === 'big.example.test').map((q) => q.transport);
    expect(transports).toContain('udp');
    expect(transports).toContain('tcp');
  });
});
