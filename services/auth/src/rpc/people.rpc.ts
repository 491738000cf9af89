import {
  InvalidArgumentError, NotFoundError, PermissionDeniedError, UnauthenticatedError, newId, type UnaryHandlers,
} from '@mailfleet/kit';
import type { authV1 } from '@mailfleet/proto';
import { loginWindow, LOGIN_LIMITS } from '../domain/login-attempts.js';
import { hashPassword, looksLikeEmail, normalizeEmail, passwordProblem, verifyPassword } from '../domain/passwords.js';
import {
  generateSessionToken, hashSessionToken, looksLikeSessionToken, sessionExpiresAt, sessionLive, sessionNeedsTouch,
} from '../domain/sessions.js';
import type { CountersRepository } from '../repositories/counters.repository.js';
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
  /** The team's rate limits in force (shared with Admit). */
  readonly limitsInForce: (t: TeamRecord) => Record<string, number>;
  readonly now: () => Date;
}

type PeopleHandlers = Pick<UnaryHandlers<authV1.AuthServiceServer>, 'createUser' | 'login' | 'authenticateSession' | 'switchSessionTeam' | 'revokeSession'>;

const INVALID_LOGIN = 'Invalid email or password';
const INVALID_SESSION = 'Session expired or signed out';
// Checked when the email is unknown, so an unknown email costs as long as a wrong password.
const DUMMY_HASH = hashPassword('not a real password, only for timing');

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
      const window = loginWindow(at);
      const keys = [`email:${emailKey}:${window.start}`, ...(req.clientIp ? [`ip:${req.clientIp}:${window.start}`] : [])];
      const counts = await deps.loginAttempts.readMany(keys);
      const limited = (counts.get(keys[0]!) ?? 0) >= LOGIN_LIMITS.perEmail || (keys[1] !== undefined && (counts.get(keys[1]) ?? 0) >= LOGIN_LIMITS.perIp);
      if (limited) return { token: '', rateLimited: true, retryAfterSeconds: window.retryAfterSeconds };

      const user = emailKey ? await users.findByEmail(emailKey) : undefined;
      const ok = await verifyPassword(req.password, user?.passwordHash ?? (await DUMMY_HASH));
      if (!user || !ok) {
        await deps.loginAttempts.add(keys.map((key) => ({ key, amount: 1, expiresAt: window.expiresAt })));
        throw new UnauthenticatedError(INVALID_LOGIN);
      }
      const memberOf = await teams.listTeamsOfUser(user.id);
      const first = memberOf[0];
      if (!first) throw new PermissionDeniedError('You are not a member of any team; ask for an invite');
      const token = generateSessionToken();
      const s = await sessions.create({ id: newId('ses'), tokenHash: hashSessionToken(token), userId: user.id, teamId: first.id, now: at });
      const { session } = await describe(s, at);
      return { token, session, rateLimited: false, retryAfterSeconds: 0 };
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
  };
}
