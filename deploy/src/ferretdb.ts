import fsp from 'node:fs/promises';
import path from 'node:path';
import { assertBinary, resolveBinaries } from './binaries.js';
import type { LogSink } from './logs.js';
import { canConnect, findFreePort, LOOPBACK, pollUntil } from './net.js';
import { describeExit, ManagedProcess, restartableServer, type RestartableServer } from './process.js';

export interface StartFerretDbOptions {
  /** 0 picks a free port (kept across restarts). Default 27017. */
  port?: number;
  /** SQLite files go under `<dataDir>/ferretdb`. */
  dataDir: string;
  binDir?: string;
  /** The launcher binary; default FERRETDB_BIN or `<binDir>/ferretdb-launcher`. */
  bin?: string;
  /** FerretDB's own log level (debug, info, warn, error). Default warn. */
  logLevel?: string;
  log?: LogSink;
  name?: string;
  readyTimeoutMs?: number;
  stopTimeoutMs?: number;
}

export interface FerretDbServer extends RestartableServer {
  /** `mongodb://127.0.0.1:PORT/` */
  readonly url: string;
  readonly port: number;
  readonly dataDir: string;
}

/** FerretDB v1 on SQLite through deploy/ferretdb's launcher, bound to loopback. */
export async function startFerretDb(opts: StartFerretDbOptions): Promise<FerretDbServer> {
  const name = opts.name ?? 'ferretdb';
  const bin = opts.bin ?? resolveBinaries(opts.binDir === undefined ? {} : { binDir: opts.binDir }).ferretdb;
  assertBinary(bin, 'ferretdb-launcher');
  const port = opts.port === undefined ? 27017 : opts.port === 0 ? await findFreePort() : opts.port;
  const dataDir = path.join(path.resolve(opts.dataDir), 'ferretdb');
  await fsp.mkdir(dataDir, { recursive: true });
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;

  const launch = async (): Promise<ManagedProcess> => {
    const p = new ManagedProcess({
      name,
      command: bin,
      args: ['-listen', `${LOOPBACK}:${port}`, '-data', dataDir, '-log-level', opts.logLevel ?? 'warn'],
      env: process.env,
      ...(opts.log ? { log: opts.log } : {}),
      ...(opts.stopTimeoutMs !== undefined ? { stopTimeoutMs: opts.stopTimeoutMs } : {}),
    });
    let announced = false;
    p.onLine((line) => {
      if (line.includes('ferretdb listening on')) announced = true;
    });
    p.start();
    try {
      // The launcher prints its line as the listener starts; a TCP connect proves it is bound.
      await pollUntil(`${name} on 127.0.0.1:${port}`, async () => announced && (await canConnect(port)), {
        timeoutMs: readyTimeoutMs,
        abortReason: () => {
          const exit = p.lastExit;
          return exit ? new Error(describeExit(exit, p.tail())) : undefined;
        },
      });
    } catch (error) {
      await p.stop(2000);
      throw error;
    }
    return p;
  };

  const lifecycle = await restartableServer('ferretdb', launch);
  // Getters keep `process` following restarts.
  return Object.defineProperties({
    url: `mongodb://${LOOPBACK}:${port}/`,
    port,
    dataDir,
  }, Object.getOwnPropertyDescriptors(lifecycle)) as FerretDbServer;
}
