import { status } from '@grpc/grpc-js';
import { isServiceError } from '@mailfleet/kit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';

/** A 1x1 transparent GIF. */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

// The token rides in the query string: a click token carries its URL and outgrows the router's path parameter limit.
const tokenQuery = { type: 'object', required: ['t'], properties: { t: { type: 'string', minLength: 1, maxLength: 8192, description: 'signed tracking token' } } } as const;

function clientOf(req: FastifyRequest): { userAgent: string; ip: string } {
  const ua = req.headers['user-agent'];
  return { userAgent: (Array.isArray(ua) ? ua[0] : ua) ?? '', ip: req.ip ?? '' };
}

function noStore(reply: FastifyReply): FastifyReply {
  return reply.header('cache-control', 'no-store, no-cache, must-revalidate, private').header('pragma', 'no-cache');
}

/**
 * The public tracking links that emails carry (under PUBLIC_URL): the open
 * pixel and the click redirect. No API key: the signed token is the
 * credential, checked by the emails service. The pixel is always served (a
 * recording failure must not show a broken image); a click on a forged link
 * is a 404, never a redirect.
 */
export function trackingRoutes(deps: { upstreams: Upstreams }) {
  const { emails } = deps.upstreams;
  return async (app: FastifyInstance): Promise<void> => {
    app.get<{ Querystring: { t: string } }>('/track/open', {
      config: { public: true },
      schema: {
        tags: ['Tracking'],
        summary: 'Open-tracking pixel (linked from emails; public)',
        querystring: tokenQuery,
        response: { 200: { description: 'a 1x1 transparent GIF', type: 'string', contentMediaType: 'image/gif' } },
      },
    }, async (req, reply) => {
      try {
        await emails.call.recordOpen({ token: req.query.t, ...clientOf(req) });
      } catch (err) {
        if (!(isServiceError(err) && err.code === status.INVALID_ARGUMENT)) req.log.warn({ err }, 'could not record an open');
      }
      return noStore(reply).type('image/gif').send(PIXEL);
    });

    app.get<{ Querystring: { t: string } }>('/track/click', {
      config: { public: true },
      schema: {
        tags: ['Tracking'],
        summary: 'Click-tracking redirect (linked from emails; public)',
        querystring: tokenQuery,
        response: { 302: { description: 'redirect to the original link', type: 'null' } },
      },
    }, async (req, reply) => {
      try {
        const res = await emails.call.recordClick({ token: req.query.t, ...clientOf(req) });
        return noStore(reply).redirect(res.url, 302);
      } catch (err) {
        if (isServiceError(err) && err.code === status.INVALID_ARGUMENT) {
          return reply.code(404).type('text/plain; charset=utf-8').send('This link is not valid.');
        }
        throw err;
      }
    });
  };
}
