import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { runWithRequestContext, sanitizeRequestId, type Logger } from '@mailfleet/kit';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type RouteHandlerMethod } from 'fastify';
import type { Registry } from 'prom-client';
import { consolePlugin } from './plugins/console.plugin.js';
import { authPlugin, type Authenticator, type Principal, type SessionAuthenticator } from './plugins/auth.plugin.js';
import { errorsPlugin } from './plugins/errors.plugin.js';
import { metricsPlugin } from './plugins/metrics.plugin.js';
import { rateLimitPlugin, type RateLimitCheck } from './plugins/rate-limit.plugin.js';
import { systemRoutes, type SystemInfo } from './routes/v1/system/system.routes.js';

export interface AppDeps {
  readonly logger: Logger;
  readonly registry: Registry;
  readonly authenticate: Authenticator;
  /** Accepts the console's session cookie when set. */
  readonly authenticateSession?: SessionAuthenticator;
  /** PUBLIC_URL: the origin the CSRF rule accepts and whether the cookie is Secure (empty: the request's own). */
  readonly publicUrl?: string;
  /** Called for every authenticated request (lastUsed coalescing). */
  readonly onAuthenticated?: (p: Principal) => void;
  /** Shared per-team rate limits; when absent no limits are applied (unit tests of routing). */
  readonly rateLimitCheck?: RateLimitCheck;
  readonly info: SystemInfo;
  /** Area routes mounted under /v1 (and /api/v1); each issue adds its own. */
  readonly areas?: readonly ((app: FastifyInstance) => Promise<void>)[];
  readonly trustProxy?: boolean;
  readonly bodyLimitBytes?: number;
  /** The built web console (gateway/console/dist), served at `/`; absent: API only. */
  readonly consoleDir?: string;
}

/** Every /v1 route is also served under /api/v1, so useSend/Unsend SDK clients work unchanged. */
export const API_PREFIXES = ['/v1', '/api/v1'] as const;

/**
 * The gateway as a fastify instance without listening: tests import it and
 * use app.inject; server.ts listens and handles signals.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    requestIdHeader: false,
    genReqId: (req) => sanitizeRequestId(req.headers['x-request-id']) ?? randomUUID(),
    bodyLimit: deps.bodyLimitBytes ?? 20 * 1024 * 1024,
    // Path params hold addresses (/v1/suppressions/email/{email}): 254 characters, up to 12 each once percent-encoded.
    routerOptions: { maxParamLength: 254 * 12 },
    trustProxy: deps.trustProxy ?? false,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true, allErrors: true } },
  });

  // Each handler runs in a request context so outbound gRPC calls carry the request id.
  app.addHook('onRoute', (route) => {
    const original = route.handler as RouteHandlerMethod;
    route.handler = function wrapped(request, reply) {
      return runWithRequestContext({ requestId: request.id, log: request.log as Logger }, () => original.call(this, request, reply));
    };
    if (route.url.startsWith('/api/')) route.schema = { ...(route.schema ?? {}), hide: true };
    if (route.url.startsWith('/docs')) route.config = { ...(route.config ?? {}), public: true };
  });
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  await app.register(errorsPlugin);
  await app.register(metricsPlugin, { registry: deps.registry });
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'mailfleet API',
        version: deps.info.version,
        description: 'Transactional and campaign email: send, domains, contacts, campaigns, suppressions, analytics and signed webhooks.',
      },
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'API key' },
          cookieAuth: { type: 'apiKey', in: 'cookie', name: 'mf_session', description: 'the console\'s session (POST /v1/session); state-changing requests need the gateway\'s own Origin' },
        },
      },
      security: [{ bearerAuth: [] }, { cookieAuth: [] }],
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { docExpansion: 'list' } });
  await app.register(authPlugin, {
    authenticate: deps.authenticate, onAuthenticated: deps.onAuthenticated, authenticateSession: deps.authenticateSession, publicUrl: deps.publicUrl,
  });
  if (deps.rateLimitCheck) await app.register(rateLimitPlugin, { check: deps.rateLimitCheck });

  for (const prefix of API_PREFIXES) {
    await app.register(async (v1) => {
      await v1.register(systemRoutes, { info: deps.info });
      for (const area of deps.areas ?? []) await v1.register(area);
    }, { prefix });
  }

  if (deps.consoleDir) await app.register(consolePlugin, { dir: deps.consoleDir });

  app.get('/v1/openapi.json', { schema: { hide: true }, config: { public: true } }, async () => app.swagger());
  // swagger-ui's own routes are public.
  return app;
}
