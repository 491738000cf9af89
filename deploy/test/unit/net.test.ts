import fs from 'node:fs';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { findFreePorts } from '../../src/net.js';

describe('findFreePorts', () => {
  it('gives distinct ports that can be bound, below the ephemeral range outgoing connections use', async () => {
    const ports = await findFreePorts(20);
    expect(new Set(ports).size).toBe(20);
    const range = fs.existsSync('/proc/sys/net/ipv4/ip_local_port_range')
      ? fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number)
      : [49152, 65535];
    for (const port of ports) expect(port).toBeLessThan(range[0]!);
    const servers = await Promise.all(ports.map((port) => new Promise<net.Server>((resolve, reject) => {
      const server = net.createServer();
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve(server));
    })));
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  });

  it('never gives a port something listens on', async () => {
    const taken = await findFreePorts(1);
    const server = await new Promise<net.Server>((resolve) => {
      const s = net.createServer();
      s.listen(taken[0], '127.0.0.1', () => resolve(s));
    });
    try {
      for (let i = 0; i < 20; i++) expect(await findFreePorts(50)).not.toContain(taken[0]);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
