import fsp from 'node:fs/promises';
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTestCa, type TestCa } from './test-ca.js';

export interface RecordedRequest {
  /** 0 for the first request this receiver got. */
  index: number;
  method: string;
  /** Path and query, as sent. */
  path: string;
  headers: IncomingHttpHeaders;
  rawBody: Buffer;
  /** ISO 8601, when the request line arrived. */
  receivedAt: string;
  /** Which TLS connection carried it: 0 for the receiver's first, counting up (keep-alive reuse shows as repeats). */
  connection: number;
}

export interface ResponsePlan {
  /** Default 200. */
  status?: number;
  /** Wait this long before answering (for timeouts). */
  delayMs?: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Destroy the connection instead of answering (after delayMs). */
  drop?: boolean;
}

export type Responder = (request: RecordedRequest) => ResponsePlan | Promise<ResponsePlan>;

export interface HttpsReceiver {
  /** `https://localhost:PORT` (the certificate also names 127.0.0.1). */
  readonly url: string;
  readonly port: number;
  /** CA certificate file that signed the server certificate (for NODE_EXTRA_CA_CERTS). */
  readonly caFile: string;
  readonly caPem: string;
  /** Every request so far, in arrival order. */
  requests(): RecordedRequest[];
  /** How every request not taken by queueResponses is answered (default 200 with an empty body). */
  setResponse(plan: ResponsePlan | Responder): void;
  /** The next requests get these answers, one each, before the default applies again. */
  queueResponses(...plans: ResponsePlan[]): void;
  /** Resolves with the first `count` requests once that many arrived. */
  waitForRequests(count: number, timeoutMs?: number): Promise<RecordedRequest[]>;
  /** Forgets requests, queued answers, and the default answer. */
  reset(): void;
  close(): Promise<void>;
}

export interface StartHttpsReceiverOptions {
  /** Default: a free port. */
  port?: number;
  /** Sign with this CA (e2e: the one the platform trusts); default a fresh CA. */
  ca?: TestCa;
  /** Names in the server certificate. Default localhost and 127.0.0.1. */
  hosts?: string[];
}

/** An HTTPS server on loopback that records every request, for webhook tests. */
export async function startHttpsReceiver(opts: StartHttpsReceiverOptions = {}): Promise<HttpsReceiver> {
  const ownCa = opts.ca === undefined;
  const ca = opts.ca ?? (await createTestCa());
  const { certPem, keyPem } = ca.issueServerCert(opts.hosts ?? ['localhost', '127.0.0.1']);
  const recorded: RecordedRequest[] = [];
  const queue: ResponsePlan[] = [];
  let fallback: ResponsePlan | Responder = {};
  const waiters = new Set<() => void>();
  let closing = false;
  const connections = new WeakMap<object, number>();
  let connectionSeq = 0;

  const server = https.createServer({ cert: certPem, key: keyPem }, (req, res) => {
    const receivedAt = new Date().toISOString();
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request: RecordedRequest = {
        index: recorded.length,
        method: req.method ?? 'GET',
        path: req.url ?? '/',
        headers: req.headers,
        rawBody: Buffer.concat(chunks),
        receivedAt,
        connection: connections.get(req.socket) ?? -1,
      };
      recorded.push(request);
      for (const wake of waiters) wake();
      const planned = queue.shift();
      void (async () => {
        try {
          const plan = planned ?? (typeof fallback === 'function' ? await fallback(request) : fallback);
          if (plan.delayMs) await sleep(plan.delayMs);
          if (closing || res.destroyed) return;
          if (plan.drop) {
            req.socket.destroy();
            return;
          }
          res.writeHead(plan.status ?? 200, plan.headers);
          res.end(plan.body ?? '');
        } catch (error) {
          if (!res.headersSent) res.writeHead(500);
          res.end(String(error));
        }
      })();
    });
  });
  server.on('secureConnection', (socket) => connections.set(socket, connectionSeq++));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('https receiver: unexpected address');

  return {
    url: `https://localhost:${address.port}`,
    port: address.port,
    caFile: ca.caFile,
    caPem: ca.certPem,
    requests: () => [...recorded],
    setResponse(plan) {
      fallback = plan;
    },
    queueResponses(...plans) {
      queue.push(...plans);
    },
    waitForRequests(count, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = (): boolean => {
          if (recorded.length < count) return false;
          cleanup();
          resolve(recorded.slice(0, count));
          return true;
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`expected ${count} request(s) within ${timeoutMs} ms, got ${recorded.length}`));
        }, timeoutMs);
        const wake = (): void => void check();
        const cleanup = (): void => {
          clearTimeout(timer);
          waiters.delete(wake);
        };
        waiters.add(wake);
        check();
      });
    },
    reset() {
      recorded.length = 0;
      queue.length = 0;
      fallback = {};
    },
    async close() {
      closing = true;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      // A CA made for this receiver alone goes with it.
      if (ownCa) await fsp.rm(ca.dir, { recursive: true, force: true });
    },
  };
}
