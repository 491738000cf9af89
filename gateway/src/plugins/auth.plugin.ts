import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { GatewayError, type RateLimitFamilyName } from './errors.plugin.js';

export type Permission = 'FULL' | 'SENDING';

/** Who is calling: resolved from the bearer key by the auth service. */
export interface Principal {
  readonly teamId: string;
  readonly keyId: string;
  readonly userId: string;
  readonly permission: Permission;
  /** Set for a domain-restricted key. */
  readonly domainId?: string | undefined;
  /** The team's rate limits in force when auth admitted the key (per family, units per minute). */
  readonly rateLimits?: Readonly<Partial<Record<RateLimitFamilyName, number>>> | undefined;
}

/** Resolves a bearer token; rejects with an UNAUTHENTICATED gRPC error (or GatewayError 401) when it is not a live key. */
export type Authenticator = (token: string) => Promise<Principal>;

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
}

/** The principal of an authenticated route; routes behind the auth hook always have one. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new GatewayError(401, 'Missing API key');
  return request.principal;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * Bearer authentication for every route not marked `config.public`. Missing
 * or malformed header and unknown or revoked keys are 401 in the route's
 * error form; an unreachable auth service is 503, never a silent pass.
 */
export const authPlugin = fp(async (app: FastifyInstance, opts: { authenticate: Authenticator; onAuthenticated?: (p: Principal) => void }) => {
  app.decorateRequest('principal', undefined);
  app.addHook('onRequest', async (request) => {
    if (request.routeOptions.config?.public || !request.routeOptions.url) return;
    const header = request.headers.authorization;
    if (!header) throw new GatewayError(401, 'Missing API key: send Authorization: Bearer <API_KEY>');
    const m = BEARER.exec(header);
    if (!m?.[1]) throw new GatewayError(401, 'Malformed Authorization header: expected Bearer <API_KEY>');
    const principal = await opts.authenticate(m[1]);
    request.principal = principal;
    opts.onAuthenticated?.(principal);
    if (principal.permission === 'SENDING' && !request.routeOptions.config?.allowSendingKeys) {
      throw new GatewayError(403, 'This API key has SENDING permission: it may only send emails (POST /v1/emails and POST /v1/emails/batch)', 'FORBIDDEN');
    }
  });
}, { name: 'auth', dependencies: ['errors'] });
