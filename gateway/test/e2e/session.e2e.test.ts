import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { apiAt, gatewayUrl, mailfleet, newSender, until, upstreamEnv, type Sender } from './helpers.js';

// Issue 21: people sign in to the console. The platform as `npm start` boots it, the CLI as an operator runs it.

const base = gatewayUrl();
const origin = new URL(base).origin;
const api = apiAt(base);
const tag = randomBytes(4).toString('hex');
const PASSWORD = 'correct horse battery staple';
const at = (local: string) => `${local}+${tag}@people.mailfleet-e2e.test`;

let one: Sender;
let ann: { userId: string; email: string; password: string };

/** `mailfleet user create ... --password-stdin`, the password piped in as an operator would. */
function userCreateWithStdin(args: string[], password: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const bin = fileURLToPath(new URL('../../../services/auth/bin/mailfleet.mjs', import.meta.url));
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, 'user', 'create', ...args, '--password-stdin'], { env: { ...process.env, ...upstreamEnv() } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
    child.stdin.end(`${password}\n`);
  });
}

/** A browser's request: the cookie, and the page's Origin on state-changing methods. */
async function browser(method: string, path: string, cookie: string | undefined, body?: unknown, headers: Record<string, string> = {}) {
  return api(method, path, {
    body,
    headers: { ...(cookie ? { cookie } : {}), ...(method === 'GET' ? {} : { origin }), ...headers },
  });
}

async function signIn(email: string, password: string): Promise<string> {
  const res = await browser('POST', '/v1/session', undefined, { email, password });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return cookieOf(res.headers);
}

function cookieOf(headers: Headers): string {
  const set = headers.get('set-cookie') ?? '';
  const m = /^(mf_session=mfs_[0-9A-Za-z]+);/.exec(set);
  if (!m?.[1]) throw new Error(`no session cookie in ${JSON.stringify(set)}`);
  return m[1];
}

beforeAll(async () => {
  one = await newSender('People');
  const created = await mailfleet(['user', 'create', '--email', at('Ann'), '--team', one.teamId, '--name', 'Ann', '--json']);
  expect(created.code, created.stderr).toBe(0);
  const out = JSON.parse(created.stdout) as { userId: string; email: string; password: string; created: boolean };
  expect(out.created).toBe(true);
  ann = { userId: out.userId, email: out.email, password: out.password };
});

describe('signing in', () => {
  it('sets an HttpOnly SameSite=Strict cookie (not Secure over plain HTTP) and the cookie acts as the team', async () => {
    const res = await browser('POST', '/v1/session', undefined, { email: ann.email.toUpperCase(), password: ann.password });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ user: { id: ann.userId, email: ann.email, name: 'Ann' }, team: { id: one.teamId }, teams: [{ id: one.teamId }] });
    const set = res.headers.get('set-cookie')!;
    expect(set).toMatch(/^mf_session=mfs_[0-9A-Za-z]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=604800$/);
    expect(set).not.toContain('Secure');
    const cookie = cookieOf(res.headers);

    expect((await browser('GET', '/v1/session', cookie)).body).toMatchObject({ user: { id: ann.userId } });
    const teams = await browser('GET', '/v1/teams', cookie);
    expect((teams.body as { id: string }[]).map((t) => t.id)).toEqual([one.teamId]);
    expect((await browser('GET', '/api/v1/settings', cookie)).body).toMatchObject({ id: one.teamId });
    // A cookie principal has FULL permission on its team: it can create a key.
    expect((await browser('POST', '/v1/api-keys', cookie, { name: `console ${tag}` })).status).toBe(200);
  });

  it('refuses cross-origin state changes, and sign-in from another origin, with 403', async () => {
    const cookie = await signIn(ann.email, ann.password);
    for (const headers of [{ origin: 'https://evil.example' }, { origin: 'null' }]) {
      const res = await browser('POST', '/v1/api-keys', cookie, { name: 'csrf' }, headers);
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ code: 'FORBIDDEN', message: 'Cross-origin request refused' });
    }
    const noOrigin = await api('DELETE', '/v1/session', { headers: { cookie } });
    expect(noOrigin.status).toBe(403);
    expect((await browser('POST', '/v1/session', undefined, { email: ann.email, password: ann.password }, { origin: 'https://evil.example' })).status).toBe(403);
    // A bearer key is not a browser's ambient credential: no Origin needed.
    expect((await api('POST', '/v1/api-keys', { token: one.token, body: { name: 'no origin' }, headers: { origin: 'https://evil.example' } })).status).toBe(200);
  });

  it('answers 401 for a wrong password or an unknown email, with the same message', async () => {
    for (const body of [{ email: ann.email, password: 'wrong password!' }, { email: at('nobody'), password: PASSWORD }]) {
      const res = await browser('POST', '/v1/session', undefined, body);
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ code: 'UNAUTHORIZED', message: 'Invalid email or password' });
    }
  });

  it('switches the team of a session; a team the user is not in is 404', async () => {
    const second = JSON.parse((await mailfleet(['team', 'create', '--name', `People Two ${tag}`, '--json'])).stdout) as { teamId: string };
    const foreign = JSON.parse((await mailfleet(['team', 'create', '--name', `People Foreign ${tag}`, '--json'])).stdout) as { teamId: string };
    // The same person, added to a second team by the operator (the password on stdin is not used for an existing user).
    const added = await userCreateWithStdin(['--email', ann.email, '--team', second.teamId, '--json'], 'ignored password 123');
    expect(added.code, added.stderr).toBe(0);
    expect(JSON.parse(added.stdout)).toMatchObject({ userId: ann.userId, created: false });

    const cookie = await signIn(ann.email, ann.password);
    expect((await browser('PATCH', '/v1/session', cookie, { teamId: foreign.teamId })).status).toBe(404);
    const switched = await browser('PATCH', '/v1/session', cookie, { teamId: second.teamId });
    expect(switched.status).toBe(200);
    expect(switched.body).toMatchObject({ team: { id: second.teamId } });
    expect((switched.body as { teams: { id: string }[] }).teams.map((t) => t.id)).toEqual([one.teamId, second.teamId]);
    expect((await browser('GET', '/v1/settings', cookie)).body).toMatchObject({ id: second.teamId });
    expect(((await browser('GET', '/v1/teams', cookie)).body as { id: string }[]).map((t) => t.id)).toEqual([one.teamId, second.teamId]);
  });

  it('signs out: 204, the cookie cleared, and the old cookie is refused at once', async () => {
    const cookie = await signIn(ann.email, ann.password);
    const out = await browser('DELETE', '/v1/session', cookie);
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toMatch(/^mf_session=; Path=\/; HttpOnly; SameSite=Strict; Max-Age=0$/);
    expect((await browser('GET', '/v1/session', cookie)).status).toBe(401);
    expect((await browser('GET', '/v1/emails', cookie)).status).toBe(401);
  });

  it('limits failed sign-ins per email: 429 with Retry-After', async () => {
    const created = await userCreateWithStdin(['--email', at('target'), '--team', one.teamId], PASSWORD);
    expect(created.code, created.stderr).toBe(0);
    // Attempts are counted in 15-minute windows: keep the burst inside one.
    const left = 900_000 - (Date.now() % 900_000);
    if (left < 60_000) await new Promise((r) => setTimeout(r, left + 100));
    for (let i = 0; i < 10; i++) expect((await browser('POST', '/v1/session', undefined, { email: at('target'), password: `guess ${i} wrong` })).status).toBe(401);
    const limited = await browser('POST', '/v1/session', undefined, { email: at('target'), password: PASSWORD });
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ code: 'RATE_LIMITED' });
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(900);
  });
});

describe('the dev inbox', () => {
  it('lists an email the signed-in person sent, newest first, and shows it parsed', async () => {
    const cookie = await signIn(ann.email, ann.password);
    const to = at('reader');
    const sent = await browser('POST', '/v1/emails', cookie, { from: `Shop <shop@${one.domain}>`, to, subject: `Dev inbox ${tag}`, html: '<p>Hello <b>there</b></p>', text: 'Hello there' });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const listed = await until(async () => {
      const page = (await browser('GET', '/v1/dev/inbox?limit=5', cookie)).body as { data: { id: string; to: string[]; subject: string; size: number }[]; nextCursor: string | null };
      return page.data.find((m) => m.to.includes(to)) ? page : undefined;
    }, 30_000, 'the email in the dev inbox');
    const item = listed.data.find((m) => m.to.includes(to))!;
    expect(item).toMatchObject({ subject: `Dev inbox ${tag}` });
    expect(item.size).toBeGreaterThan(0);
    const shown = (await browser('GET', `/v1/dev/inbox/${encodeURIComponent(item.id)}`, cookie)).body as { html: string | null; text: string | null; subject: string };
    expect(shown).toMatchObject({ subject: `Dev inbox ${tag}`, text: expect.stringContaining('Hello there') });
    expect(shown.html).toContain('<b>there</b>');
  });
});

describe('users and invites', () => {
  it('invites by a mailed one-time link, accepts it once, lists and removes the user, whose session ends at once', async () => {
    const cookie = await signIn(ann.email, ann.password);
    const bobEmail = at('bob');
    const created = await browser('POST', '/v1/invites', cookie, { email: bobEmail });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const invite = created.body as { id: string; email: string; url: string; expiresAt: string; mailed: boolean };
    // The team has a verified domain: the link was also mailed through the platform.
    expect(invite).toMatchObject({ email: bobEmail, mailed: true });
    expect(invite.url).toMatch(new RegExp(`^${origin}/invite#token=mfi_[0-9A-Za-z]{43}$`));
    const token = invite.url.split('#token=')[1]!;
    const listed = (await browser('GET', '/v1/invites', cookie)).body as { data: { id: string; acceptedAt: string | null }[] };
    expect(listed.data.find((i) => i.id === invite.id)).toMatchObject({ acceptedAt: null });
    expect(JSON.stringify(listed)).not.toContain(token);

    // The dev inbox shows the mailed invite (the sink is the platform's own), with the link in its text.
    const inboxed = await until(async () => {
      const page = (await browser('GET', '/v1/dev/inbox?limit=50', cookie)).body as { data: { id: string; to: string[]; subject: string; dkim: string }[] };
      return page.data.find((m) => m.to.includes(bobEmail));
    }, 30_000, 'the invite in the dev inbox');
    expect(inboxed.subject).toMatch(/invited/);
    expect(['pass', 'fail', 'none', 'neutral', 'temperror', 'permerror']).toContain(inboxed.dkim);
    const message = (await browser('GET', `/v1/dev/inbox/${encodeURIComponent(inboxed.id)}`, cookie)).body as { text: string | null; from: string; headers: { name: string }[] };
    expect(message.text).toContain(token);
    expect(message.from).toContain(`no-reply@${one.domain}`);
    expect(message.headers.map((h) => h.name.toLowerCase())).toContain('dkim-signature');
    expect((await browser('GET', '/v1/dev/inbox/no-such-message', cookie)).status).toBe(404);

    // Accepting: from another origin refused; a short password refused; then signed in as the new user.
    expect((await browser('POST', '/v1/invites/accept', undefined, { token, password: PASSWORD }, { origin: 'https://evil.example' })).status).toBe(403);
    expect((await browser('POST', '/v1/invites/accept', undefined, { token, password: 'short' })).status).toBe(400);
    const accepted = await browser('POST', '/v1/invites/accept', undefined, { token, password: PASSWORD, name: 'Bob' });
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(200);
    expect(accepted.body).toMatchObject({ user: { email: bobEmail, name: 'Bob' }, team: { id: one.teamId } });
    const bob = cookieOf(accepted.headers);
    const bobId = (accepted.body as { user: { id: string } }).user.id;
    const again = await browser('POST', '/v1/invites/accept', undefined, { token, password: PASSWORD });
    expect(again.status).toBe(400);

    const users = (await browser('GET', '/v1/users', cookie)).body as { data: { id: string; email: string; name: string | null }[] };
    expect(users.data).toEqual(expect.arrayContaining([
      expect.objectContaining({ id: ann.userId, email: ann.email, name: 'Ann' }),
      expect.objectContaining({ id: bobId, email: bobEmail, name: 'Bob' }),
    ]));
    expect((await browser('DELETE', `/v1/users/${ann.userId}`, cookie)).status).toBe(400);
    expect((await browser('GET', '/v1/session', bob)).status).toBe(200);
    expect((await browser('DELETE', `/v1/users/${bobId}`, cookie)).body).toEqual({ success: true });
    expect((await browser('GET', '/v1/session', bob)).status).toBe(401);
    expect((await browser('DELETE', `/v1/users/${bobId}`, cookie)).status).toBe(404);

    const withdrawn = (await browser('POST', '/v1/invites', cookie, { email: at('carol') })).body as { id: string; url: string };
    expect((await browser('DELETE', `/v1/invites/${withdrawn.id}`, cookie)).body).toEqual({ success: true });
    expect((await browser('POST', '/v1/invites/accept', undefined, { token: withdrawn.url.split('#token=')[1], password: PASSWORD })).status).toBe(400);
  });
});
