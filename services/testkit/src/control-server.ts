import http from 'node:http';

/** Handlers keyed by `METHOD /path`; they get the parsed JSON body and return a JSON-able result. */
export type ControlRoutes = Record<string, (body: Record<string, unknown>) => unknown>;

export interface ControlServer {
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * A tiny loopback JSON endpoint: test files run in worker processes, while the
 * servers they want to stop, restart or configure live in the global setup's.
 */
export async function startControlServer(routes: ControlRoutes): Promise<ControlServer> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const key = `${req.method} ${(req.url ?? '/').split('?')[0]}`;
      const handler = routes[key];
      const reply = (status: number, value: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value ?? null));
      };
      if (!handler) {
        reply(404, { error: `no control route ${key}; known: ${Object.keys(routes).join(', ')}` });
        return;
      }
      let body: Record<string, unknown> = {};
      try {
        const text = Buffer.concat(chunks).toString('utf8');
        if (text) body = JSON.parse(text) as Record<string, unknown>;
      } catch {
        reply(400, { error: 'body is not JSON' });
        return;
      }
      Promise.resolve()
        .then(() => handler(body))
        .then(
          (result) => reply(200, result ?? { ok: true }),
          (error: Error) => reply(500, { error: error.message }),
        );
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('control server: unexpected address');
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
