import { createLogger } from '@mailfleet/kit';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { createDevInbox, dkimVerdict, type DevInbox, type DevInboxReaders, type StoredMessage } from '../../src/clients/dev-inbox.js';
import { devRoutes } from '../../src/routes/v1/dev/dev.routes.js';

// The dev inbox over fake runner readers (the real ones run end to end in gateway/test/e2e/session.e2e.test.ts).

function raw(i: number, extra = ''): Buffer {
  return Buffer.from([
    'DKIM-Signature: v=1; a=rsa-sha256; d=shop.test; s=mf1;', ' h=from:to:subject; b=abc',
    `From: Shop <shop@shop.test>`, `To: bounce+${i}@example.org`, `Subject: Hello ${i}`, 'MIME-Version: 1.0',
    'Content-Type: multipart/alternative; boundary=b', '', '--b', 'Content-Type: text/plain', '', `text ${i}${extra}`,
    '--b', 'Content-Type: text/html', '', `<p>html ${i}</p>`, '--b--', '',
  ].join('\r\n'));
}

function readers(messages: StoredMessage[], dns: boolean): DevInboxReaders & { verified: number } {
  const r = {
    verified: 0,
    readMailStore: async () => messages,
    readLocalDnsState: async () => (dns ? { address: '127.0.0.1:5353' } : undefined),
    verifyDkim: async () => {
      r.verified++;
      return [{ result: 'fail', domain: 'other.test' }, { result: 'pass', domain: 'shop.test' }];
    },
    simulatorRule: (a: string) => (a.startsWith('bounce') ? 'bounce' : undefined),
  };
  return r;
}

const stored = Array.from({ length: 5 }, (_, i): StoredMessage => ({
  id: `m${i}`, receivedAt: new Date(Date.UTC(2026, 0, 1, 0, i)), mailFrom: 'bounces@shop.test', rcptTo: [`bounce+${i}@example.org`], raw: raw(i),
}));

describe('the dev inbox', () => {
  it('lists newest first in pages with a cursor, with the DKIM verdict', async () => {
    const r = readers(stored, true);
    const inbox = createDevInbox({ mailDir: '/x/mail', dataDir: '/x', readers: async () => r });
    const first = await inbox.list(2);
    expect(first.data.map((m) => m.id)).toEqual(['m4', 'm3']);
    expect(first.data[0]).toMatchObject({ from: 'Shop <shop@shop.test>', to: ['bounce+4@example.org'], subject: 'Hello 4', dkim: 'pass', size: stored[4]!.raw.length });
    const second = await inbox.list(2, first.nextCursor!);
    expect(second.data.map((m) => m.id)).toEqual(['m2', 'm1']);
    const last = await inbox.list(2, second.nextCursor!);
    expect(last).toEqual({ data: [expect.objectContaining({ id: 'm0' })], nextCursor: null });
    expect(await inbox.list(2, 'gone')).toEqual({ data: [], nextCursor: null });
    // A message never changes: it is parsed and verified once.
    await inbox.list(5);
    expect(r.verified).toBe(5);
  });

  it('shows one message parsed, with headers, both parts, the DKIM domain and selector and the simulator rule', async () => {
    const inbox = createDevInbox({ mailDir: '/x/mail', dataDir: '/x', readers: async () => readers(stored, true) });
    const m = await inbox.get('m1');
    expect(m).toMatchObject({
      id: 'm1', subject: 'Hello 1', html: '<p>html 1</p>', text: 'text 1', dkim: { result: 'pass', domain: 'shop.test', selector: 'mf1' }, simulator: 'bounce',
    });
    expect(m!.headers).toContainEqual({ name: 'Subject', value: 'Hello 1' });
    expect(m!.headers.find((h) => h.name === 'DKIM-Signature')?.value).toBe('v=1; a=rsa-sha256; d=shop.test; s=mf1; h=from:to:subject; b=abc');
    expect(await inbox.get('nope')).toBeUndefined();
  });

  it('says temperror while local DNS is not running', async () => {
    const inbox = createDevInbox({ mailDir: '/x/mail', dataDir: '/x', readers: async () => readers(stored, false) });
    expect((await inbox.list(1)).data[0]?.dkim).toBe('temperror');
  });

  it('reduces several signatures to one verdict', () => {
    expect(dkimVerdict([])).toEqual({ result: 'none', domain: null });
    expect(dkimVerdict([{ result: 'fail', domain: 'a' }, { result: 'pass', domain: 'b' }])).toEqual({ result: 'pass', domain: 'b' });
    expect(dkimVerdict([{ result: 'policy', domain: 'a' }])).toEqual({ result: 'neutral', domain: 'a' });
  });
});

describe('the dev inbox routes', () => {
  const appWith = (devInbox?: DevInbox) => buildApp({
    logger: createLogger({ service: 'gateway-test', level: 'silent' }),
    registry: new Registry(),
    authenticate: async () => ({ teamId: 'team_1', keyId: 'key_1', userId: 'usr_1', permission: 'FULL' }),
    info: { version: '0.0.0', environment: 'test', startedAt: Date.now() },
    areas: [devRoutes({ devInbox })],
  });
  const auth = { authorization: 'Bearer mf_any' };

  it('are 404 with the contract\'s message when the platform runs no SMTP sink of its own', async () => {
    const app = await appWith();
    for (const url of ['/v1/dev/inbox', '/v1/dev/inbox/m1']) {
      const res = await app.inject({ url, headers: auth });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ code: 'NOT_FOUND', message: 'The dev inbox exists only when the platform runs its own SMTP sink (npm start)' });
    }
    await app.close();
  });

  it('list and show the sink\'s messages when it has one', async () => {
    const app = await appWith(createDevInbox({ mailDir: '/x/mail', dataDir: '/x', readers: async () => readers(stored, true) }));
    const page = await app.inject({ url: '/v1/dev/inbox?limit=2', headers: auth });
    expect(page.json()).toMatchObject({ data: [{ id: 'm4' }, { id: 'm3' }], nextCursor: 'm3' });
    expect((await app.inject({ url: '/v1/dev/inbox/m0', headers: auth })).json()).toMatchObject({ id: 'm0', text: 'text 0' });
    expect((await app.inject({ url: '/v1/dev/inbox/nope', headers: auth })).statusCode).toBe(404);
    expect((await app.inject({ url: '/v1/dev/inbox?limit=0', headers: auth })).statusCode).toBe(400);
    await app.close();
  });
});
