import { Resolver } from 'node:dns/promises';
import { status, type ServiceError } from '@grpc/grpc-js';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { emailsV1 } from '@mailfleet/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveKey } from '../../src/domain/tracking.js';
import { eventually, startHarness, statusName, TRACKING_KEY, type Harness } from './harness.js';

let h: Harness;
let sender: { teamId: string; domainId: string; domain: string };

beforeAll(async () => {
  h = await startHarness();
  sender = await h.newSender({ openTracking: true, clickTracking: true });
});
afterAll(async () => h?.close());

const code = (p: Promise<unknown>) => p.then(() => 'OK', (e: ServiceError) => status[e.code]);
const details = (p: Promise<unknown>) => p.then(() => '', (e: ServiceError) => e.details);
let n = 0;
const uniq = (local: string) => `${local}+${Date.now().toString(36)}${n++}@inbox.example.org`;

function email(over: Partial<emailsV1.OutgoingEmail> = {}): emailsV1.OutgoingEmail {
  return {
    to: [uniq('ann')], from: `Shop <shop@${sender.domain}>`, subject: 'Hello', text: 'Plain body', replyTo: [], cc: [], bcc: [],
    headers: {}, attachments: [], ...over,
  };
}

async function send(over: Partial<emailsV1.OutgoingEmail> = {}, teamId = sender.teamId): Promise<string> {
  return (await h.emails.call.sendEmail({ teamId, email: email(over) })).emailId;
}

async function mailTo(address: string) {
  return eventually(async () => (await h.mail()).find((m) => m.envelope.rcptTo.includes(address.toLowerCase())), 15_000, `mail to ${address}`);
}

const statuses = (r: emailsV1.GetEmailResponse) => r.events.map((e) => statusName(e.status));

describe('templates', () => {
  it('creates, lists newest first, reads, updates and deletes, scoped to the team', async () => {
    const other = await h.auth.call.createTeam({ name: 'Other', plan: 0 });
    const a = (await h.emails.call.createTemplate({ teamId: sender.teamId, name: 'Welcome', subject: 'Hi {{name}}', html: '<p>{{name}}</p>' })).template!;
    const b = (await h.emails.call.createTemplate({ teamId: sender.teamId, name: 'Second', subject: 'S', content: 'text' })).template!;
    const listed = (await h.emails.call.listTemplates({ teamId: sender.teamId })).templates;
    expect(listed.slice(0, 2).map((t) => t.id)).toEqual([b.id, a.id]);
    expect(a).toMatchObject({ name: 'Welcome', subject: 'Hi {{name}}', html: '<p>{{name}}</p>', content: undefined, teamId: sender.teamId });
    expect(await code(h.emails.call.getTemplate({ teamId: other.team!.id, templateId: a.id }))).toBe('NOT_FOUND');
    const up = (await h.emails.call.updateTemplate({ teamId: sender.teamId, templateId: a.id, content: 'Hi {{name}}' })).template!;
    expect(up).toMatchObject({ name: 'Welcome', content: 'Hi {{name}}', html: '<p>{{name}}</p>' });
    expect(await code(h.emails.call.createTemplate({ teamId: sender.teamId, name: ' ', subject: 'x' }))).toBe('INVALID_ARGUMENT');
    await h.emails.call.deleteTemplate({ teamId: sender.teamId, templateId: b.id });
    expect(await code(h.emails.call.getTemplate({ teamId: sender.teamId, templateId: b.id }))).toBe('NOT_FOUND');
    expect(await code(h.emails.call.deleteTemplate({ teamId: sender.teamId, templateId: b.id }))).toBe('NOT_FOUND');
  });
});

describe('sending', () => {
  it('delivers a DKIM-signed message and walks QUEUED -> SENT -> DELIVERED with SPEC 6.3 events', async () => {
    const to = uniq('ann');
    const id = await send({ to: [`Ann Example <${to}>`], cc: [uniq('cc')], bcc: [uniq('bcc')], replyTo: ['help@example.org'], headers: { 'X-Order': '42' } });
    const mail = await mailTo(to);
    expect(mail.envelope.mailFrom).toMatch(new RegExp(`^bounces\\+${id}-[a-z2-7]{10}@bounces\\.mailfleet\\.test$`));
    expect(mail.envelope.rcptTo).toHaveLength(3);
    expect(mail.parsed.messageId).toBe(`<${id}@${sender.domain}>`);
    expect(mail.parsed.headers.get('x-order')).toBe('42');
    expect(mail.raw.toString()).not.toContain('bcc+');

    const resolver = new Resolver();
    resolver.setServers([h.dns.address]);
    const verified = await dkimVerify(mail.raw, { resolver: async (name: string, type: string) => (type === 'TXT' ? resolver.resolveTxt(name) : []) });
    expect(verified.results.map((r) => [r.signingDomain, r.status.result])).toEqual([[sender.domain, 'pass']]);

    const done = await h.waitForStatus(sender.teamId, id, 'DELIVERED');
    expect(statuses(done).slice(0, 2)).toEqual(['QUEUED', 'SENT']);
    expect(statuses(done)).toContain('DELIVERED');
    expect(done.email).toMatchObject({ id, teamId: sender.teamId, domainId: sender.domainId, subject: 'Hello', from: `Shop <shop@${sender.domain}>` });

    const published = await eventually(() => {
      const mine = h.events.filter((e) => (e.data as { id?: string }).id === id);
      return mine.some((e) => e.type === 'email.delivered') && mine;
    });
    const queued = published.find((e) => e.type === 'email.queued')!;
    expect(queued.teamId).toBe(sender.teamId);
    expect(queued.data).toEqual({
      id, status: 'QUEUED', from: `Shop <shop@${sender.domain}>`, to: [to], occurredAt: expect.any(String), subject: 'Hello', domainId: sender.domainId,
    });
    expect(published.map((e) => e.type)).toEqual(expect.arrayContaining(['email.queued', 'email.sent', 'email.delivered']));
  });

  it('bounce@ is a synchronous hard bounce and the address ends up suppressed', async () => {
    const to = `bounce+${Date.now().toString(36)}@inbox.example.org`;
    const id = await send({ to: [to] });
    const r = await h.waitForStatus(sender.teamId, id, 'BOUNCED');
    const bounced = r.events.find((e) => statusName(e.status) === 'BOUNCED')!;
    expect(bounced.data).toMatchObject({ to: [to], bounce: { type: 'Permanent', subType: 'NoEmail', message: expect.stringContaining('5.1.1') } });
    await eventually(async () => (await h.suppressions.call.checkSuppressed({ teamId: sender.teamId, emails: [to] })).suppressedEmails.length === 1, 15_000, 'suppression');
    const list = await h.emails.call.listBounces({ teamId: sender.teamId, page: 1, limit: 20 });
    expect(list.bounces.find((b) => b.emailId === id)).toMatchObject({ email: to, subject: 'Hello', status: emailsV1.EmailStatus.EMAIL_STATUS_BOUNCED });

    // The next email to it is not sent.
    const again = await send({ to: [to, uniq('ok')] });
    const after = await h.waitForStatus(sender.teamId, again, ['SENT', 'DELIVERED']);
    expect(after.events.find((e) => statusName(e.status) === 'SUPPRESSED')?.data).toMatchObject({ to: [to] });
    const onlyOne = await send({ to: [to] });
    expect(statusName((await h.waitForStatus(sender.teamId, onlyOne, 'SUPPRESSED')).email!.latestStatus)).toBe('SUPPRESSED');
  });

  it('softbounce@ is delayed, retried, then delivered', async () => {
    const to = `softbounce+${Date.now().toString(36)}@inbox.example.org`;
    const id = await send({ to: [to] });
    const r = await h.waitForStatus(sender.teamId, id, 'DELIVERED');
    expect(statuses(r)).toEqual(expect.arrayContaining(['QUEUED', 'DELIVERY_DELAYED', 'SENT', 'DELIVERED']));
    expect(r.events.find((e) => statusName(e.status) === 'DELIVERY_DELAYED')?.data).toMatchObject({ reason: expect.stringContaining('451'), attempt: 1 });
  });

  it('complaint@ becomes COMPLAINED from the feedback report', async () => {
    const to = `complaint+${Date.now().toString(36)}@inbox.example.org`;
    const id = await send({ to: [to] });
    const r = await h.waitForStatus(sender.teamId, id, 'COMPLAINED');
    expect(r.events.find((e) => statusName(e.status) === 'COMPLAINED')?.data).toMatchObject({ to: [to], feedbackType: 'abuse' });
    const list = await h.emails.call.listComplaints({ teamId: sender.teamId, page: 1, limit: 20 });
    expect(list.complaints.find((c) => c.emailId === id)?.email).toBe(to);
  });

  it('renders templates with variables (escaped in HTML), the request overriding the template', async () => {
    const t = (await h.emails.call.createTemplate({ teamId: sender.teamId, name: 'Order', subject: 'Order {{order}}', html: '<p>Hi {{name}}</p>', content: 'Hi {{name}}' })).template!;
    const to = uniq('tpl');
    const id = await send({ to: [to], subject: undefined, text: undefined, templateId: t.id, variables: { order: 7, name: '<Tom & Jerry>' } });
    const mail = await mailTo(to);
    expect(mail.parsed.subject).toBe('Order 7');
    expect(mail.parsed.text?.trim()).toBe('Hi <Tom & Jerry>');
    expect(mail.parsed.html).toContain('<p>Hi &lt;Tom &amp; Jerry&gt;</p>');
    const e = (await h.emails.call.getEmail({ teamId: sender.teamId, emailId: id })).email!;
    expect(e).toMatchObject({ subject: 'Order 7', templateId: t.id });

    // A placeholder without a value is known at accept: refused, naming it, and nothing is stored.
    const missing = await details(send({ to: [uniq('tpl')], subject: undefined, text: undefined, templateId: t.id, variables: { order: 1 } }));
    expect(missing).toContain('variables: No value for placeholder {{name}}');
    expect(await details(send({ templateId: 'tpl_missing', subject: undefined }))).toContain('template tpl_missing not found');
  });

  it('threads replies with inReplyToId', async () => {
    const first = await send();
    const to = uniq('reply');
    await send({ to: [to], inReplyToId: first });
    const mail = await mailTo(to);
    expect(mail.parsed.inReplyTo).toBe(`<${first}@${sender.domain}>`);
    expect(mail.parsed.references).toBe(`<${first}@${sender.domain}>`);
    expect(await code(send({ inReplyToId: 'em_nope' }))).toBe('INVALID_ARGUMENT');
  });

  it('sends attachments and refuses bad ones', async () => {
    const to = uniq('att');
    await send({ to: [to], attachments: [{ filename: 'a.txt', content: Buffer.from('hello file') }] });
    const mail = await mailTo(to);
    expect(mail.parsed.attachments.map((a) => [a.filename, a.content.toString()])).toEqual([['a.txt', 'hello file']]);
    const eleven = Array.from({ length: 11 }, (_, i) => ({ filename: `${i}.txt`, content: Buffer.from('x') }));
    expect(await details(send({ attachments: eleven }))).toContain('at most 10 attachments');
    expect(await details(send({ attachments: [{ filename: 'big.bin', content: Buffer.alloc(10 * 1024 * 1024 + 1) }] }))).toContain('limit is 10485760 bytes');
  });

  it('refuses what must not be sent, naming the batch item', async () => {
    expect(await details(send({ from: 'x@unknown-domain.example' }))).toContain('not a domain of this team');
    expect(await details(send({ headers: { From: 'ceo@bank.example' } }))).toContain('cannot be overridden');
    const batch = h.emails.call.sendBatch({ teamId: sender.teamId, emails: [email(), email(), email({ to: ['not an address'] })] });
    expect(await details(batch)).toMatch(/^emails\[2\]: to: /);
    expect(await code(h.emails.call.sendEmail({ teamId: sender.teamId, email: email(), restrictDomainId: 'dom_other' }))).toBe('PERMISSION_DENIED');
    const ok = await h.emails.call.sendEmail({ teamId: sender.teamId, email: email(), restrictDomainId: sender.domainId });
    expect(ok.emailId).toMatch(/^em_/);
  });

  it('refuses a send beyond the daily quota, naming it', async () => {
    const small = await h.newSender({ dailyLimit: 2 });
    const from = `a@${small.domain}`;
    await send({ from }, small.teamId);
    await send({ from }, small.teamId);
    const refused = h.emails.call.sendEmail({ teamId: small.teamId, email: email({ from }) });
    expect(await code(refused)).toBe('RESOURCE_EXHAUSTED');
    expect(await details(h.emails.call.sendEmail({ teamId: small.teamId, email: email({ from }) }))).toMatch(/^Daily email quota of 2 reached/);
  });

  it('records opens and clicks from the tracked links, with client data', async () => {
    const to = uniq('track');
    const id = await send({ to: [to], html: '<html><body><a href="https://shop.example/p?id=1">Buy</a></body></html>' });
    const mail = await mailTo(to);
    const html = mail.parsed.html as string;
    const pixel = /src="https:\/\/track\.mailfleet\.test\/v1\/track\/open\?t=([^"]+)"/.exec(html)?.[1];
    const click = /href="https:\/\/track\.mailfleet\.test\/v1\/track\/click\?t=([^"]+)"/.exec(html)?.[1];
    expect(pixel && click).toBeTruthy();
    const ua = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)';
    expect(await h.emails.call.recordOpen({ token: pixel!, userAgent: ua, ip: '203.0.113.9' })).toEqual({ recorded: true });
    expect(await h.emails.call.recordClick({ token: click!, userAgent: ua, ip: '203.0.113.9' })).toEqual({ url: 'https://shop.example/p?id=1', recorded: true });
    expect(await code(h.emails.call.recordClick({ token: `${click!.slice(0, -2)}xx`, userAgent: ua, ip: '' }))).toBe('INVALID_ARGUMENT');
    const r = await h.waitForStatus(sender.teamId, id, 'CLICKED');
    const opened = r.events.find((e) => statusName(e.status) === 'OPENED')!;
    expect(opened.data).toMatchObject({ open: { timestamp: expect.any(String), userAgent: ua, ip: '203.0.113.9', platform: 'iOS' } });
    const clicked = r.events.find((e) => statusName(e.status) === 'CLICKED')!;
    expect(clicked.data).toMatchObject({ click: { url: 'https://shop.example/p?id=1', userAgent: ua, ip: '203.0.113.9', platform: 'iOS' } });
    expect(deriveKey(TRACKING_KEY, 'tracking')).toHaveLength(64);
  });

  it('lists emails newest first with filters and pages', async () => {
    const other = await h.newSender();
    const before = new Date();
    expect((await h.emails.call.listEmails({ teamId: other.teamId, page: 1, limit: 2, domainIds: [] })).count).toBe(0);
    expect(await code(send({}, other.teamId))).toBe('INVALID_ARGUMENT');
    const mine = [
      await send({ from: `x@${other.domain}` }, other.teamId),
      await send({ from: `x@${other.domain}` }, other.teamId),
      await send({ from: `x@${other.domain}` }, other.teamId),
    ];
    const p1 = await h.emails.call.listEmails({ teamId: other.teamId, page: 1, limit: 2, domainIds: [other.domainId] });
    expect(p1.count).toBe(3);
    expect(p1.emails.map((e) => e.id)).toEqual([mine[2], mine[1]]);
    const p2 = await h.emails.call.listEmails({ teamId: other.teamId, page: 2, limit: 2, domainIds: [], startDate: before });
    expect(p2.emails.map((e) => e.id)).toEqual([mine[0]]);
    expect((await h.emails.call.listEmails({ teamId: other.teamId, page: 1, limit: 20, domainIds: ['dom_none'] })).count).toBe(0);
    expect(await code(h.emails.call.listEmails({ teamId: other.teamId, page: 1, limit: 21, domainIds: [] }))).toBe('INVALID_ARGUMENT');
    expect(await code(h.emails.call.getEmail({ teamId: sender.teamId, emailId: mine[0]! }))).toBe('NOT_FOUND');
  });
});
