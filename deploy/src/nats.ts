import fsp from 'node:fs/promises';
import path from 'node:path';
import { assertBinary, resolveBinaries } from './binaries.js';
import type { LogSink } from './logs.js';
import { canConnect, findFreePort, LOOPBACK, pollUntil } from './net.js';
import { describeExit, ManagedProcess, restartableServer, type RestartableServer } from './process.js';

export interface StartNatsOptions {
  /** Client port; 0 picks a free one (kept across restarts). Default 4222. */
  port?: number;
  /** JetStream stores under `<dataDir>/nats`. */
  dataDir: string;
  binDir?: string;
  /** A nats-server binary; default NATS_SERVER_BIN or `<binDir>/nats-server`. */
  bin?: string;
  log?: LogSink;
  /** Name used for log lines and errors. Default `nats`. */
  name?: string;
  readyTimeoutMs?: number;
  stopTimeoutMs?: number;
}

export interface NatsServer extends RestartableServer {
  /** `nats://127.0.0.1:PORT` — unchanged by restarts. */
  readonly url: string;
  readonly port: number;
  readonly storeDir: string;
}

/**
 * nats-server with JetStream, bound to loopback. Ready means the monitoring
 * endpoint reports JetStream enabled and the client port accepts connections.
 */
export async function startNats(opts: StartNatsOptions): Promise<NatsServer> {
  const name = opts.name ?? 'nats';
  const bin = opts.bin ?? resolveBinaries(opts.binDir === undefined ? {} : { binDir: opts.binDir }).natsServer;
  assertBinary(bin, 'nats-server');
  const port = opts.port === undefined ? 4222 : opts.port === 0 ? await findFreePort() : opts.port;
  const storeDir = path.join(path.resolve(opts.dataDir), 'nats');
  await fsp.mkdir(storeDir, { recursive: true });
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;

  const launch = async (): Promise<ManagedProcess> => {
    // The monitoring port only serves readiness; a fresh one each start avoids a clash after a restart.
    const monitorPort = await findFreePort();
    const p = new ManagedProcess({
      name,
      command: bin,
      args: ['-a', LOOPBACK, '-p', String(port), '-m', String(monitorPort), '-js', '-sd', storeDir],
      env: process.env,
      ...(opts.log ? { log: opts.log } : {}),
      ...(opts.stopTimeoutMs !== undefined ? { stopTimeoutMs: opts.stopTimeoutMs } : {}),
    });
    p.start();
    try {
      await pollUntil(
        `${name} on 127.0.0.1:${port}`,
        async () => (await jetStreamHealthy(monitorPort)) && (await canConnect(port)),
        {
          timeoutMs: readyTimeoutMs,
          abortReason: () => {
            const exit = p.lastExit;
            return exit ? new Error(describeExit(exit, p.tail())) : undefined;
          },
        },
      );
    } catch (error) {
      await p.stop(2000);
      throw error;
    }
    return p;
  };

  const lifecycle = await restartableServer('nats', launch);
  // Getters keep `process` following restarts.
  return Object.defineProperties({
    url: `nats://${LOOPBACK}:${port}`,
    port,
    storeDir,
  }, Object.getOwnPropertyDescriptors(lifecycle)) as NatsServer;
}

async function jetStreamHealthy(monitorPort: number): Promise<boolean> {
  try {
    const res = await fetch(`http://${LOOPBACK}:${monitorPort}/healthz?js-enabled-only=true`, {
      signal: AbortSignal.timeout(1000),
    });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}
