import { suppressionsV1 } from '@mailfleet/proto';
import type { FastifyInstance } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf } from '../../../plugins/auth.plugin.js';
import { iso, nullableString, pageParam, successResponse, timestamp } from '../../../schemas/common.js';

const REASONS = ['HARD_BOUNCE', 'COMPLAINT', 'MANUAL', 'UNSUBSCRIBE'] as const;
type Reason = (typeof REASONS)[number];
const PROTO_PREFIX = 'SUPPRESSION_REASON_';

function reasonToProto(r: Reason): suppressionsV1.SuppressionReason {
  return suppressionsV1.suppressionReasonFromJSON(`${PROTO_PREFIX}${r}`);
}
function reasonName(r: suppressionsV1.SuppressionReason): string {
  return suppressionsV1.suppressionReasonToJSON(r).replace(PROTO_PREFIX, '');
}

const reasonSchema = {
  type: 'string',
  enum: REASONS,
  description: 'HARD_BOUNCE address invalid or mailbox missing; COMPLAINT recipient marked spam; MANUAL added by hand; UNSUBSCRIBE recipient opted out',
} as const;

/** SPEC 2.13. */
const suppression = {
  type: 'object',
  required: ['id', 'email', 'reason', 'source', 'createdAt'],
  properties: {
    id: { type: 'string' },
    email: { type: 'string', description: 'lower case' },
    reason: reasonSchema,
    source: { ...nullableString, description: 'where it came from, for example the id of the email that bounced' },
    createdAt: timestamp,
  },
} as const;

function toSuppression(s: suppressionsV1.Suppression) {
  return { id: s.id, email: s.email, reason: reasonName(s.reason), source: s.source ?? null, createdAt: iso(s.createdAt) };
}

/** SPEC 7 form 4, the delete route's error body. */
const failureResponse = {
  type: 'object',
  required: ['success', 'error'],
  properties: { success: { type: 'boolean', const: false }, error: { type: 'string' } },
} as const;

/** int32 bound of the RPC's page field. */

/**
 * SPEC 4.9: the team's suppression list. List and add answer errors as
 * `{code, message}`; delete as `{success: false, error}` (SPEC 7, form 4).
 */
export function suppressionsRoutes(deps: { upstreams: Upstreams }) {
  const { suppressions } = deps.upstreams;
  return async (app: FastifyInstance): Promise<void> => {
    app.get<{ Querystring: { page: number; limit: number; search?: string; reason?: Reason } }>('/suppressions', {
      schema: {
        tags: ['Suppressions'],
        summary: 'List suppressed addresses, newest first',
        querystring: {
          type: 'object',
          properties: {
            page: pageParam,
            limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
            search: { type: 'string', maxLength: 320, description: 'only addresses containing this text (case-insensitive, literal)' },
            reason: reasonSchema,
          },
        },
        response: {
          200: {
            type: 'object',
            required: ['suppressions', 'total'],
            properties: { suppressions: { type: 'array', items: suppression }, total: { type: 'integer', description: 'entries matching the filters' } },
          },
        },
      },
    }, async (req) => {
      const q = req.query;
      const res = await suppressions.call.listSuppressions({
        teamId: principalOf(req).teamId,
        page: q.page,
        limit: q.limit,
        search: q.search,
        reason: q.reason ? reasonToProto(q.reason) : suppressionsV1.SuppressionReason.SUPPRESSION_REASON_UNSPECIFIED,
      });
      return { suppressions: res.suppressions.map(toSuppression), total: res.total };
    });

    app.post<{ Body: { email: string; reason: Reason; source?: string | null } }>('/suppressions', {
      schema: {
        tags: ['Suppressions'],
        summary: 'Suppress an address; an address already on the list gets the new reason and source',
        body: {
          type: 'object',
          required: ['email', 'reason'],
          additionalProperties: false,
          properties: {
            email: { type: 'string', minLength: 1, maxLength: 320, description: 'valid address; stored lower case' },
            reason: reasonSchema,
            source: { type: ['string', 'null'], maxLength: 500, description: 'where it came from; null or absent when unknown' },
          },
        },
        response: { 200: suppression },
      },
    }, async (req) => {
      const res = await suppressions.call.addSuppression({
        teamId: principalOf(req).teamId, email: req.body.email, reason: reasonToProto(req.body.reason), source: req.body.source ?? undefined,
      });
      return toSuppression(res.suppression!);
    });

    app.delete<{ Params: { email: string } }>('/suppressions/email/:email', {
      config: { errorForm: 'success' },
      schema: {
        tags: ['Suppressions'],
        summary: 'Remove an address from the list, so it can be emailed again',
        params: {
          type: 'object',
          required: ['email'],
          properties: { email: { type: 'string', minLength: 1, maxLength: 320, description: 'the address, URL-encoded (a%2Bb%40example.com)' } },
        },
        response: { 200: successResponse, 400: failureResponse, 404: failureResponse },
      },
    }, async (req) => {
      // fastify has already percent-decoded the segment once; the service normalises case.
      await suppressions.call.removeSuppression({ teamId: principalOf(req).teamId, email: req.params.email });
      return { success: true };
    });
  };
}
