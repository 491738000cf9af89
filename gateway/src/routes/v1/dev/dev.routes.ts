import type { FastifyInstance } from 'fastify';
import type { DevInbox } from '../../../clients/dev-inbox.js';
import { principalOf } from '../../../plugins/auth.plugin.js';
import { GatewayError } from '../../../plugins/errors.plugin.js';
import { errorCodeResponse, idParam, timestamp } from '../../../schemas/common.js';

const NO_SINK = 'The dev inbox exists only when the platform runs its own SMTP sink (npm start)';
const dkimEnum = { type: 'string', enum: ['pass', 'fail', 'none', 'neutral', 'temperror', 'permerror'] } as const;
const nullableString = { type: ['string', 'null'] } as const;

const summary = {
  type: 'object',
  required: ['id', 'receivedAt', 'from', 'to', 'subject', 'size', 'dkim'],
  properties: {
    id: { type: 'string' }, receivedAt: timestamp, from: { type: 'string' }, to: { type: 'array', items: { type: 'string' } },
    subject: { type: 'string' }, size: { type: 'integer', description: 'bytes as received' }, dkim: dkimEnum,
  },
} as const;

const detail = {
  type: 'object',
  required: ['id', 'receivedAt', 'from', 'to', 'subject', 'headers', 'html', 'text', 'dkim', 'simulator'],
  properties: {
    id: { type: 'string' }, receivedAt: timestamp, from: { type: 'string' }, to: { type: 'array', items: { type: 'string' } }, subject: { type: 'string' },
    headers: { type: 'array', items: { type: 'object', required: ['name', 'value'], properties: { name: { type: 'string' }, value: { type: 'string' } } } },
    html: nullableString,
    text: nullableString,
    dkim: { type: 'object', required: ['result', 'domain', 'selector'], properties: { result: dkimEnum, domain: nullableString, selector: nullableString } },
    simulator: { ...nullableString, description: 'the mailbox simulator\'s rule for the recipient: bounce, softbounce, complaint, or null (delivered)' },
  },
} as const;

/**
 * Local mode's dev inbox (contract: Dev inbox): what the embedded SMTP sink holds, for any signed-in
 * member (the sink is the whole machine's, not a team's). 404 when the gateway has no sink.
 */
export function devRoutes(deps: { devInbox?: DevInbox | undefined }) {
  const inbox = () => {
    if (!deps.devInbox) throw new GatewayError(404, NO_SINK, 'NOT_FOUND');
    return deps.devInbox;
  };
  return async (app: FastifyInstance): Promise<void> => {
    app.get<{ Querystring: { limit: number; cursor?: string } }>('/dev/inbox', {
      schema: {
        tags: ['Dev inbox'],
        summary: 'Messages the embedded SMTP sink holds, newest first (local mode only)',
        querystring: {
          type: 'object', additionalProperties: false,
          properties: { limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 }, cursor: { type: 'string', minLength: 1, maxLength: 200 } },
        },
        response: {
          200: { type: 'object', required: ['data', 'nextCursor'], properties: { data: { type: 'array', items: summary }, nextCursor: nullableString } },
          404: errorCodeResponse,
        },
      },
    }, async (req) => {
      principalOf(req);
      return inbox().list(req.query.limit, req.query.cursor);
    });

    app.get<{ Params: { id: string } }>('/dev/inbox/:id', {
      schema: { tags: ['Dev inbox'], summary: 'One message of the dev inbox, parsed, with its DKIM result', params: idParam, response: { 200: detail, 404: errorCodeResponse } },
    }, async (req) => {
      principalOf(req);
      const m = await inbox().get(req.params.id);
      if (!m) throw new GatewayError(404, `No message ${req.params.id} in the dev inbox`, 'NOT_FOUND');
      return m;
    });
  };
}
