import fs from 'node:fs';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/**
 * Every console response forbids what the SPA never needs: no inline or third-party script, no
 * framing of the console (clickjacking), nothing loaded from elsewhere. Inline styles stay allowed
 * because mail HTML previews (sandboxed srcdoc iframes, which inherit this policy) are styled inline;
 * their remote images are blocked on purpose (no tracking pixel fires from a preview).
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Paths the console never answers: the API, its docs and metrics keep their own 404s. */
const NOT_CONSOLE = /^\/(v1|api|docs|metrics)(\/|$)/;

/**
 * Serves the built console (gateway/console/dist) at `/`, with index.html for every other GET path
 * so the SPA's client-side routes survive a reload. Absent dist (API-only image, tests): logs and
 * serves nothing, the API is unchanged either way.
 */
export async function consolePlugin(app: FastifyInstance, opts: { dir: string }): Promise<void> {
  const index = path.join(opts.dir, 'index.html');
  if (!fs.existsSync(index)) {
    app.log.warn({ dir: opts.dir }, 'console not built: the web console is not served (npm run build -w gateway/console)');
    return;
  }
  await app.register(async (scope) => {
    scope.addHook('onRoute', (route) => {
      route.config = { ...(route.config ?? {}), public: true };
    });
    scope.addHook('onSend', async (request, reply) => {
      reply.header('content-security-policy', CONSOLE_CSP);
      reply.header('x-content-type-options', 'nosniff');
      reply.header('x-frame-options', 'DENY');
      reply.header('referrer-policy', 'same-origin');
    });
    await scope.register(fastifyStatic, {
      root: opts.dir,
      prefix: '/',
      wildcard: false,
      index: false,
      cacheControl: false,
      setHeaders: (res, file) => {
        // Hashed asset names change with their content; index.html must be re-read on each load.
        res.setHeader('cache-control', file.includes(`${path.sep}assets${path.sep}`) ? 'public, max-age=31536000, immutable' : 'no-cache');
      },
    });
    const spa = async (request: FastifyRequest, reply: FastifyReply) => {
      const url = request.url.split('?')[0] ?? '/';
      if (NOT_CONSOLE.test(url)) return reply.callNotFound();
      reply.header('cache-control', 'no-cache');
      return reply.sendFile('index.html');
    };
    scope.get('/', { schema: { hide: true } }, spa);
    scope.get('/*', { schema: { hide: true } }, spa);
  });
}
