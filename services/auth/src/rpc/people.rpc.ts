import {
  InvalidArgumentError, NotFoundError, PermissionDeniedError, UnauthenticatedError, newId, type UnaryHandlers,
} from '@mailfleet/kit';
import type { authV1 } from '@mailfleet/proto';
import { generateInviteToken, INVITE_TTL_MS, inviteUsable, looksLikeInviteToken } from '../domain/invites.js';
import { loginWindow, LOGIN_LIMITS } from '../domain/login-attempts.js';
import { hashPassword, looksLikeEmail, normalizeEmail, passwordProblem, verifyPassword } from '../domain/passwords.js';
import {
  generateSessionToken, hashSessionToken, looksLikeSessionToken, sessionExpiresAt, sessionLive, sessionNeedsTouch,
} from '../domain/sessions.js';
import type { CountersRepository } from '../repositories/counters.repository.js';
import type { InviteRecord, InvitesRepository } from '../repositories/invites.repository.js';
import type { SessionRecord, SessionsRepository } from '../repositories/sessions.repository.js';
import type { TeamRecord, TeamsRepository } from '../repositories/teams.repository.js';
import type { UserRecord, UsersRepository } from '../repositories/users.repository.js';
import { teamToProto } from './mapping.js';

export interface PeopleRpcDeps {
  readonly teams: TeamsRepository;
  readonly users: UsersRepository;
  readonly sessions: SessionsRepository;
  /** Failed sign-in attempts per email and per client IP. */
  readonly loginAttempts: CountersRepository;
  readonly invites: InvitesRepository;
  /** The team's rate limits in force (shared with Admit). */
  readonly limitsInForce: (t: TeamRecord) => Record<string, number>;
  readonly now: () => Date;
}

type PeopleHandlers = Pick<UnaryHandlers<authV1.AuthServiceServer>,
  'createUser' | 'login' | 'authenticateSession' | 'switchSessionTeam' | 'revokeSession' | 'listTeamUsers' | 'removeTeamMember'
  | 'createInvite' | 'listInvites' | 'deleteInvite' | 'acceptInvite'>;

const INVALID_LOGIN = 'Invalid email or password';
const INVALID_SESSION = 'Session expired or signed out';
// Checked when the email is unknown, so an unknown email costs as long as a wrong password.
const DUMMY_HASH = hashPassword('not a real password, only for timing');

export function inviteToProto(i: InviteRecord): authV1.Invite {
  return {
    id: i.id, teamId: i.teamId, email: i.email, createdAt: i.createdAt, expiresAt: i.expiresAt, acceptedAt: i.acceptedAt, invitedByUserId: i.invitedByUserId,
  };
}

export function userToProto(u: UserRecord): authV1.User {
  return { id: u.id, email: u.email, name: u.name, createdAt: u.createdAt };
}

export function createPeopleHandlers(deps: PeopleRpcDeps): PeopleHandlers {
  const { teams, users, sessions, now } = deps;

  /** The session's view, or UNAUTHENTICATED when it is not live or its user left its team. */
  async function describe(s: SessionRecord, at: Date): Promise<authV1.AuthenticateSessionResponse> {
    if (!sessionLive(s, at)) throw new UnauthenticatedError(INVALID_SESSION);
    const [user, memberOf] = await Promise.all([users.get(s.userId), teams.listTeamsOfUser(s.userId)]);
    const current = memberOf.find((t) => t.id === s.teamId);
    if (!user || !current) throw new UnauthenticatedError(INVALID_SESSION);
    return {
      session: {
        sessionId: s.id, user: userToProto(user), team: teamToProto(current), teams: memberOf.map(teamToProto), expiresAt: sessionExpiresAt(s),
      },
      rateLimits: deps.limitsInForce(current),
    };
  }

  /** The counters of failed attempts a sign-in is charged to; `limited` when either is at its limit. */
  async function attemptsOf(emailKey: string, clientIp: string, at: Date) {
    const window = loginWindow(at);
    const emailCounter = `email:${emailKey}:${window.start}`;
    const ipCounter = clientIp ? `ip:${clientIp}:${window.start}` : undefined;
    const keys = ipCounter ? [emailCounter, ipCounter] : [emailCounter];
    const counts = await deps.loginAttempts.readMany(keys);
    const limited = (counts.get(emailCounter) ?? 0) >= LOGIN_LIMITS.perEmail || (ipCounter !== undefined && (counts.get(ipCounter) ?? 0) >= LOGIN_LIMITS.perIp);
    return {
      limited,
      retryAfterSeconds: window.retryAfterSeconds,
      fail: async (): Promise<never> => {
        await deps.loginAttempts.add(keys.map((key) => ({ key, amount: 1, expiresAt: window.expiresAt })));
        throw new UnauthenticatedError(INVALID_LOGIN);
      },
    };
  }

  async function openSession(userId: string, teamId: string, at: Date): Promise<authV1.LoginResponse> {
    const token = generateSessionToken();
    const s = await sessions.create({ id: newId('ses'), tokenHash: hashSessionToken(token), userId, teamId, now: at });
    const { session } = await describe(s, at);
    return { token, session, rateLimited: false, retryAfterSeconds: 0 };
  }

  function requireTeam(teamId: string): string {
    if (!teamId) throw new InvalidArgumentError('team_id is required');
    return teamId;
  }

  async function sessionOf(token: string): Promise<SessionRecord> {
    if (!looksLikeSessionToken(token)) throw new UnauthenticatedError(INVALID_SESSION);
    const s = await sessions.findByHash(hashSessionToken(token));
    if (!s) throw new UnauthenticatedError(INVALID_SESSION);
    return s;
  }

  return {
    async createUser(req) {
      if (!looksLikeEmail(req.email)) throw new InvalidArgumentError('email must be an email address');
      const problem = passwordProblem(req.password);
      if (problem) throw new InvalidArgumentError(problem);
      const name = req.name?.trim() || undefined;
      if (name && name.length > 100) throw new InvalidArgumentError('name must be at most 100 characters');
      if (!req.teamId || !(await teams.getTeam(req.teamId))) throw new NotFoundError('Team not found');
      const emailKey = normalizeEmail(req.email);
      const created = await users.create({ email: req.email.trim(), emailKey, name, passwordHash: await hashPassword(req.password), now: now() });
      const user = created === 'exists' ? await users.findByEmail(emailKey) : created;
      if (!user) throw new NotFoundError('User not found');
      if (!(await teams.addMember(req.teamId, user.id, now()))) throw new NotFoundError('Team not found');
      return { user: userToProto(user), created: created !== 'exists' };
    },

    async login(req) {
      const at = now();
      const emailKey = normalizeEmail(req.email);
      const attempts = await attemptsOf(emailKey, req.clientIp, at);
      if (attempts.limited) return { token: '', rateLimited: true, retryAfterSeconds: attempts.retryAfterSeconds };

      const user = emailKey ? await users.findByEmail(emailKey) : undefined;
      const ok = await verifyPassword(req.password, user?.passwordHash ?? (await DUMMY_HASH));
      if (!user || !ok) return attempts.fail();
      const memberOf = await teams.listTeamsOfUser(user.id);
      const first = memberOf[0];
      if (!first) throw new PermissionDeniedError('You are not a member of any team; ask for an invite');
      return openSession(user.id, first.id, at);
    },

    async authenticateSession(req) {
      const s = await sessionOf(req.token);
      const at = now();
      const view = await describe(s, at);
      if (sessionNeedsTouch(s, at)) {
        await sessions.touch(s.id, at);
        view.session!.expiresAt = sessionExpiresAt({ ...s, lastSeenAt: at });
      }
      return view;
    },

    async switchSessionTeam(req) {
      const s = await sessionOf(req.token);
      const at = now();
      if (!sessionLive(s, at)) throw new UnauthenticatedError(INVALID_SESSION);
      if (!req.teamId) throw new InvalidArgumentError('team_id is required');
      const memberOf = await teams.listTeamsOfUser(s.userId);
      if (!memberOf.some((t) => t.id === req.teamId)) throw new NotFoundError('Team not found');
      if (!(await sessions.setTeam(s.id, s.userId, req.teamId))) throw new UnauthenticatedError(INVALID_SESSION);
      return describe({ ...s, teamId: req.teamId }, at);
    },

    async revokeSession(req) {
      if (looksLikeSessionToken(req.token)) await sessions.revoke(hashSessionToken(req.token), now());
      return {};
    },

    async listTeamUsers(req) {
      const t = await teams.getTeam(req.teamId);
      if (!t) throw new NotFoundError('Team not found');
      const byId = new Map((await users.getMany(t.memberIds)).map((u) => [u.id, u]));
      // People only: the owner a `team create` made for its API keys has no email and cannot sign in.
      const people = t.memberIds.map((id) => byId.get(id)).filter((u): u is UserRecord => u !== undefined && u.email !== '');
      return { users: people.sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.id.localeCompare(b.id)).map(userToProto) };
    },

    async removeTeamMember(req) {
      if (!req.teamId || !req.userId) throw new InvalidArgumentError('team_id and user_id are required');
      if (req.userId === req.callerUserId) throw new InvalidArgumentError('You cannot remove yourself from the team');
      const at = now();
      if (!(await teams.removeMember(req.teamId, req.userId, at))) throw new NotFoundError('User not found in this team');
      // AuthenticateSession already refuses a session whose user left its team; revoking says so in the data too.
      await sessions.revokeForUserTeam(req.userId, req.teamId, at);
      return {};
    },

    async createInvite(req) {
      if (!looksLikeEmail(req.email)) throw new InvalidArgumentError('email must be an email address');
      if (!req.teamId || !(await teams.getTeam(req.teamId))) throw new NotFoundError('Team not found');
      const at = now();
      const token = generateInviteToken();
      const invite = await deps.invites.create({
        id: newId('inv'), teamId: req.teamId, email: req.email.trim(), emailKey: normalizeEmail(req.email), tokenHash: hashSessionToken(token),
        invitedByUserId: req.invitedByUserId, createdAt: at, expiresAt: new Date(at.getTime() + INVITE_TTL_MS),
      });
      return { invite: inviteToProto(invite), token };
    },

    async listInvites(req) {
      return { invites: (await deps.invites.list(requireTeam(req.teamId))).map(inviteToProto) };
    },

    async deleteInvite(req) {
      if (!(await deps.invites.delete(requireTeam(req.teamId), req.inviteId, now()))) throw new NotFoundError('Invite not found');
      return {};
    },

    async acceptInvite(req) {
      const at = now();
      const invite = looksLikeInviteToken(req.token) ? await deps.invites.findByHash(hashSessionToken(req.token)) : undefined;
      if (!invite || !inviteUsable(invite, at)) throw new InvalidArgumentError('This invite link is unknown, already used or expired; ask for a new one');
      const existing = await users.findByEmail(invite.emailKey);
      let user: UserRecord;
      if (existing) {
        // An existing person proves who they are; wrong passwords count as failed sign-ins.
        const attempts = await attemptsOf(invite.emailKey, req.clientIp, at);
        if (attempts.limited) return { token: '', rateLimited: true, retryAfterSeconds: attempts.retryAfterSeconds };
        if (!(await verifyPassword(req.password, existing.passwordHash))) return attempts.fail();
        user = existing;
      } else {
        const problem = passwordProblem(req.password);
        if (problem) throw new InvalidArgumentError(problem);
        const name = req.name?.trim() || undefined;
        if (name && name.length > 100) throw new InvalidArgumentError('name must be at most 100 characters');
        const created = await users.create({ email: invite.email, emailKey: invite.emailKey, name, passwordHash: await hashPassword(req.password), now: at });
        if (created === 'exists') throw new InvalidArgumentError('A user with this email was created meanwhile; sign in and open the invite link again');
        user = created;
      }
      // Membership first, then the invite is marked used (once: the conditional update settles two tabs
      // accepting the same link). A crash in between leaves the invite usable, never used without a membership.
      if (!(await teams.addMember(invite.teamId, user.id, at))) throw new NotFoundError('Team not found');
      if (!(await deps.invites.accept(invite.id, at))) throw new InvalidArgumentError('This invite link is unknown, already used or expired; ask for a new one');
      return openSession(user.id, invite.teamId, at);
    },
  };
}
