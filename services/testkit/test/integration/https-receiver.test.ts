import https from 'node:https';
import fs from 'node:fs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startHttpsReceiver, type HttpsReceiver } from '@mailfleet/testkit';

interface Reply {
  status: number;
  body: string;
}

function post(url: string, body: string, ca: string | undefined, timeoutMs = 5000): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      { method: 'POST', headers: { 'content-type': 'application/json', 'x-test': 'yes' }, ...(ca ? { ca } : {}), timeout: timeoutMs },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

describe('HTTPS receiver', () => {
  let receiver: HttpsReceiver;
  let ca: string;

  beforeAll(async () => {
    receiver = await startHttpsReceiver();
    ca = fs.readFileSync(receiver.caFile, 'utf8');
  });
  afterAll(() => receiver.close());
  beforeEach(() => receiver.reset());

  it('is trusted with its CA and records method, path, headers and the raw body', async () => {
    const reply = await post(`${receiver.url}/hooks/a?x=1`, '{"hello":"world"}', ca);
    expect(reply.status).toBe(200);
    const [request] = await receiver.waitForRequests(1, 2000);
    expect(request).toMatchObject({ index: 0, method: 'POST', path: '/hooks/a?x=1' });
    expect(request?.headers['x-test']).toBe('yes');
    expect(request?.rawBody.toString()).toBe('{"hello":"world"}');
    expect(Date.parse(request?.receivedAt ?? '')).not.toBeNaN();
  });

  it('is trusted on 127.0.0.1 as well as localhost', async () => {
    const reply = await post(`https://127.0.0.1:${receiver.port}/ip`, '', ca);
    expect(reply.status).toBe(200);
  });

  it('is rejected without the CA', async () => {
    await expect(post(`${receiver.url}/`, '', undefined)).rejects.toMatchObject({
      code: expect.stringMatching(/SELF_SIGNED|UNABLE_TO_GET_ISSUER|UNABLE_TO_VERIFY/),
    });
  });

  it('answers queued plans first, then the default', async () => {
    receiver.setResponse({ status: 204 });
    receiver.queueResponses({ status: 500, body: 'boom' }, { status: 429 });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await post(`${receiver.url}/q`, String(i), ca)).status);
    expect(statuses).toEqual([500, 429, 204]);
    expect(receiver.requests().map((r) => r.rawBody.toString())).toEqual(['0', '1', '2']);
  });

  it('delays an answer per request (so a sender times out)', async () => {
    receiver.setResponse((request) => (request.path === '/slow' ? { delayMs: 1500 } : { status: 202 }));
    await expect(post(`${receiver.url}/slow`, '', ca, 300)).rejects.toThrow('timeout');
    expect((await post(`${receiver.url}/fast`, '', ca)).status).toBe(202);
    expect(receiver.requests().map((r) => r.path)).toEqual(['/slow', '/fast']);
  });

  it('waitForRequests fails with a count when too few arrive', async () => {
    await expect(receiver.waitForRequests(1, 200)).rejects.toThrow('expected 1 request(s) within 200 ms, got 0');
  });
});
