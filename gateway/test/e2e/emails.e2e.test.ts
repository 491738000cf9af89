import { randomBytes } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import { createSinkReader } from '@mailfleet/deploy';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { killChild, readMailDir, startChild } from '@mailfleet/testkit';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { apiAt, detail, gatewayUrl, mailfleet, mailTo, newSender, trackingLinks, until, waitStatus, type Sender } from './helpers.js';

const api = apiAt(gatewayUrl());
const mailDir = inject('mailDir');

let n = 0;
const inbox = (local = 'user') => `${local}+${Date.now().toString(36)}${n++}@inbox.mailfleet-e2e.test`;

async function sinkCount(address: string): Promise<number> {
  return (await readMailDir(mailDir)).filter((m) => m.envelope.rcptTo.includes(address)).length;
}

let s: Sender;
let tracked: Sender;
beforeAll(async () => {
  s = await newSender('Main');
  tracked = await newSender('Tracked', { tracking: true });
});

function send(body: Record<string, unknown>, as: Sender = s, headers?: Record<string, string>) {
  return api('POST', '/v1/emails', { token: as.token, body: { from: `Shop <shop@${as.domain}>`, subject: 'Hello', text: 'Plain', ...body }, headers });
}

describe('sending (SPEC 4.2)', () => {
  it('delivers a DKIM-signed message that walks QUEUED -> SENT -> DELIVERED', async () => {
    const to = inbox('ann');
    const res = await send({ to, cc: [inbox('cc')], replyTo: 'help@example.org', html: '<p>Hi</p>', headers: { 'X-Order': '42' } });
    expect(res.status).toBe(200);
    const { emailId } = res.body as { emailId: string };
    expect(res.body).toEqual({ emailId });

    const mail = await mailTo(to);
    expect(mail.envelope.mailFrom).toMatch(new RegExp(`^bounces\\+${emailId}-[a-z2-7]{10}@`));
    expect(mail.parsed.messageId).toBe(`<${emailId}@${s.domain}>`);
    expect(mail.parsed.headers.get('x-order')).toBe('42');
    const resolver = new Resolver();
    resolver.setServers([inject('dnsServer')]);
    const dkim = await dkimVerify(mail.raw, { resolver: async (name: string, type: string) => (type === 'TXT' ? resolver.resolveTxt(name) : []) });
    expect(dkim.results.map((r) => [r.signingDomain, r.status.result])).toEqual([[s.domain, 'pass']]);

    const done = await waitStatus(s, emailId, 'DELIVERED');
    // One DELIVERED per recipient (to and cc), each naming its recipient.
    expect(done.emailEvents.map((e) => e.status)).toEqual(['QUEUED', 'SENT', 'DELIVERED', 'DELIVERED']);
    expect(done).toMatchObject({
      id: emailId, teamId: s.teamId, to: [to], from: `Shop <shop@${s.domain}>`, subject: 'Hello', html: '<p>Hi</p>', text: 'Plain',
      domainId: s.domainId, replyTo: ['help@example.org'], bcc: null, scheduledAt: null,
    });
    const times = done.emailEvents.map((e) => Date.parse(e.createdAt));
    expect([...times].sort((a, b) => a - b)).toEqual(times);

    const events = await api('GET', `/v1/emails/${emailId}/events?limit=3`, { token: s.token });
    expect(events.status).toBe(200);
    expect(events.body).toMatchObject({ page: 1, limit: 3 });
    expect((events.body as { events: { status: string; teamId: string }[] }).events.map((e) => e.status)).toEqual(['DELIVERED', 'DELIVERED', 'SENT']);
    const onlySent = await api('GET', `/v1/emails/${emailId}/events?status=SENT`, { token: s.token });
    expect((onlySent.body as { events: unknown[] }).events).toHaveLength(1);

    const list = await api('GET', `/v1/emails?domainId=${s.domainId}&limit=20`, { token: s.token });
    expect(list.status).toBe(200);
    expect((list.body as { data: { id: string }[]; count: number }).data.some((e) => e.id === emailId)).toBe(true);
    expect((await api('GET', '/v1/emails?limit=21', { token: s.token })).status).toBe(400);
    expect((await api('GET', `/v1/emails/${emailId}`, { token: tracked.token })).status).toBe(404);
  });

  it('bounce@ is BOUNCED (Permanent) and the address is suppressed; the next send to it is not made', async () => {
    const to = `bounce+${Date.now().toString(36)}@inbox.mailfleet-e2e.test`;
    const { emailId } = (await send({ to })).body as { emailId: string };
    const r = await waitStatus(s, emailId, 'BOUNCED');
    expect(r.emailEvents.find((e) => e.status === 'BOUNCED')?.data).toMatchObject({ to: [to], bounce: { type: 'Permanent', subType: 'NoEmail' } });
    const suppressed = await until(async () => {
      const list = await api('GET', `/v1/suppressions?search=${encodeURIComponent(to)}`, { token: s.token });
      return ((list.body as { suppressions: { email: string; reason: string }[] }).suppressions ?? []).find((x) => x.email === to);
    }, 30_000, 'suppression');
    expect(suppressed.reason).toBe('HARD_BOUNCE');
    const bounces = await api('GET', '/v1/emails/bounces', { token: s.token });
    expect(bounces.status).toBe(200);
    expect((bounces.body as { data: { id: string; email: string; status: string }[] }).data.find((b) => b.id === emailId)).toMatchObject({ email: to, status: 'BOUNCED' });

    const again = (await send({ to })).body as { emailId: string };
    const second = await waitStatus(s, again.emailId, 'SUPPRESSED');
    expect(second.emailEvents.map((e) => e.status)).toEqual(['SUPPRESSED']);
  });

  it('complaint@ becomes COMPLAINED and is listed', async () => {
    const to = `complaint+${Date.now().toString(36)}@inbox.mailfleet-e2e.test`;
    const { emailId } = (await send({ to })).body as { emailId: string };
    await waitStatus(s, emailId, 'COMPLAINED');
    const list = await api('GET', '/v1/emails/complaints?limit=100', { token: s.token });
    expect((list.body as { data: { id: string; email: string }[] }).data.find((c) => c.id === emailId)?.email).toBe(to);
  });

  it('softbounce@ is delayed, retried and delivered', async () => {
    const to = `softbounce+${Date.now().toString(36)}@inbox.mailfleet-e2e.test`;
    const { emailId } = (await send({ to })).body as { emailId: string };
    const r = await waitStatus(s, emailId, 'DELIVERED');
    expect(r.emailEvents.map((e) => e.status)).toEqual(['QUEUED', 'DELIVERY_DELAYED', 'SENT', 'DELIVERED']);
  });

  it('records opens and clicks through the public tracking links', async () => {
    const to = inbox('track');
    const { emailId } = (await send({ to, html: '<html><body><a href="https://shop.example/item?id=7">Buy</a></body></html>' }, tracked)).body as { emailId: string };
    const html = (await mailTo(to)).parsed.html as string;
    const { pixel, click: link } = trackingLinks(html);
    expect(pixel?.startsWith(gatewayUrl())).toBe(true);
    expect(link?.startsWith(gatewayUrl())).toBe(true);
    const ua = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0) AppleWebKit/605.1.15';
    const img = await fetch(pixel!, { headers: { 'user-agent': ua } });
    expect(img.status).toBe(200);
    expect(img.headers.get('content-type')).toBe('image/gif');
    const click = await fetch(link!, { headers: { 'user-agent': ua }, redirect: 'manual' });
    expect(click.status).toBe(302);
    expect(click.headers.get('location')).toBe('https://shop.example/item?id=7');
    const forged = await fetch(`${link!.slice(0, -3)}abc`, { redirect: 'manual' });
    expect(forged.status).toBe(404);

    const r = await waitStatus(tracked, emailId, 'CLICKED');
    expect(r.emailEvents.find((e) => e.status === 'OPENED')?.data).toMatchObject({ open: { userAgent: ua, platform: 'macOS', ip: expect.any(String), timestamp: expect.any(String) } });
    expect(r.emailEvents.find((e) => e.status === 'CLICKED')?.data).toMatchObject({ click: { url: 'https://shop.example/item?id=7', userAgent: ua, platform: 'macOS' } });
  });

  it('renders templates with variables', async () => {
    const t = await api('POST', '/v1/templates', { token: s.token, body: { name: 'Order', subject: 'Order {{order}}', html: '<b>{{name}}</b>' } });
    const to = inbox('tpl');
    const res = await send({ to, subject: undefined, text: undefined, templateId: (t.body as { id: string }).id, variables: { order: 12, name: 'A<B' } });
    expect(res.status).toBe(200);
    const mail = await mailTo(to);
    expect(mail.parsed.subject).toBe('Order 12');
    expect(mail.parsed.html).toContain('<b>A&lt;B</b>');
  });

  it('refuses missing template variables with a 400 naming them, for a template, inline content and a batch item', async () => {
    const t = await api('POST', '/v1/templates', { token: s.token, body: { name: 'Welcome', subject: 'Hi {{first}}', html: '<p>{{first}} {{last}}</p>' } });
    const marker = inbox('vars');
    const fromTemplate = await send({ to: marker, subject: undefined, text: undefined, templateId: (t.body as { id: string }).id, variables: { first: 'Ann' } });
    expect(fromTemplate).toMatchObject({ status: 400, body: { code: 'BAD_REQUEST' } });
    expect((fromTemplate.body as { message: string }).message).toContain('{{last}}');
    const inline = await send({ to: marker, subject: 'Order {{order}}', text: 'Dear {{name}}', variables: { order: 3 } });
    expect(inline.status).toBe(400);
    expect((inline.body as { message: string }).message).toContain('{{name}}');
    const batch = await api('POST', '/v1/emails/batch', {
      token: s.token,
      body: [
        { from: `a@${s.domain}`, to: marker, subject: 's', text: 'fine' },
        { from: `a@${s.domain}`, to: marker, subject: 's', text: 'Dear {{name}}', variables: {} },
      ],
    });
    expect(batch.status).toBe(400);
    expect((batch.body as { message: string }).message).toMatch(/^emails\[1\]: variables: .*\{\{name\}\}/);
    // Without variables and without a template, braces are content: sent as written.
    const literal = await send({ to: marker, subject: 'Braces', text: 'Use {{name}} in templates' });
    expect(literal.status).toBe(200);
    expect((await mailTo(marker)).parsed.text).toContain('Use {{name}} in templates');
  });

  it('validates: a bad batch item is a 400 naming its index and nothing is sent', async () => {
    const marker = inbox('batch');
    const batch = await api('POST', '/v1/emails/batch', {
      token: s.token,
      body: [{ from: `a@${s.domain}`, to: marker, subject: 's', text: 't' }, { from: `a@${s.domain}`, to: 'not-an-address', subject: 's', text: 't' }],
    });
    expect(batch.status).toBe(400);
    expect((batch.body as { message: string }).message).toMatch(/^emails\[1\]: to: /);
    const noBody = await api('POST', '/v1/emails/batch', { token: s.token, body: [{ from: `a@${s.domain}`, to: marker, subject: 's' }, { from: `a@${s.domain}`, to: marker, subject: 's' }] });
    expect(noBody).toMatchObject({ status: 400, body: { code: 'BAD_REQUEST' } });
    expect((noBody.body as { message: string }).message).toContain('emails[0]');
    await new Promise((r) => setTimeout(r, 1500));
    expect(await sinkCount(marker)).toBe(0);

    const ok = await api('POST', '/v1/emails/batch', { token: s.token, body: [{ from: `a@${s.domain}`, to: inbox(), subject: 's', text: 't' }, { from: `a@${s.domain}`, to: [inbox(), inbox()], subject: 's', html: '<p>x</p>' }] });
    expect(ok.status).toBe(200);
    expect((ok.body as { data: { emailId: string }[] }).data).toHaveLength(2);

    expect((await send({ from: 'x@not-mine.example' })).status).toBe(400);
    expect((await send({ to: inbox(), headers: { Bcc: 'spy@example.org' } })).status).toBe(400);
    expect((await send({ to: inbox(), attachments: [{ filename: 'a.txt', content: 'not base64!' }] })).body).toMatchObject({ code: 'BAD_REQUEST', message: 'attachments[0].content is not valid base64' });
    expect((await send({ to: inbox(), scheduledAt: 'tomorrow' })).status).toBe(400);
    expect((await api('POST', '/v1/emails', { token: s.token, body: { to: inbox(), from: `a@${s.domain}`, text: 'no subject' } })).status).toBe(400);
    const file = await send({ to: inbox('file'), attachments: [{ filename: 'hello.txt', content: Buffer.from('hello').toString('base64') }] });
    expect(file.status).toBe(200);
  });

  it('lets SENDING keys send and keeps domain-restricted keys to their domain (403)', async () => {
    const sending = await mailfleet(['key', 'create', '--team', s.teamId, '--permission', 'SENDING', '--json']);
    const token = (JSON.parse(sending.stdout) as { token: string }).token;
    expect((await api('POST', '/v1/emails', { token, body: { from: `a@${s.domain}`, to: inbox(), subject: 's', text: 't' } })).status).toBe(200);
    expect((await api('GET', '/v1/emails', { token })).status).toBe(403);

    const other = await api('POST', '/v1/domains', { token: s.token, body: { name: `other-${randomBytes(3).toString('hex')}.mailfleet-e2e.test`, region: 'us-east-1' } });
    const restricted = await api('POST', '/v1/api-keys', { token: s.token, body: { name: 'restricted', domainId: (other.body as { id: string }).id } });
    const rToken = (restricted.body as { token: string }).token;
    const refused = await api('POST', '/v1/emails', { token: rToken, body: { from: `a@${s.domain}`, to: inbox(), subject: 's', text: 't' } });
    expect(refused.status).toBe(403);
    const batch = await api('POST', '/v1/emails/batch', { token: rToken, body: [{ from: `a@${s.domain}`, to: inbox(), subject: 's', text: 't' }] });
    expect(batch.status).toBe(403);
  });
});

describe('idempotency', () => {
  it('20 parallel identical requests send one email; another body is 409 NOT_UNIQUE', async () => {
    const to = inbox('idem');
    const key = `order-${randomBytes(6).toString('hex')}`;
    const body = { from: `a@${s.domain}`, to, subject: 'Once', text: 'only once' };
    const results = await Promise.all(Array.from({ length: 20 }, () => api('POST', '/v1/emails', { token: s.token, body, headers: { 'Idempotency-Key': key } })));
    const ok = results.filter((r) => r.status === 200);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    expect(results.every((r) => r.status === 200 || r.status === 409)).toBe(true);
    const ids = new Set(ok.map((r) => (r.body as { emailId: string }).emailId));
    expect(ids.size).toBe(1);
    const [emailId] = [...ids];

    const replay = await api('POST', '/v1/emails', { token: s.token, body: { ...body }, headers: { 'Idempotency-Key': key } });
    expect(replay).toMatchObject({ status: 200, body: { emailId } });
    const different = await api('POST', '/v1/emails', { token: s.token, body: { ...body, subject: 'Other' }, headers: { 'Idempotency-Key': key } });
    expect(different).toMatchObject({ status: 409, body: { code: 'NOT_UNIQUE' } });
    expect((await api('POST', '/v1/emails', { token: s.token, body, headers: { 'Idempotency-Key': 'k'.repeat(257) } })).status).toBe(400);

    await waitStatus(s, emailId!, 'DELIVERED');
    await new Promise((r) => setTimeout(r, 500));
    expect(await sinkCount(to)).toBe(1);
  });
});

describe('scheduling (SPEC 3.2)', () => {
  it('sends a scheduled email at its time; reschedules; sends now with null; cancels only before sending', async () => {
    const toA = inbox('sched');
    // Ten seconds on: the check that nothing went early stays well before it, however slow the requests.
    const at = new Date(Date.now() + 10_000).toISOString();
    const a = ((await send({ to: toA, scheduledAt: at })).body as { emailId: string }).emailId;
    expect((await detail(s, a)).scheduledAt).toBe(at);
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await sinkCount(toA)).toBe(0);
    const mail = await mailTo(toA);
    expect(Date.parse(mail.receivedAt)).toBeGreaterThanOrEqual(Date.parse(at));

    const toB = inbox('resched');
    const b = ((await send({ to: toB, scheduledAt: new Date(Date.now() + 3_600_000).toISOString() })).body as { emailId: string }).emailId;
    const later = new Date(Date.now() + 7_200_000).toISOString();
    expect(await api('PATCH', `/v1/emails/${b}`, { token: s.token, body: { scheduledAt: later } })).toMatchObject({ status: 200, body: { emailId: b } });
    expect((await detail(s, b)).scheduledAt).toBe(later);
    expect((await api('PATCH', `/v1/emails/${b}`, { token: s.token, body: { scheduledAt: null } })).status).toBe(200);
    await mailTo(toB);
    await waitStatus(s, b, 'DELIVERED');
    const tooLate = await api('POST', `/v1/emails/${b}/cancel`, { token: s.token });
    expect(tooLate.status).toBe(400);
    expect((tooLate.body as { message: string }).message).toContain('already been sent');

    const toC = inbox('cancel');
    const c = ((await send({ to: toC, scheduledAt: new Date(Date.now() + 5_000).toISOString() })).body as { emailId: string }).emailId;
    expect(await api('POST', `/v1/emails/${c}/cancel`, { token: s.token })).toMatchObject({ status: 200, body: { emailId: c } });
    const cancelled = await detail(s, c);
    expect(cancelled.latestStatus).toBe('CANCELLED');
    expect(cancelled.emailEvents.map((e) => e.status)).toEqual(['QUEUED', 'CANCELLED']);
    expect((await api('PATCH', `/v1/emails/${c}`, { token: s.token, body: { scheduledAt: null } })).status).toBe(400);
    await new Promise((r) => setTimeout(r, 6_000));
    expect(await sinkCount(toC)).toBe(0);
    expect((await api('POST', '/v1/emails/em_missing/cancel', { token: s.token })).status).toBe(404);
  }, 90_000);
});

describe('feedback lists', () => {
  it('serves unsubscribes from the contacts service', async () => {
    const res = await api('GET', '/v1/emails/unsubscribes', { token: s.token });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ data: expect.any(Array), count: expect.any(Number) });
  });
});

describe('crash safety', () => {
  it('kill -9 of the emails service while 500 emails are queued: after restart each is sent exactly once', async () => {
    const crash = await newSender('Crash');
    const tos = Array.from({ length: 500 }, (_, i) => `crash${i}-${randomBytes(3).toString('hex')}@inbox.mailfleet-e2e.test`);
    const ids: string[] = [];
    // All 500 queued first, due together a little later; then the kill lands while they are being sent.
    const due = new Date(Date.now() + 15_000).toISOString();
    for (let i = 0; i < tos.length; i += 100) {
      const res = await api('POST', '/v1/emails/batch', {
        token: crash.token, body: tos.slice(i, i + 100).map((to) => ({ from: `a@${crash.domain}`, to, subject: 'Crash test', text: 'x', scheduledAt: due })),
      });
      expect(res.status).toBe(200);
      ids.push(...(res.body as { data: { emailId: string }[] }).data.map((d) => d.emailId));
    }
    // The sink's envelopes only, read incrementally.
    const sinkReader = createSinkReader(mailDir, { withRaw: false });
    let count = 0;
    const delivered = async () => {
      for (const m of await sinkReader.read()) if (m.rcptTo.some((r) => r.startsWith('crash'))) count++;
      return count;
    };
    // Kill it in the middle of sending.
    await until(async () => (await delivered()) >= 20, 120_000, 'sending started');
    await killChild('emails', 'SIGKILL');
    const atKill = await delivered();
    expect(atKill).toBeLessThan(500);
    await startChild('emails');

    await until(async () => (await delivered()) >= 500, 600_000, 'all 500 delivered');
    // Anything in doubt at the kill is settled by its delivery report or, failing that, after the lease: wait it out.
    await new Promise((r) => setTimeout(r, 25_000));
    const mail = await readMailDir(mailDir);
    const perRecipient = new Map<string, number>();
    for (const m of mail) for (const r of m.envelope.rcptTo) if (r.startsWith('crash')) perRecipient.set(r, (perRecipient.get(r) ?? 0) + 1);
    const missing = tos.filter((t) => !perRecipient.has(t));
    const twice = [...perRecipient].filter(([, c]) => c > 1);
    expect({ missing: missing.length, twice: twice.length }).toEqual({ missing: 0, twice: 0 });

    // And their records agree: every one SENT or DELIVERED.
    for (const id of ids.slice(0, 20)) expect(['SENT', 'DELIVERED']).toContain((await detail(crash, id)).latestStatus);
  }, 900_000);
});
