import { status, type ServiceError } from '@grpc/grpc-js';
import { createGrpcClient, createLogger, startService, type RunningService, type UpstreamClient } from '@mailfleet/kit';
import { authV1 } from '@mailfleet/proto';
import { testMongoUrl, testNatsUrl, uniqueDbName } from '@mailfleet/testkit';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/mailfleet.js';
import { loadAuthConfig } from '../../src/config.js';
import { LOGIN_WINDOW_MS } from '../../src/domain/login-attempts.js';
import { hashSessionToken } from '../../src/domain/sessions.js';
import { createInvitesRepository } from '../../src/repositories/invites.repository.js';
import { createSessionsRepository } from '../../src/repositories/sessions.repository.js';
import { createAuthServer } from '../../src/server.js';

// People who sign in: users, memberships, sessions and failed-attempt counting, on real FerretDB and NATS.

const logger = createLogger({ service: 'auth-people-test', level: 'silent' });
const dbName = uniqueDbName('auth_people');
let svc: RunningService;
let auth: UpstreamClient<authV1.AuthServiceClient>;

beforeAll(async () => {
  const config = loadAuthConfig({
    GRPC_PORT: '0', METRICS_PORT: '0', GRPC_HOST: '127.0.0.1', MONGO_URL: testMongoUrl(), MONGO_DB: dbName, NATS_URL: testNatsUrl(),
    API_KEY_HASH_SECRET: 'integration-test-secret-0123456789abcdef', LOG_LEVEL: 'silent',
  });
  svc = await startService({ name: 'auth', config, env: {}, logger, build: (infra) => createAuthServer({ config, infra }) });
  auth = createGrpcClient({ name: 'auth', address: `127.0.0.1:${svc.grpc.port}`, ctor: authV1.AuthServiceClient, logger });
});
afterAll(async () => {
  auth?.close();
  await svc?.infra.mongo.db.dropDatabase();
  await svc?.shutdown('test over');
});

const code = (p: Promise<unknown>) => p.then(() => 'OK', (e: ServiceError) => status[e.code]);
const PASSWORD = 'a long enough password';
let seq = 0;
const uniqueEmail = (local: string) => `${local}.${Date.now().toString(36)}.${seq++}@Example.com`;

async function newTeam(name: string) {
  const { team } = await auth.call.createTeam({ name, plan: authV1.Plan.PLAN_UNSPECIFIED });
  return team!;
}

describe('users', () => {
  it('creates a user in a team with a unique, case-insensitive email and stores only a hash of the password', async () => {
    const team = await newTeam('People');
    const email = uniqueEmail('Ann');
    const { user, created } = await auth.call.createUser({ email, password: PASSWORD, name: 'Ann', teamId: team.id });
    expect(created).toBe(true);
    expect(user).toMatchObject({ email, name: 'Ann' });
    expect(user!.id).toMatch(/^usr_/);
    const stored = await svc.infra.mongo.db.collection('users').findOne({ _id: user!.id as never });
    expect(stored?.passwordHash).toMatch(/^scrypt\$/);
    expect(JSON.stringify(stored)).not.toContain(PASSWORD);
    expect((await auth.call.listTeams({ userId: user!.id })).teams.map((t) => t.id)).toEqual([team.id]);

    // The same email in other case: no second user; the existing one joins the other team, password unchanged.
    const other = await newTeam('People Two');
    const again = await auth.call.createUser({ email: email.toUpperCase(), password: 'another password 123', teamId: other.id });
    expect(again.created).toBe(false);
    expect(again.user!.id).toBe(user!.id);
    expect((await auth.call.listTeams({ userId: user!.id })).teams.map((t) => t.id)).toEqual([team.id, other.id]);
    expect(await code(auth.call.login({ email, password: 'another password 123', clientIp: '10.0.0.1' }))).toBe('UNAUTHENTICATED');
    expect((await auth.call.login({ email, password: PASSWORD, clientIp: '10.0.0.1' })).session?.user?.id).toBe(user!.id);
  });

  it('refuses bad input and unknown teams', async () => {
    const team = await newTeam('Refusals');
    expect(await code(auth.call.createUser({ email: 'nope', password: PASSWORD, teamId: team.id }))).toBe('INVALID_ARGUMENT');
    expect(await code(auth.call.createUser({ email: uniqueEmail('short'), password: 'short', teamId: team.id }))).toBe('INVALID_ARGUMENT');
    expect(await code(auth.call.createUser({ email: uniqueEmail('lost'), password: PASSWORD, teamId: 'team_missing' }))).toBe('NOT_FOUND');
  });
});

describe('sessions', () => {
  it('signs in, resolves the session with its teams and limits, switches team, signs out at once', async () => {
    const first = await newTeam('Session One');
    const second = await newTeam('Session Two');
    const foreign = await newTeam('Session Foreign');
    const email = uniqueEmail('bob');
    const { user } = await auth.call.createUser({ email, password: PASSWORD, teamId: first.id });
    await auth.call.createUser({ email, password: PASSWORD, teamId: second.id });

    expect(await code(auth.call.login({ email, password: 'wrong password!', clientIp: '10.0.0.2' }))).toBe('UNAUTHENTICATED');
    expect(await code(auth.call.login({ email: uniqueEmail('nobody'), password: PASSWORD, clientIp: '10.0.0.2' }))).toBe('UNAUTHENTICATED');
    const login = await auth.call.login({ email: email.toLowerCase(), password: PASSWORD, clientIp: '10.0.0.2' });
    expect(login.token).toMatch(/^mfs_/);
    expect(login.session).toMatchObject({ user: { id: user!.id, email }, team: { id: first.id } });
    expect(login.session!.teams.map((t) => t.id)).toEqual([first.id, second.id]);
    const stored = await svc.infra.mongo.db.collection('sessions').findOne({ userId: user!.id });
    expect(stored?.tokenHash).toBe(hashSessionToken(login.token));
    expect(JSON.stringify(stored)).not.toContain(login.token);

    const resolved = await auth.call.authenticateSession({ token: login.token });
    expect(resolved.session?.team?.id).toBe(first.id);
    expect(resolved.rateLimits.SEND_EMAIL).toBeGreaterThan(0);
    const expiresIn = resolved.session!.expiresAt!.getTime() - Date.now();
    expect(expiresIn).toBeGreaterThan(11 * 3_600_000);
    expect(expiresIn).toBeLessThanOrEqual(12 * 3_600_000);

    expect(await code(auth.call.switchSessionTeam({ token: login.token, teamId: foreign.id }))).toBe('NOT_FOUND');
    const switched = await auth.call.switchSessionTeam({ token: login.token, teamId: second.id });
    expect(switched.session?.team?.id).toBe(second.id);
    expect((await auth.call.authenticateSession({ token: login.token })).session?.team?.id).toBe(second.id);

    await auth.call.revokeSession({ token: login.token });
    expect(await code(auth.call.authenticateSession({ token: login.token }))).toBe('UNAUTHENTICATED');
    expect(await code(auth.call.authenticateSession({ token: `mfs_${'x'.repeat(43)}` }))).toBe('UNAUTHENTICATED');
    expect(await code(auth.call.authenticateSession({ token: 'mf_not_a_session' }))).toBe('UNAUTHENTICATED');
  });

  it('refuses a session whose idle or absolute expiry passed, and the sweeper deletes it', async () => {
    const team = await newTeam('Expiry');
    const email = uniqueEmail('eve');
    await auth.call.createUser({ email, password: PASSWORD, teamId: team.id });
    const idle = await auth.call.login({ email, password: PASSWORD, clientIp: '10.0.0.3' });
    const old = await auth.call.login({ email, password: PASSWORD, clientIp: '10.0.0.3' });
    const sessions = svc.infra.mongo.db.collection('sessions');
    const hoursAgo = (h: number) => new Date(Date.now() - h * 3_600_000);
    await sessions.updateOne({ tokenHash: hashSessionToken(idle.token) }, { $set: { lastSeenAt: hoursAgo(12.01) } });
    await sessions.updateOne({ tokenHash: hashSessionToken(old.token) }, { $set: { createdAt: hoursAgo(7 * 24 + 0.01), lastSeenAt: hoursAgo(0.01) } });
    expect(await code(auth.call.authenticateSession({ token: idle.token }))).toBe('UNAUTHENTICATED');
    expect(await code(auth.call.authenticateSession({ token: old.token }))).toBe('UNAUTHENTICATED');
    const live = await auth.call.login({ email, password: PASSWORD, clientIp: '10.0.0.3' });
    await createSessionsRepository(svc.infra.mongo.db).sweep();
    const left = await sessions.find({ tokenHash: { $in: [idle.token, old.token, live.token].map(hashSessionToken) } }).toArray();
    expect(left.map((d) => d['tokenHash'])).toEqual([hashSessionToken(live.token)]);
  });

  it('keeps a used session alive, writing its last use at most once a minute', async () => {
    const team = await newTeam('Idle');
    const email = uniqueEmail('ida');
    await auth.call.createUser({ email, password: PASSWORD, teamId: team.id });
    const { token } = await auth.call.login({ email, password: PASSWORD, clientIp: '10.0.0.4' });
    const sessions = svc.infra.mongo.db.collection('sessions');
    const before = (await sessions.findOne({ tokenHash: hashSessionToken(token) }))!.lastSeenAt as Date;
    await auth.call.authenticateSession({ token });
    expect(((await sessions.findOne({ tokenHash: hashSessionToken(token) }))!.lastSeenAt as Date).getTime()).toBe(before.getTime());
    const elevenHoursAgo = new Date(Date.now() - 11 * 3_600_000);
    await sessions.updateOne({ tokenHash: hashSessionToken(token) }, { $set: { lastSeenAt: elevenHoursAgo } });
    await auth.call.authenticateSession({ token });
    const after = (await sessions.findOne({ tokenHash: hashSessionToken(token) }))!.lastSeenAt as Date;
    expect(Date.now() - after.getTime()).toBeLessThan(60_000);
  });
});

/** Attempts are counted in fixed 15-minute windows: start a burst well inside one, so it cannot straddle two. */
async function awayFromWindowEnd(): Promise<void> {
  const left = LOGIN_WINDOW_MS - (Date.now() % LOGIN_WINDOW_MS);
  if (left < 60_000) await new Promise((r) => setTimeout(r, left + 100));
}

describe('failed sign-in attempts', () => {
  it('are limited per email: past 10 failures no password is checked, with a Retry-After', { timeout: 120_000 }, async () => {
    const team = await newTeam('Guessing');
    const email = uniqueEmail('target');
    await auth.call.createUser({ email, password: PASSWORD, teamId: team.id });
    await awayFromWindowEnd();
    for (let i = 0; i < 10; i++) {
      expect(await code(auth.call.login({ email, password: `guess number ${i}`, clientIp: `10.1.0.${i}` }))).toBe('UNAUTHENTICATED');
    }
    const limited = await auth.call.login({ email, password: PASSWORD, clientIp: '10.1.1.1' });
    expect(limited).toMatchObject({ rateLimited: true, token: '' });
    expect(limited.retryAfterSeconds).toBeGreaterThan(0);
    expect(limited.retryAfterSeconds).toBeLessThanOrEqual(900);
  });

  it('are limited per client IP across emails', { timeout: 120_000 }, async () => {
    await awayFromWindowEnd();
    for (let i = 0; i < 50; i++) {
      expect(await code(auth.call.login({ email: uniqueEmail(`spray${i}`), password: 'whatever it is', clientIp: '10.9.9.9' }))).toBe('UNAUTHENTICATED');
    }
    expect((await auth.call.login({ email: uniqueEmail('spray-last'), password: 'whatever it is', clientIp: '10.9.9.9' })).rateLimited).toBe(true);
    // Another address is not affected.
    expect(await code(auth.call.login({ email: uniqueEmail('spray-other'), password: 'whatever it is', clientIp: '10.9.9.8' }))).toBe('UNAUTHENTICATED');
  });
});

describe('mailfleet user create', () => {
  async function cli(args: string[], stdin = '') {
    const lines: string[] = [];
    const exit = await runCli(args, { AUTH_GRPC_ADDR: `127.0.0.1:${svc.grpc.port}` }, { json: false, print: (t) => lines.push(t) }, Readable.from([stdin]));
    return { exit, out: lines.join('\n') };
  }

  it('creates a user with a generated password shown once, or with one read from stdin', async () => {
    const team = await newTeam('CLI People');
    const email = uniqueEmail('cli');
    const generated = await cli(['user', 'create', '--email', email, '--team', team.id, '--name', 'Cli User', '--json']);
    expect(generated.exit).toBe(0);
    const made = JSON.parse(generated.out) as { userId: string; teamId: string; email: string; created: boolean; password: string };
    expect(made).toMatchObject({ teamId: team.id, email, created: true });
    expect(made.password.length).toBeGreaterThanOrEqual(20);
    expect((await auth.call.login({ email, password: made.password, clientIp: '10.2.0.1' })).session?.user?.name).toBe('Cli User');

    const other = uniqueEmail('stdin');
    const piped = await cli(['user', 'create', '--email', other, '--team', team.id, '--password-stdin'], 'typed password here\n');
    expect(piped.exit).toBe(0);
    expect(piped.out).toContain('created');
    expect(piped.out).not.toContain('typed password here');
    expect((await auth.call.login({ email: other, password: 'typed password here', clientIp: '10.2.0.1' })).session?.team?.id).toBe(team.id);
  });
});

describe('team members', () => {
  it('lists the people of a team and removes one, ending their sessions in that team only', async () => {
    const team = await newTeam('Members');
    const other = await newTeam('Members Elsewhere');
    const ann = (await auth.call.createUser({ email: uniqueEmail('ann'), password: PASSWORD, name: 'Ann', teamId: team.id })).user!;
    const bob = (await auth.call.createUser({ email: uniqueEmail('bob'), password: PASSWORD, teamId: team.id })).user!;
    await auth.call.createUser({ email: bob.email, password: PASSWORD, teamId: other.id });
    // The team's key owner from `team create` has no email: not a person of the list.
    expect((await auth.call.listTeamUsers({ teamId: team.id })).users.map((u) => u.id)).toEqual([ann.id, bob.id]);

    const inTeam = await auth.call.login({ email: bob.email, password: PASSWORD, clientIp: '10.3.0.1' });
    const inOther = await auth.call.login({ email: bob.email, password: PASSWORD, clientIp: '10.3.0.1' });
    await auth.call.switchSessionTeam({ token: inOther.token, teamId: other.id });

    expect(await code(auth.call.removeTeamMember({ teamId: team.id, userId: ann.id, callerUserId: ann.id }))).toBe('INVALID_ARGUMENT');
    await auth.call.removeTeamMember({ teamId: team.id, userId: bob.id, callerUserId: ann.id });
    expect(await code(auth.call.removeTeamMember({ teamId: team.id, userId: bob.id, callerUserId: ann.id }))).toBe('NOT_FOUND');
    expect((await auth.call.listTeamUsers({ teamId: team.id })).users.map((u) => u.id)).toEqual([ann.id]);
    expect(await code(auth.call.authenticateSession({ token: inTeam.token }))).toBe('UNAUTHENTICATED');
    expect((await auth.call.authenticateSession({ token: inOther.token })).session?.team?.id).toBe(other.id);
    expect(await svc.infra.mongo.db.collection('sessions').countDocuments({ userId: bob.id, teamId: team.id, revokedAt: { $exists: true } })).toBe(1);
  });
});

describe('invites', () => {
  it('are shown once, stored hashed, listed, accepted once by a new person who is signed in to the team', async () => {
    const team = await newTeam('Inviting');
    const email = uniqueEmail('newcomer');
    const { invite, token } = await auth.call.createInvite({ teamId: team.id, email, invitedByUserId: 'usr_x' });
    expect(token).toMatch(/^mfi_/);
    expect(invite).toMatchObject({ teamId: team.id, email, acceptedAt: undefined });
    expect(invite!.expiresAt!.getTime() - invite!.createdAt!.getTime()).toBe(7 * 86_400_000);
    const stored = await svc.infra.mongo.db.collection('invites').findOne({ _id: invite!.id as never });
    expect(stored?.tokenHash).toBe(hashSessionToken(token));
    expect(JSON.stringify(stored)).not.toContain(token);
    expect((await auth.call.listInvites({ teamId: team.id })).invites.map((i) => i.id)).toEqual([invite!.id]);
    expect((await auth.call.listInvites({ teamId: (await newTeam('Not Inviting')).id })).invites).toEqual([]);

    expect(await code(auth.call.acceptInvite({ token, password: 'short', clientIp: '10.4.0.1' }))).toBe('INVALID_ARGUMENT');
    const accepted = await auth.call.acceptInvite({ token, password: PASSWORD, name: 'New Comer', clientIp: '10.4.0.1' });
    expect(accepted.session).toMatchObject({ user: { email, name: 'New Comer' }, team: { id: team.id } });
    expect((await auth.call.authenticateSession({ token: accepted.token })).session?.team?.id).toBe(team.id);
    expect(await code(auth.call.acceptInvite({ token, password: PASSWORD, clientIp: '10.4.0.1' }))).toBe('INVALID_ARGUMENT');
    expect((await auth.call.listInvites({ teamId: team.id })).invites[0]?.acceptedAt).toBeInstanceOf(Date);
    expect(await code(auth.call.acceptInvite({ token: `mfi_${'y'.repeat(43)}`, password: PASSWORD, clientIp: '10.4.0.1' }))).toBe('INVALID_ARGUMENT');
  });

  it('add an existing person after checking their password; withdrawn and expired invites do not work', async () => {
    const home = await newTeam('Home');
    const guest = await newTeam('Guest');
    const email = uniqueEmail('existing');
    const { user } = await auth.call.createUser({ email, password: PASSWORD, teamId: home.id });
    const { token } = await auth.call.createInvite({ teamId: guest.id, email: email.toUpperCase(), invitedByUserId: 'usr_x' });
    expect(await code(auth.call.acceptInvite({ token, password: 'not the password', clientIp: '10.5.0.1' }))).toBe('UNAUTHENTICATED');
    const joined = await auth.call.acceptInvite({ token, password: PASSWORD, clientIp: '10.5.0.1' });
    expect(joined.session?.user?.id).toBe(user!.id);
    expect(joined.session?.teams.map((t) => t.id)).toEqual([home.id, guest.id]);

    const withdrawn = await auth.call.createInvite({ teamId: guest.id, email: uniqueEmail('withdrawn'), invitedByUserId: 'usr_x' });
    await auth.call.deleteInvite({ teamId: guest.id, inviteId: withdrawn.invite!.id });
    expect(await code(auth.call.deleteInvite({ teamId: guest.id, inviteId: withdrawn.invite!.id }))).toBe('NOT_FOUND');
    expect(await code(auth.call.deleteInvite({ teamId: home.id, inviteId: withdrawn.invite!.id }))).toBe('NOT_FOUND');
    expect(await code(auth.call.acceptInvite({ token: withdrawn.token, password: PASSWORD, clientIp: '10.5.0.1' }))).toBe('INVALID_ARGUMENT');

    const expired = await auth.call.createInvite({ teamId: guest.id, email: uniqueEmail('late'), invitedByUserId: 'usr_x' });
    await svc.infra.mongo.db.collection('invites').updateOne({ _id: expired.invite!.id as never }, { $set: { expiresAt: new Date(Date.now() - 1000) } });
    expect(await code(auth.call.acceptInvite({ token: expired.token, password: PASSWORD, clientIp: '10.5.0.1' }))).toBe('INVALID_ARGUMENT');
    expect((await auth.call.listInvites({ teamId: guest.id })).invites.map((i) => i.id)).toContain(expired.invite!.id);
    // Kept 30 days past expiry for the list, then swept.
    await svc.infra.mongo.db.collection('invites').updateOne({ _id: expired.invite!.id as never }, { $set: { expiresAt: new Date(Date.now() - 31 * 86_400_000) } });
    await createInvitesRepository(svc.infra.mongo.db).sweep();
    expect((await auth.call.listInvites({ teamId: guest.id })).invites.map((i) => i.id)).not.toContain(expired.invite!.id);
  });
});
