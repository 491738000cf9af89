import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { HELD_PORT_FD_ENV } from '@mailfleet/kit/held-port';
import { describe, expect, it } from 'vitest';
import { findFreePorts, holdPorts } from '../../src/net.js';
import { ManagedProcess } from '../../src/process.js';

const heldPortModule = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../services/kit/dist/grpc/held-port.js');

function listen(port: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(port, '0.0.0.0', () => resolve(server));
  });
}

const close = (server: net.Server): Promise<void> => new Promise((resolve) => server.close(() => resolve()));

/** A port inside the ephemeral range that is free now: the kernel picks one for port 0. */
async function ephemeralPort(): Promise<number> {
  const server = await listen(0);
  const { port } = server.address() as net.AddressInfo;
  await close(server);
  return port;
}

/**
 * The platform binds each service's gRPC port before the services start (with fixed ports, `npm start`, those in
 * the kernel's ephemeral range), and hands the bound socket to the service's process, which lets go of it right
 * before its gRPC server binds (the kit's releaseHeldPort).
 */
describe('a gRPC port held for a service', () => {
  it('stays bound from the platform to the service until the service lets go of it, then the service binds it', async () => {
    const port = await ephemeralPort();
    const held = await holdPorts([port, 3000], { onlyEphemeral: true });
    expect([...held.keys()]).toEqual([port]); // 3000 is below the ephemeral range: nothing to hold
    await expect(listen(port)).rejects.toThrow(/EADDRINUSE/);

    const script = `
      import net from 'node:net';
      import { releaseHeldPort } from ${JSON.stringify(heldPortModule)};
      const listen = () => new Promise((resolve) => {
        const s = net.createServer();
        s.once('error', (e) => resolve(e.code));
        s.listen(${port}, '0.0.0.0', () => s.close(() => resolve('bound')));
      });
      console.log('before: ' + await listen());
      releaseHeldPort();
      console.log('after: ' + await listen());
      console.log('variable: ' + (process.env.${HELD_PORT_FD_ENV} ?? 'gone'));
    `;
    const proc = new ManagedProcess({ name: 'held-port-child', command: process.execPath, args: ['--input-type=module', '-e', script] });
    try {
      proc.start({ inherit: [held.get(port)!.fd], env: { [HELD_PORT_FD_ENV]: '3' } });
    } finally {
      await held.get(port)!.close();
    }
    // This process's copy is closed: only the child holds the port now.
    await expect(listen(port)).rejects.toThrow(/EADDRINUSE/);
    const exit = await proc.exited();
    expect(exit.code).toBe(0);
    expect(proc.tail()).toEqual(['before: EADDRINUSE', 'after: bound', 'variable: gone']);
    await close(await listen(port));
  });

  it('holds a free port below the ephemeral range too (tests and the bench), so another platform cannot choose it', async () => {
    const [port] = await findFreePorts(1);
    const held = await holdPorts([port!]);
    expect([...held.keys()]).toEqual([port]);
    await expect(listen(port!)).rejects.toThrow(/EADDRINUSE/);
    await held.get(port!)!.close();
    await close(await listen(port!));
  });

  it('is left alone by a process that was handed none', async () => {
    const port = await ephemeralPort();
    const script = `
      import { releaseHeldPort } from ${JSON.stringify(heldPortModule)};
      releaseHeldPort({ ${HELD_PORT_FD_ENV}: '1' });
      releaseHeldPort({ ${HELD_PORT_FD_ENV}: 'x' });
      releaseHeldPort({});
      console.log('still writing to stdout');
    `;
    const proc = new ManagedProcess({ name: 'no-held-port', command: process.execPath, args: ['--input-type=module', '-e', script] });
    proc.start();
    expect((await proc.exited()).code).toBe(0);
    expect(proc.tail()).toEqual(['still writing to stdout']);
    await close(await listen(port));
  });
});
