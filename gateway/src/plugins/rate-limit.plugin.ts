import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Principal } from './auth.plugin.js';
import type { RateLimitFamilyName } from './errors.plugin.js';

export interface RateLimitVerdict {
  allowed: boolean;
  limit: number;
  remaining: number;
  resetSeconds: number;
}

export type RateLimitCheck = (principal: Principal, family: RateLimitFamilyName, cost: number) => Promise<RateLimitVerdict> | RateLimitVerdict;

/**
 * Per-team, per-family budgets (SPEC section 8) shared by every gateway
 * replica: the check counts locally and the counts are folded into auth's
 * shared windows every sync interval (clients/rate-limiter.ts, which states
 * the bound on what replicas together may admit). Runs after body validation
 * because a batch costs one unit per email. Every authenticated response
 * carries RateLimit-* headers; a refusal is 429 with Retry-After. If the check
 * itself cannot be made the request proceeds (logged): a limiter outage must
 * not take sending down.
 */
export const rateLimitPlugin = fp(async (app: FastifyInstance, opts: { check: RateLimitCheck }) => {
  app.addHook('preHandler', async (request, reply) => {
    const config = request.routeOptions.config;
    if (config?.public || !request.principal) return;
    const family = config?.rateLimit?.family ?? 'DEFAULT';
    const cost = Math.max(1, config?.rateLimit?.cost?.(request) ?? 1);
    let verdict: RateLimitVerdict;
    try {
      verdict = await opts.check(request.principal, family, cost);
    } catch (err) {
      request.log.warn({ err, family }, 'rate limit check failed; letting the request through');
      return;
    }
    reply.header('RateLimit-Limit', String(verdict.limit));
    reply.header('RateLimit-Remaining', String(verdict.remaining));
    reply.header('RateLimit-Reset', String(verdict.resetSeconds));
    if (!verdict.allowed) {
      reply.header('Retry-After', String(verdict.resetSeconds));
      await reply.code(429).send({
        code: 'RATE_LIMITED',
        message: `Rate limit exceeded: ${verdict.limit} ${family === 'BATCH_EMAIL' ? 'emails' : 'requests'} per minute for this endpoint; retry in ${verdict.resetSeconds}s`,
      });
      return reply;
    }
  });
}, { name: 'rate-limit', dependencies: ['auth'] });
