import { webhooksV1 } from '@mailfleet/proto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf } from '../../../plugins/auth.plugin.js';
import { GatewayError } from '../../../plugins/errors.plugin.js';
import { errorCodeResponse, idParam, iso, nullableString, nullableTimestamp, pageParam, timestamp } from '../../../schemas/common.js';

const TAGS = ['Webhooks'];
const config = { errorForm: 'code' } as const;
const errors = { 400: errorCodeResponse, 404: errorCodeResponse } as const;

/** Synchronous deliveries (test, retry) wait for the endpoint: the service bounds the attempt (WEBHOOK_TIMEOUT_MS, 10 s by default). */
const SYNC_DELIVERY_DEADLINE_MS = 30_000;

const EVENT_TYPES_DOC = 'public event types of SPEC 6.2: email.queued, email.sent, email.delivery_delayed, email.delivered, email.bounced, '
  + 'email.rejected, email.rendering_failure, email.complained, email.failed, email.cancelled, email.suppressed, email.opened, '
  + 'email.clicked, contact.created, contact.updated, contact.deleted, domain.created, domain.verified, domain.updated, domain.deleted '
  + '(webhook.test is sent only by the test endpoint and cannot be subscribed to)';

/** SPEC 2.16. */
const webhookSchema = {
  type: 'object',
  required: [
    'id', 'url', 'description', 'eventTypes', 'status', 'secret', 'apiVersion', 'consecutiveFailures', 'lastSuccessAt', 'lastFailureAt',
    'createdAt', 'updatedAt', 'teamId', 'createdByUserId',
  ],
  properties: {
    id: { type: 'string' },
    url: { type: 'string', description: 'HTTPS endpoint receiving POST deliveries' },
    description: nullableString,
    eventTypes: { type: 'array', items: { type: 'string' } },
    status: { type: 'string', enum: ['ACTIVE', 'PAUSED', 'FAILED'] },
    secret: { type: 'string', description: 'in full only in the create response and in a response that set a new secret; masked (whsec_****abcd) otherwise' },
    apiVersion: nullableString,
    consecutiveFailures: { type: 'number', description: 'events in a row that failed every attempt since the last success' },
    lastSuccessAt: nullableTimestamp,
    lastFailureAt: nullableTimestamp,
    createdAt: timestamp,
    updatedAt: timestamp,
    teamId: { type: 'string' },
    createdByUserId: { type: 'string' },
  },
} as const;

/** SPEC 2.17, plus `eventId` (the receiver's deduplication key). */
const deliverySchema = {
  type: 'object',
  required: [
    'id', 'type', 'createdAt', 'updatedAt', 'teamId', 'status', 'webhookId', 'eventId', 'payload', 'attempt', 'nextAttemptAt', 'lastError',
    'responseStatus', 'responseTimeMs', 'responseText',
  ],
  properties: {
    id: { type: 'string' },
    type: { type: 'string', description: 'event type delivered, webhook.test for the test endpoint' },
    createdAt: timestamp,
    updatedAt: timestamp,
    teamId: { type: 'string' },
    status: { type: 'string', enum: ['PENDING', 'SUCCESS', 'FAILED'] },
    webhookId: { type: 'string' },
    eventId: { type: 'string', description: 'id of the event delivered; the same in every attempt' },
    payload: { type: 'string', description: 'the exact JSON body sent; the signature covers these bytes' },
    attempt: { type: 'number', description: 'attempts made so far' },
    nextAttemptAt: { ...nullableTimestamp, description: 'when the next retry is due; null when none is planned' },
    lastError: { ...nullableString, description: 'why the last attempt failed; null after a success' },
    responseStatus: { type: ['number', 'null'], description: 'HTTP status of the last response; null when none came' },
    responseTimeMs: { type: ['number', 'null'] },
    responseText: { ...nullableString, description: 'body of the last response, truncated' },
  },
} as const;

const STATUS_NAMES: Record<number, string> = {
  [webhooksV1.WebhookStatus.WEBHOOK_STATUS_ACTIVE]: 'ACTIVE',
  [webhooksV1.WebhookStatus.WEBHOOK_STATUS_PAUSED]: 'PAUSED',
  [webhooksV1.WebhookStatus.WEBHOOK_STATUS_FAILED]: 'FAILED',
};

const DELIVERY_STATUS: Record<string, webhooksV1.DeliveryStatus> = {
  PENDING: webhooksV1.DeliveryStatus.DELIVERY_STATUS_PENDING,
  SUCCESS: webhooksV1.DeliveryStatus.DELIVERY_STATUS_SUCCESS,
  FAILED: webhooksV1.DeliveryStatus.DELIVERY_STATUS_FAILED,
};
const DELIVERY_STATUS_NAMES: Record<number, string> = Object.fromEntries(Object.entries(DELIVERY_STATUS).map(([k, v]) => [v, k]));

function toWebhook(w: webhooksV1.Webhook) {
  return {
    id: w.id,
    url: w.url,
    description: w.description ?? null,
    eventTypes: w.eventTypes,
    status: STATUS_NAMES[w.status] ?? 'ACTIVE',
    secret: w.secret,
    apiVersion: w.apiVersion ?? null,
    consecutiveFailures: w.consecutiveFailures,
    lastSuccessAt: iso(w.lastSuccessAt),
    lastFailureAt: iso(w.lastFailureAt),
    createdAt: iso(w.createdAt),
    updatedAt: iso(w.updatedAt),
    teamId: w.teamId,
    createdByUserId: w.createdByUserId,
  };
}

function toDelivery(d: webhooksV1.WebhookDelivery) {
  return {
    id: d.id,
    type: d.type,
    createdAt: iso(d.createdAt),
    updatedAt: iso(d.updatedAt),
    teamId: d.teamId,
    status: DELIVERY_STATUS_NAMES[d.status] ?? 'PENDING',
    webhookId: d.webhookId,
    eventId: d.eventId,
    payload: d.payload,
    attempt: d.attempt,
    nextAttemptAt: iso(d.nextAttemptAt),
    lastError: d.lastError ?? null,
    responseStatus: d.responseStatus ?? null,
    responseTimeMs: d.responseTimeMs ?? null,
    responseText: d.responseText ?? null,
  };
}

/**
 * Webhooks see every event of the team, whatever the domain: a key
 * restricted to one domain may not manage them.
 */
function teamOf(req: FastifyRequest): { teamId: string; userId: string } {
  const p = principalOf(req);
  if (p.domainId) throw new GatewayError(403, 'A domain-restricted API key cannot manage webhooks', 'FORBIDDEN');
  return { teamId: p.teamId, userId: p.userId };
}

const eventTypesSchema = { type: 'array', minItems: 1, maxItems: 100, items: { type: 'string', minLength: 1, maxLength: 100 }, description: EVENT_TYPES_DOC } as const;
const urlSchema = { type: 'string', minLength: 1, maxLength: 2048, description: 'HTTPS URL; hosts on loopback, private, link-local or metadata addresses are refused' } as const;
const secretSchema = { type: 'string', minLength: 16, maxLength: 256, description: 'signing secret, at least 16 characters' } as const;
const deliveryParams = {
  type: 'object',
  required: ['id', 'deliveryId'],
  properties: { id: idParam.properties.id, deliveryId: { type: 'string', minLength: 1, maxLength: 200 } },
} as const;

interface CreateBody { url: string; eventTypes: string[]; description?: string; secret?: string }
interface UpdateBody { url?: string; description?: string | null; eventTypes?: string[]; active?: boolean; rotateSecret?: boolean; secret?: string }

/** SPEC 4.13 and the deliveries log (list, manual retry); errors as `{code, message}`. */
export function webhooksRoutes(deps: { upstreams: Upstreams }) {
  const { webhooks } = deps.upstreams;
  return async (app: FastifyInstance): Promise<void> => {
    app.post<{ Body: CreateBody }>('/webhooks', {
      config,
      schema: {
        tags: TAGS,
        summary: 'Create a webhook (ACTIVE); the response holds the full secret, shown only this once',
        body: {
          type: 'object',
          required: ['url', 'eventTypes'],
          additionalProperties: false,
          properties: {
            url: urlSchema,
            eventTypes: eventTypesSchema,
            description: { type: 'string', maxLength: 1000 },
            secret: { ...secretSchema, description: 'signing secret, at least 16 characters; generated (whsec_...) when omitted' },
          },
        },
        response: { 200: webhookSchema, 400: errorCodeResponse },
      },
    }, async (req) => {
      const { teamId, userId } = teamOf(req);
      const { url, eventTypes, description, secret } = req.body;
      const res = await webhooks.call.createWebhook({ teamId, url, eventTypes, description, secret, createdByUserId: userId });
      return toWebhook(res.webhook!);
    });

    app.get('/webhooks', {
      config,
      schema: { tags: TAGS, summary: 'List webhooks, newest first; secrets masked', response: { 200: { type: 'array', items: webhookSchema } } },
    }, async (req) => {
      const res = await webhooks.call.listWebhooks({ teamId: teamOf(req).teamId });
      return res.webhooks.map(toWebhook);
    });

    app.get<{ Params: { id: string } }>('/webhooks/:id', {
      config,
      schema: { tags: TAGS, summary: 'Get a webhook; secret masked', params: idParam, response: { 200: webhookSchema, 404: errorCodeResponse } },
    }, async (req) => {
      const res = await webhooks.call.getWebhook({ teamId: teamOf(req).teamId, webhookId: req.params.id });
      return toWebhook(res.webhook!);
    });

    app.patch<{ Params: { id: string }; Body: UpdateBody }>('/webhooks/:id', {
      config,
      schema: {
        tags: TAGS,
        summary: 'Change a webhook; only the given fields change',
        description: '`active: false` pauses (PAUSED: nothing is delivered), `active: true` activates (ACTIVE, consecutive failures reset; '
          + 'deliveries held meanwhile go out). `rotateSecret: true` or `secret` sets a new secret, returned in full in this response only.',
        params: idParam,
        body: {
          type: 'object',
          additionalProperties: false,
          properties: {
            url: urlSchema,
            description: { type: ['string', 'null'], maxLength: 1000 },
            eventTypes: eventTypesSchema,
            active: { type: 'boolean' },
            rotateSecret: { type: 'boolean' },
            secret: secretSchema,
          },
        },
        response: { 200: webhookSchema, ...errors },
      },
    }, async (req) => {
      const { teamId } = teamOf(req);
      const b = req.body ?? {};
      const res = await webhooks.call.updateWebhook({
        teamId,
        webhookId: req.params.id,
        url: b.url,
        description: typeof b.description === 'string' ? b.description : undefined,
        clearDescription: b.description === null,
        eventTypes: b.eventTypes === undefined ? undefined : { values: b.eventTypes },
        active: b.active,
        rotateSecret: b.rotateSecret === true,
        secret: b.secret,
      });
      return toWebhook(res.webhook!);
    });

    app.delete<{ Params: { id: string } }>('/webhooks/:id', {
      config,
      schema: {
        tags: TAGS,
        summary: 'Delete a webhook permanently; its pending deliveries are cancelled. Answers the deleted webhook',
        params: idParam,
        response: { 200: webhookSchema, 404: errorCodeResponse },
      },
    }, async (req) => {
      const res = await webhooks.call.deleteWebhook({ teamId: teamOf(req).teamId, webhookId: req.params.id });
      return toWebhook(res.webhook!);
    });

    app.post<{ Params: { id: string } }>('/webhooks/:id/test', {
      config,
      schema: {
        tags: TAGS,
        summary: 'Send a webhook.test event now and answer its delivery record; 500 when the endpoint does not accept it',
        params: idParam,
        response: { 200: deliverySchema, 404: errorCodeResponse, 500: errorCodeResponse },
      },
    }, async (req, reply) => {
      const res = await webhooks.call.testWebhook({ teamId: teamOf(req).teamId, webhookId: req.params.id }, { deadlineMs: SYNC_DELIVERY_DEADLINE_MS });
      const d = res.delivery!;
      if (d.status !== webhooksV1.DeliveryStatus.DELIVERY_STATUS_SUCCESS) {
        // SPEC 4.13: a failed test is a 500 whose message says what went wrong (the generic 5xx mapping would hide it).
        return reply.code(500).send({ code: 'INTERNAL_SERVER_ERROR', message: `Webhook test delivery failed: ${d.lastError ?? 'unknown error'}` });
      }
      return toDelivery(d);
    });

    app.get<{ Params: { id: string }; Querystring: { page: number; limit: number; status?: string } }>('/webhooks/:id/deliveries', {
      config,
      schema: {
        tags: TAGS,
        summary: 'List a webhook\'s deliveries, newest first (every event delivered, with the outcome of its last attempt)',
        params: idParam,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            page: pageParam,
            limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
            status: { type: 'string', enum: ['PENDING', 'SUCCESS', 'FAILED'] },
          },
        },
        response: {
          200: {
            type: 'object',
            required: ['data', 'count', 'page', 'limit'],
            properties: { data: { type: 'array', items: deliverySchema }, count: { type: 'number' }, page: { type: 'number' }, limit: { type: 'number' } },
          },
          ...errors,
        },
      },
    }, async (req) => {
      const { page, limit, status } = req.query;
      const res = await webhooks.call.listWebhookDeliveries({
        teamId: teamOf(req).teamId, webhookId: req.params.id, page, limit,
        status: status ? (DELIVERY_STATUS[status] ?? webhooksV1.DeliveryStatus.DELIVERY_STATUS_UNSPECIFIED) : webhooksV1.DeliveryStatus.DELIVERY_STATUS_UNSPECIFIED,
      });
      return { data: res.deliveries.map(toDelivery), count: res.count, page, limit };
    });

    app.post<{ Params: { id: string; deliveryId: string } }>('/webhooks/:id/deliveries/:deliveryId/retry', {
      config,
      schema: {
        tags: TAGS,
        summary: 'Attempt one delivery again now and answer its record after the attempt',
        description: 'A delivery waiting for a retry has it brought forward; a finished one (SUCCESS or FAILED) gets one extra attempt with the '
          + 'same event id and body. 400 when the webhook is not ACTIVE; 409 while another attempt of the delivery is in flight.',
        params: deliveryParams,
        response: { 200: deliverySchema, ...errors, 409: errorCodeResponse },
      },
    }, async (req) => {
      const res = await webhooks.call.retryWebhookDelivery(
        { teamId: teamOf(req).teamId, webhookId: req.params.id, deliveryId: req.params.deliveryId },
        { deadlineMs: SYNC_DELIVERY_DEADLINE_MS },
      );
      return toDelivery(res.delivery!);
    });
  };
}
