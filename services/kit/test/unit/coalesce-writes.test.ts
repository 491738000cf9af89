import net from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { coalesceWrites } from '../../src/smtp-client.js';

/** The socket's calls to its system-level write (`_write` for one chunk, `_writev` for several). */
function countSystemWrites(socket: net.Socket): { calls: number; chunks: number } {
  const seen = { calls: 0, chunks: 0 };
  const internals = socket as unknown as {
    _write: (chunk: unknown, encoding: unknown, cb: unknown) => void;
    _writev: (chunks: unknown[], cb: unknown) => void;
  };
  const write = internals._write.bind(socket);
  const writev = internals._writev.bind(socket);
  internals._write = (chunk, encoding, cb) => {
    seen.calls += 1;
    seen.chunks += 1;
    write(chunk, encoding, cb);
  };
  internals._writev = (chunks, cb) => {
    seen.calls += 1;
    seen.chunks += chunks.length;
    writev(chunks, cb);
  };
  return seen;
}

const servers: net.Server[] = [];
const sockets: net.Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A loopback server whose accepted socket is handed to `onSocket`, and a client connected to it that keeps what it reads. */
async function pair(coalesce: boolean): Promise<{ server: net.Socket; received: () => string }> {
  let accepted!: (s: net.Socket) => void;
  const got = new Promise<net.Socket>((resolve) => (accepted = resolve));
  const server = net.createServer((socket) => {
    if (coalesce) coalesceWrites(socket);
    sockets.push(socket);
    accepted(socket);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const client = net.connect(port, '127.0.0.1');
  sockets.push(client);
  let text = '';
  client.on('data', (d: Buffer) => (text += d.toString('latin1')));
  return { server: await got, received: () => text };
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 2));
}

describe('coalesceWrites', () => {
  it('sends the replies written in one turn of the event loop with one system write, in order', async () => {
    const { server, received } = await pair(true);
    const writes = countSystemWrites(server);
    server.write('250 2.1.0 Ok\r\n');
    server.write('250 2.1.5 Ok\r\n');
    server.write(Buffer.from('354 End data with <CR><LF>.<CR><LF>\r\n'));
    await until(() => received().endsWith('<LF>\r\n'));
    expect(received()).toBe('250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n354 End data with <CR><LF>.<CR><LF>\r\n');
    expect(writes).toEqual({ calls: 1, chunks: 3 });
  });

  it('a socket left alone writes each reply by itself (what the helper saves)', async () => {
    const { server, received } = await pair(false);
    const writes = countSystemWrites(server);
    server.write('250 2.1.0 Ok\r\n');
    server.write('250 2.1.5 Ok\r\n');
    server.write('354 go ahead\r\n');
    await until(() => received().endsWith('ahead\r\n'));
    expect(writes).toEqual({ calls: 3, chunks: 3 });
  });

  it('holds nothing past the turn: a reply written in a later turn leaves by itself, without waiting for more', async () => {
    const { server, received } = await pair(true);
    const writes = countSystemWrites(server);
    server.write('220 ready\r\n');
    await until(() => received() === '220 ready\r\n');
    expect(received()).toBe('220 ready\r\n');
    await nextTurn();
    server.write('250 Ok\r\n');
    await until(() => received() === '220 ready\r\n250 Ok\r\n');
    expect(received()).toBe('220 ready\r\n250 Ok\r\n');
    expect(writes).toEqual({ calls: 2, chunks: 2 });
  });

  it('end() in the same turn still delivers what was written before it', async () => {
    const { server, received } = await pair(true);
    server.write('221 Bye\r\n');
    server.end();
    await until(() => received() === '221 Bye\r\n');
    expect(received()).toBe('221 Bye\r\n');
  });
});
