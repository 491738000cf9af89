import fs from 'node:fs';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export const LOOPBACK = '127.0.0.1';

/**
 * The kernel's ephemeral range (source ports of outgoing connections): a port picked inside it can be taken
 * by any outgoing connection (a browser under test opens hundreds) before the server binds it.
 */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low !== undefined && high !== undefined && Number.isInteger(low) && Number.isInteger(high)) return [low, high];
  } catch {
    // not Linux: the IANA dynamic range
  }
  return [49152, 65535];
}

/** A port bound by this process on behalf of a server another process will start: its descriptor, to hand over. */
export interface HeldPort {
  fd: number;
  close: () => Promise<void>;
}

/**
 * Binds each of `ports` (on every address; with `onlyEphemeral`, only those inside the kernel's ephemeral range),
 * so that nothing takes it before the server meant for it starts: Linux never picks a bound port as the source of a
 * connection, and another process's `findFreePorts` cannot bind it either. Returns the bound sockets by port, to
 * hand to that server's process (see `releaseHeldPort` in the kit); a port that is busy, or whose descriptor is not
 * exposed, is left out.
 */
export async function holdPorts(ports: readonly number[], opts: { onlyEphemeral?: boolean } = {}): Promise<Map<number, HeldPort>> {
  const [low, high] = ephemeralRange();
  const held = new Map<number, HeldPort>();
  for (const port of ports) {
    if (opts.onlyEphemeral && (port < low || port > high)) continue;
    const server = await hold(port, '0.0.0.0');
    if (!server) continue;
    const close = (): Promise<void> => new Promise((resolve) => server.close(() => resolve()));
    const fd = (server as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
    if (typeof fd !== 'number' || fd < 0) {
      await close();
      continue;
    }
    held.set(port, { fd, close });
  }
  return held;
}

/** Holds `port` on `host` when it is free; undefined when something else has it. */
async function hold(port: number, host: string): Promise<net.Server | undefined> {
  const server = net.createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(undefined));
    server.listen(port, host, () => resolve(server));
  });
}

/**
 * Free TCP ports on loopback, below the kernel's ephemeral range when there is room (else from the kernel).
 * All listeners stay open until every port is chosen, so one call never returns the same port twice. Another
 * process that picks ports the same way can still take one before the caller binds it; choosing at random
 * outside the ephemeral range keeps outgoing connections from doing so.
 */
export async function findFreePorts(count: number, host = LOOPBACK): Promise<number[]> {
  const servers: net.Server[] = [];
  const [ephemeralLow] = ephemeralRange();
  const low = 10_000;
  const high = ephemeralLow - 1;
  try {
    const ports: number[] = [];
    let tries = 0;
    while (ports.length < count) {
      let server: net.Server | undefined;
      if (high - low > 1_000 && tries < 200) {
        tries += 1;
        const port = low + Math.floor(Math.random() * (high - low + 1));
        if (ports.includes(port)) continue;
        server = await hold(port, host);
        if (!server) continue;
      } else {
        server = await hold(0, host);
        if (!server) throw new Error(`no free port on ${host}`);
      }
      servers.push(server);
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
