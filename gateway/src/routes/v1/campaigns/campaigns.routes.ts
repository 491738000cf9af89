import { status as grpcStatus } from '@grpc/grpc-js';
import { isServiceError } from '@mailfleet/kit';
import { campaignsV1 } from '@mailfleet/proto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf } from '../../../plugins/auth.plugin.js';
import { GatewayError } from '../../../plugins/errors.plugin.js';
import { idParam, iso, nullableString, nullableTimestamp, successResponse, timestamp } from '../../../schemas/common.js';

const STATUS_NAMES: Record<number, string> = {
  [campaignsV1.CampaignStatus.CAMPAIGN_STATUS_DRAFT]: 'DRAFT',
  [campaignsV1.CampaignStatus.CAMPAIGN_STATUS_SCHEDULED]: 'SCHEDULED',
  [campaignsV1.CampaignStatus.CAMPAIGN_STATUS_SENDING]: 'SENDING',
  [campaignsV1.CampaignStatus.CAMPAIGN_STATUS_PAUSED]: 'PAUSED',
  [campaignsV1.CampaignStatus.CAMPAIGN_STATUS_COMPLETED]: 'COMPLETED',
};
const statusName = (s: campaignsV1.CampaignStatus): string | null => STATUS_NAMES[s] ?? null;

const COUNTER_FIELDS = ['total', 'sent', 'delivered', 'opened', 'clicked', 'unsubscribed', 'bounced', 'hardBounced', 'complained'] as const;
const stringArray = { type: 'array', items: { type: 'string' } } as const;

/** SPEC 2.12. */
const campaign = {
  type: 'object',
  required: ['id', 'name', 'from', 'subject', 'previewText', 'contactBookId', 'html', 'content', 'status', 'scheduledAt', 'batchSize',
    'batchWindowMinutes', ...COUNTER_FIELDS, 'replyTo', 'cc', 'bcc', 'createdAt', 'updatedAt'],
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    from: { type: 'string' },
    subject: { type: 'string' },
    previewText: nullableString,
    contactBookId: nullableString,
    html: nullableString,
    content: nullableString,
    status: { type: 'string', enum: ['DRAFT', 'SCHEDULED', 'SENDING', 'PAUSED', 'COMPLETED'] },
    scheduledAt: nullableTimestamp,
    batchSize: { type: 'integer' },
    batchWindowMinutes: { type: 'integer' },
    ...Object.fromEntries(COUNTER_FIELDS.map((f) => [f, { type: 'integer' }])) as Record<(typeof COUNTER_FIELDS)[number], { type: 'integer' }>,
    replyTo: stringArray,
    cc: stringArray,
    bcc: stringArray,
    createdAt: timestamp,
    updatedAt: timestamp,
    pausedReason: {
      type: 'string',
      description: 'Present only on a PAUSED campaign that the service paused itself: why sending was refused in a way retrying cannot change '
        + '(for example the from domain no longer verified, or the contact book deleted). Fix the cause, then resume.',
    },
  },
} as const;

/** SPEC 2.12, the list item. */
const listItem = {
  type: 'object',
  required: ['id', 'name', 'subject', 'status', 'created_at', 'sent', 'delivered', 'opened', 'clicked'],
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    subject: { type: 'string' },
    status: { type: ['string', 'null'] },
    created_at: timestamp,
    sent: { type: 'integer' },
    delivered: { type: 'integer' },
    opened: { type: 'integer' },
    clicked: { type: 'integer' },
  },
} as const;

function toCampaign(c: campaignsV1.Campaign) {
  return {
    id: c.id, name: c.name, from: c.from, subject: c.subject, previewText: c.previewText ?? null, contactBookId: c.contactBookId ?? null,
    html: c.html ?? null, content: c.content ?? null, status: statusName(c.status), scheduledAt: iso(c.scheduledAt),
    batchSize: c.batchSize, batchWindowMinutes: c.batchWindowMinutes,
    total: c.total, sent: c.sent, delivered: c.delivered, opened: c.opened, clicked: c.clicked, unsubscribed: c.unsubscribed,
    bounced: c.bounced, hardBounced: c.hardBounced, complained: c.complained,
    replyTo: c.replyTo, cc: c.cc, bcc: c.bcc, createdAt: iso(c.createdAt), updatedAt: iso(c.updatedAt),
    // Outside SPEC 2.12, so only shown when there is a reason to show.
    ...(c.pausedReason ? { pausedReason: c.pausedReason } : {}),
  };
}

const addressList = { anyOf: [{ type: 'string', minLength: 1 }, { type: 'array', items: { type: 'string', minLength: 1 }, maxItems: 50 }] } as const;
const scheduleField = { type: 'string', minLength: 1, maxLength: 200, description: 'ISO 8601 or natural language ("tomorrow at 9am", "in 2 hours")' } as const;
const batchSizeField = { type: 'integer', minimum: 1, maximum: 100_000 } as const;
const batchWindowField = { type: 'integer', minimum: 0, maximum: 10_080, description: 'minutes between batches (default 5)' } as const;

interface CreateBody {
  name: string;
  from: string;
  subject: string;
  contactBookId: string;
  html?: string;
  content?: string;
  previewText?: string;
  replyTo?: string | string[];
  cc?: string | string[];
  bcc?: string | string[];
  sendNow?: boolean;
  scheduledAt?: string;
  batchSize?: number;
  batchWindowMinutes?: number;
}

const asList = (v: string | string[] | undefined): string[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
const campaignIdParam = { type: 'object', required: ['campaignId'], properties: { campaignId: idParam.properties.id } } as const;
const tokenQuery = { type: 'object', required: ['token'], properties: { token: { type: 'string', minLength: 1, maxLength: 4096 } } } as const;

function page(reply: FastifyReply, code: number, title: string, body: string): FastifyReply {
  return reply.code(code).header('cache-control', 'no-store').type('text/html; charset=utf-8')
    .send(`<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${title}</title></head>`
      + `<body style="font-family:sans-serif;max-width:32rem;margin:4rem auto"><h1>${title}</h1><p>${body}</p></body></html>`);
}

const escapeHtml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/**
 * A campaign mails a team-wide contact book and campaigns store no domain to scope a query by, so a key
 * restricted to one domain may not manage them (403, as for webhooks); before, such a key could read,
 * pause or delete another domain's campaigns and create one from any domain.
 */
function teamOf(req: FastifyRequest): string {
  const p = principalOf(req);
  if (p.domainId) throw new GatewayError(403, 'A domain-restricted API key cannot manage campaigns', 'FORBIDDEN');
  return p.teamId;
}

/** SPEC 4.8: campaigns, errors as `{code, message}`; plus the public unsubscribe link and its RFC 8058 one-click POST. */
export function campaignsRoutes(deps: { upstreams: Upstreams }) {
  const { campaigns } = deps.upstreams;
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/campaigns', {
      config: { errorForm: 'code' },
      schema: { tags: ['Campaigns'], summary: 'List campaigns, newest first', response: { 200: { type: 'array', items: listItem } } },
    }, async (req) => {
      const res = await campaigns.call.listCampaigns({ teamId: teamOf(req) });
      return res.campaigns.map((c) => ({
        id: c.id, name: c.name, subject: c.subject, status: statusName(c.status), created_at: iso(c.createdAt),
        sent: c.sent, delivered: c.delivered, opened: c.opened, clicked: c.clicked,
      }));
    });

    app.post<{ Body: CreateBody }>('/campaigns', {
      config: { errorForm: 'code' },
      schema: {
        tags: ['Campaigns'],
        summary: 'Create a campaign: a draft, sent now (sendNow) or scheduled (scheduledAt)',
        body: {
          type: 'object',
          required: ['name', 'from', 'subject', 'contactBookId'],
          properties: {
            name: { type: 'string', minLength: 1, maxLength: 200 },
            from: { type: 'string', minLength: 3, maxLength: 320 },
            subject: { type: 'string', minLength: 1, maxLength: 998 },
            contactBookId: { type: 'string', minLength: 1, maxLength: 200 },
            html: { type: 'string', maxLength: 5 * 1024 * 1024, description: 'must contain {{service_unsubscribe_url}} (or content must)' },
            content: { type: 'string', maxLength: 5 * 1024 * 1024 },
            previewText: { type: 'string', maxLength: 500 },
            replyTo: addressList,
            cc: addressList,
            bcc: addressList,
            sendNow: { type: 'boolean' },
            scheduledAt: scheduleField,
            batchSize: batchSizeField,
            batchWindowMinutes: batchWindowField,
          },
        },
        response: { 200: campaign },
      },
    }, async (req) => {
      const b = req.body;
      const res = await campaigns.call.createCampaign({
        teamId: teamOf(req), name: b.name, from: b.from, subject: b.subject, contactBookId: b.contactBookId,
        html: b.html, content: b.content, previewText: b.previewText, replyTo: asList(b.replyTo), cc: asList(b.cc), bcc: asList(b.bcc),
        sendNow: b.sendNow ?? false, scheduledAt: b.scheduledAt, batchSize: b.batchSize, batchWindowMinutes: b.batchWindowMinutes,
      });
      return toCampaign(res.campaign!);
    });

    app.get<{ Params: { campaignId: string } }>('/campaigns/:campaignId', {
      config: { errorForm: 'code' },
      schema: { tags: ['Campaigns'], summary: 'Get a campaign with its counters', params: campaignIdParam, response: { 200: campaign } },
    }, async (req) => {
      const res = await campaigns.call.getCampaign({ teamId: teamOf(req), campaignId: req.params.campaignId });
      return toCampaign(res.campaign!);
    });

    app.post<{ Params: { campaignId: string }; Body: { scheduledAt?: string; batchSize?: number; batchWindowMinutes?: number } | undefined }>('/campaigns/:campaignId/schedule', {
      config: { errorForm: 'code' },
      schema: {
        tags: ['Campaigns'],
        summary: 'Schedule or reschedule a campaign (no scheduledAt: now)',
        params: campaignIdParam,
        body: { type: ['object', 'null'], properties: { scheduledAt: scheduleField, batchSize: batchSizeField, batchWindowMinutes: batchWindowField } },
        response: { 200: successResponse },
      },
    }, async (req) => {
      const b = req.body ?? {};
      await campaigns.call.scheduleCampaign({
        teamId: teamOf(req), campaignId: req.params.campaignId, scheduledAt: b.scheduledAt, batchSize: b.batchSize, batchWindowMinutes: b.batchWindowMinutes,
      });
      return { success: true };
    });

    app.post<{ Params: { campaignId: string } }>('/campaigns/:campaignId/pause', {
      config: { errorForm: 'code' },
      schema: { tags: ['Campaigns'], summary: 'Pause a sending or scheduled campaign after the emails in flight', params: campaignIdParam, response: { 200: successResponse } },
    }, async (req) => {
      await campaigns.call.pauseCampaign({ teamId: teamOf(req), campaignId: req.params.campaignId });
      return { success: true };
    });

    app.post<{ Params: { campaignId: string } }>('/campaigns/:campaignId/resume', {
      config: { errorForm: 'code' },
      schema: { tags: ['Campaigns'], summary: 'Resume a paused campaign where it stopped (one paused before its scheduled time is SCHEDULED again for that time)', params: campaignIdParam, response: { 200: successResponse } },
    }, async (req) => {
      await campaigns.call.resumeCampaign({ teamId: teamOf(req), campaignId: req.params.campaignId });
      return { success: true };
    });

    app.delete<{ Params: { campaignId: string } }>('/campaigns/:campaignId', {
      config: { errorForm: 'code' },
      schema: { tags: ['Campaigns'], summary: 'Delete a campaign and all its emails', params: campaignIdParam, response: { 200: successResponse } },
    }, async (req) => {
      await campaigns.call.deleteCampaign({ teamId: teamOf(req), campaignId: req.params.campaignId });
      return { success: true };
    });

    // The public unsubscribe link ({{service_unsubscribe_url}}) and its RFC 8058 one-click POST
    // (List-Unsubscribe-Post: List-Unsubscribe=One-Click, a form-encoded body). No API key: the
    // signed token is the credential, checked by the campaigns service.
    if (!app.hasContentTypeParser('application/x-www-form-urlencoded')) {
      app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => done(null, body));
    }
    const unsubscribe = async (token: string, reply: FastifyReply): Promise<FastifyReply> => {
      try {
        const res = await campaigns.call.unsubscribeFromCampaign({ token });
        return page(reply, 200, 'You are unsubscribed', `${escapeHtml(res.email)} will not receive these emails any more.`);
      } catch (err) {
        if (isServiceError(err) && err.code === grpcStatus.NOT_FOUND) return page(reply, 404, 'Link not valid', 'This unsubscribe link is not valid.');
        throw err;
      }
    };
    for (const method of ['GET', 'POST'] as const) {
      // The token is in the query string: the router limits path parameters to 100 characters.
      app.route<{ Querystring: { token: string } }>({
        method,
        url: '/campaigns/unsubscribe',
        config: { public: true },
        schema: {
          tags: ['Campaigns'],
          summary: method === 'GET' ? 'Campaign unsubscribe link (public): unsubscribes and shows a confirmation page' : 'RFC 8058 one-click unsubscribe (public)',
          querystring: tokenQuery,
          response: { 200: { description: 'confirmation page', type: 'string', contentMediaType: 'text/html' } },
        },
        handler: async (req, reply) => unsubscribe(req.query.token, reply),
      });
    }
  };
}
