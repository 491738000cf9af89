import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { GatewayError, type RateLimitFamilyName } from './errors.plugin.js';

export type Permission = 'FULL' | 'SENDING';

/** A signed-in person's session as the console sees it (the contract's `Session`). */
export interface SessionView {
  readonly id: string;
  readonly user: { readonly id: string; readonly email: string; readonly name: string | null };
  readonly team: { readonly id: string; readonly name: string };
  readonly teams: readonly { readonly id: string; readonly name: string }[];
  readonly expiresAt: string;
}

/** Who is calling: resolved from the bearer key, or from the session cookie, by the auth service. */
export interface Principal {
  readonly teamId: string;
  /** The API key's id; empty for a session. */
  readonly keyId: string;
  readonly userId: string;
  readonly permission: Permission;
  /** Set for a domain-restricted key. */
  readonly domainId?: string | undefined;
  /** The team's rate limits in force when auth admitted the key (per family, units per minute). */
  readonly rateLimits?: Readonly<Partial<Record<RateLimitFamilyName, number>>> | undefined;
  /** Set when the request was authenticated by the session cookie. */
  readonly session?: SessionView | undefined;
}

/** Resolves a bearer token; rejects with an UNAUTHENTICATED gRPC error (or GatewayError 401) when it is not a live key. */
export type Authenticator = (token: string) => Promise<Principal>;
/** Resolves a session token from the cookie; rejects with UNAUTHENTICATED when it is not a live session. */
export type SessionAuthenticator = (token: string) => Promise<Principal & { session: SessionView }>;

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
  interface FastifyContextConfig {
    /** A public state-changing route a browser calls (sign-in, invite acceptance): the Origin rule applies to it too. */
    originCheck?: boolean;
  }
}

export const SESSION_COOKIE = 'mf_session';

/** The principal of an authenticated route; routes behind the auth hook always have one. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new GatewayError(401, 'Missing API key');
  return request.principal;
}

/** One cookie's value from a Cookie header, or undefined. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    return value.length > 0 ? value : undefined;
  }
  return undefined;
}

export interface CookieOptions {
  /** `PUBLIC_URL` when set: its scheme decides `Secure` and its origin is the one the Origin rule accepts. */
  readonly publicUrl?: string | undefined;
}

/** Whether the browser reached the gateway over HTTPS (directly, through a trusted proxy, or as PUBLIC_URL says). */
export function isHttps(request: Pick<FastifyRequest, 'protocol'>, opts: CookieOptions): boolean {
  return request.protocol === 'https' || (opts.publicUrl?.startsWith('https:') ?? false);
}

/** The Set-Cookie value of a session: HttpOnly, SameSite=Strict, Path=/, Secure over HTTPS; maxAgeSeconds 0 clears it. */
export function sessionCookie(token: string, maxAgeSeconds: number, secure: boolean): string {
  const parts = [`${SESSION_COOKIE}=${token}`, 'Path=/', 'HttpOnly', 'SameSite=Strict', `Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}`];
  if (secure) parts.push('Secure');
  return parts.join('; ');
}

/**
 * The cookie lives as long as the session can (7 days from sign-in): the browser must keep it while the
 * console is used, and auth ends the session earlier when it is idle for 12 h or signed out.
 */
export const SESSION_COOKIE_MAX_AGE_S = 7 * 86_400;

export function setSessionCookie(request: FastifyRequest, reply: FastifyReply, opts: CookieOptions, token: string): void {
  reply.header('set-cookie', sessionCookie(token, SESSION_COOKIE_MAX_AGE_S, isHttps(request, opts)));
}

export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply, opts: CookieOptions): void {
  reply.header('set-cookie', sessionCookie('', 0, isHttps(request, opts)));
}

/** The gateway's own origin: PUBLIC_URL's when set, else the request's scheme://host. */
export function ownOrigin(request: Pick<FastifyRequest, 'protocol' | 'host'>, publicUrl: string | undefined): string {
  if (publicUrl) return new URL(publicUrl).origin;
  return `${request.protocol}://${request.host}`.toLowerCase();
}

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The CSRF rule: a state-changing request a browser makes on the strength of
 * the cookie must come from the gateway's own origin. A missing Origin is
 * refused too (every browser sends one on such requests). Safe methods are not
 * checked.
 */
export function originAllowed(method: string, origin: string | undefined, expected: string): boolean {
  if (!STATE_CHANGING.has(method.toUpperCase())) return true;
  return origin !== undefined && origin.toLowerCase() === expected.toLowerCase();
}

export function assertSameOrigin(request: FastifyRequest, publicUrl: string | undefined): void {
  if (!originAllowed(request.method, request.headers.origin, ownOrigin(request, publicUrl))) {
    throw new GatewayError(403, 'Cross-origin request refused', 'FORBIDDEN');
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

export interface AuthPluginOptions {
  readonly authenticate: Authenticator;
  readonly onAuthenticated?: ((p: Principal) => void) | undefined;
  /** Accepts the console's session cookie when set (every request asks auth: revocation is immediate). */
  readonly authenticateSession?: SessionAuthenticator | undefined;
  readonly publicUrl?: string | undefined;
}

/**
 * Authentication for every route not marked `config.public`: the bearer API
 * key, or else the session cookie. A missing or malformed header, an unknown
 * or revoked key or session are 401 in the route's error form; an unreachable
 * auth service is 503, never a silent pass. Requests authenticated by the
 * cookie (and public routes marked `originCheck`) must pass the Origin rule
 * when they change state; bearer requests are not checked (a browser never
 * attaches a key on its own).
 */
export const authPlugin = fp(async (app: FastifyInstance, opts: AuthPluginOptions) => {
  app.decorateRequest('principal', undefined);
  app.addHook('onRequest', async (request) => {
    const config = request.routeOptions.config;
    if (config?.originCheck) assertSameOrigin(request, opts.publicUrl);
    if (config?.public || !request.routeOptions.url) return;
    const header = request.headers.authorization;
    if (!header) {
      const token = opts.authenticateSession ? readCookie(request.headers.cookie, SESSION_COOKIE) : undefined;
      if (!token || !opts.authenticateSession) throw new GatewayError(401, 'Missing API key: send Authorization: Bearer <API_KEY>');
      assertSameOrigin(request, opts.publicUrl);
      request.principal = await opts.authenticateSession(token);
      return;
    }
    const m = BEARER.exec(header);
    if (!m?.[1]) throw new GatewayError(401, 'Malformed Authorization header: expected Bearer <API_KEY>');
    const principal = await opts.authenticate(m[1]);
    request.principal = principal;
    opts.onAuthenticated?.(principal);
    if (principal.permission === 'SENDING' && !config?.allowSendingKeys) {
      throw new GatewayError(403, 'This API key has SENDING permission: it may only send emails (POST /v1/emails and POST /v1/emails/batch)', 'FORBIDDEN');
    }
  });
}, { name: 'auth', dependencies: ['errors'] });
