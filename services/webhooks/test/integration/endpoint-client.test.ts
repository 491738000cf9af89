import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { createTestCa, type TestCa } from '@mailfleet/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpointClient, type EndpointClient } from '../../src/clients/endpoint.client.js';
import { parseWebhookUrl } from '../../src/domain/urls.js';

// The endpoint client against a real HTTPS server on loopback, answering each path its own way.
const LIMIT = 1_024;
let ca: TestCa;
let server: https.Server;
let base: string;
let client: EndpointClient;
const received: { path: string; body: string; headers: Record<string, unknown> }[] = [];
/** Chunks written to the endless answer so far. */
let endlessChunks = 0;

beforeAll(async () => {
  ca = await createTestCa();
  const { certPem, keyPem } = ca.issueServerCert(['localhost', '127.0.0.1']);
  server = https.createServer({ cert: certPem, key: keyPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      received.push({ path, body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
      if (path === '/ok') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('thanks');
      } else if (path === '/redirect') {
        res.writeHead(302, { location: 'https://elsewhere.example/hook' });
        res.end();
      } else if (path === '/unavailable') {
        res.writeHead(503);
        res.end('x'.repeat(5_000));
      } else if (path === '/endless') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const more = (): void => {
          if (res.destroyed) return;
          endlessChunks++;
          res.write('y'.repeat(100), () => setImmediate(more));
        };
        more();
      } else if (path === '/cut') {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.write('partial ');
        setTimeout(() => req.socket.destroy(), 20);
      } else if (path === '/slow-body') {
        // The status and a first part at once, the rest never.
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('accepted, ');
      } else if (path === '/silent') {
        // Never answers: the attempt's time limit ends it.
      } else if (path === '/drop') {
        req.socket.destroy();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `https://localhost:${(server.address() as AddressInfo).port}`;
  client = createEndpointClient({ allowPrivateNetworks: true, timeoutMs: 2_000, responseTextLimit: LIMIT, extraCa: [ca.certPem] });
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const post = (path: string, opts?: { timeoutMs?: number }) => client.post(parseWebhookUrl(`${base}${path}`), '{"hello":"world"}', { 'x-test': path }, opts);

describe('endpoint client posts', () => {
  it('a 2xx is a success with its text; the body, JSON type, length and headers go out as given', async () => {
    const result = await post('/ok');
    expect(result).toMatchObject({ ok: true, status: 200, responseText: 'thanks' });
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
    const req = received.find((r) => r.path === '/ok')!;
    expect(req.body).toBe('{"hello":"world"}');
    expect(req.headers).toMatchObject({ 'content-type': 'application/json', 'content-length': '17', 'x-test': '/ok', 'user-agent': 'mailfleet-webhooks/1' });
  });

  it('a redirect is not followed and names where it pointed', async () => {
    expect(await post('/redirect')).toMatchObject({ ok: false, status: 302, error: 'redirect not followed (HTTP 302 to https://elsewhere.example/hook)' });
    expect(received.filter((r) => r.path === '/hook')).toHaveLength(0);
  });

  it('a non-2xx fails with its status and the first `limit` bytes of its text', async () => {
    const result = await post('/unavailable');
    expect(result).toMatchObject({ ok: false, status: 503, error: 'receiver answered 503' });
    expect(result.responseText).toBe('x'.repeat(LIMIT));
  });

  it('an endless answer is judged by its status once `limit` bytes arrived, and no more of it is read', async () => {
    const result = await post('/endless');
    expect(result).toMatchObject({ ok: true, status: 200, responseText: 'y'.repeat(LIMIT) });
    const written = endlessChunks;
    await new Promise((resolve) => setTimeout(resolve, 200));
    // The connection was dropped: the server's writes stop soon after the limit instead of going on for ever.
    expect(endlessChunks - written).toBeLessThan(50);
  });

  it('an answer cut short after its status keeps what arrived and is judged by the status', async () => {
    expect(await post('/cut')).toMatchObject({ ok: false, status: 500, responseText: 'partial ', error: 'receiver answered 500' });
  });

  it('a connection dropped before any answer fails as closed by the receiver', async () => {
    const result = await post('/drop');
    expect(result.ok).toBe(false);
    expect(result.status).toBeUndefined();
    expect(result.error).toMatch(/^connection closed by the receiver before its answer \(/);
  });

  it('no answer within the time limit is a time-out, settled at the limit', async () => {
    const started = Date.now();
    const result = await post('/silent', { timeoutMs: 300 });
    expect(result).toMatchObject({ ok: false, error: 'timed out after 300 ms' });
    expect(result.status).toBeUndefined();
    expect(Date.now() - started).toBeLessThan(2_000);
    // The aborted post left the pool usable.
    expect(await post('/ok')).toMatchObject({ ok: true, status: 200 });
  });

  it('an answer whose status came in time but whose text never ends is judged by the status at the time limit', async () => {
    const started = Date.now();
    expect(await post('/slow-body', { timeoutMs: 300 })).toMatchObject({ ok: true, status: 200, responseText: 'accepted, ' });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('posts after a time-out, a cut answer and a dropped connection still succeed, several at once', async () => {
    const results = await Promise.all(Array.from({ length: 12 }, () => post('/ok')));
    expect(results.every((r) => r.ok && r.responseText === 'thanks')).toBe(true);
  });

  it('a refused connection is a failed attempt with a readable error', async () => {
    const closed = https.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const result = await client.post(parseWebhookUrl(`https://localhost:${port}/`), '{}', {});
    expect(result).toMatchObject({ ok: false });
    expect(result.error).toMatch(/ECONNREFUSED/);
  });
});
