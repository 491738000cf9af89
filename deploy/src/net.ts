import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export const LOOPBACK = '127.0.0.1';

/**
 * Free TCP ports on loopback. All listeners stay open until every port is
 * chosen, so one call never returns the same port twice. Another process can
 * still take a port before the caller binds it; that window is small and only
 * matters for servers (nats-server, ferretdb) that need a concrete port.
 */
export async function findFreePorts(count: number, host = LOOPBACK): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = net.createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, host, () => resolve());
      });
      const address = server.address();
      if (address === null || typeof address === 'string') throw new Error('unexpected server address');
      ports.push(address.port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}

export async function findFreePort(host = LOOPBACK): Promise<number> {
  const [port] = await findFreePorts(1, host);
  if (port === undefined) throw new Error('no free port');
  return port;
}

/** One TCP connect attempt; true when something accepted it. */
export function canConnect(port: number, host = LOOPBACK, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    const done = (ok: boolean): void => {
      socket.removeAllListeners();
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export interface PollOptions {
  timeoutMs: number;
  intervalMs?: number;
  /** Checked before each attempt: a reason to give up early (for example the process exited). */
  abortReason?: () => Error | undefined;
}

/** Polls `check` until it returns true; throws the abort reason or a timeout. */
export async function pollUntil(what: string, check: () => Promise<boolean>, opts: PollOptions): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  const interval = opts.intervalMs ?? 100;
  for (;;) {
    const abort = opts.abortReason?.();
    if (abort) throw abort;
    if (await check()) return;
    if (Date.now() >= deadline) throw new Error(`timed out after ${opts.timeoutMs} ms waiting for ${what}`);
    await sleep(interval);
  }
}
