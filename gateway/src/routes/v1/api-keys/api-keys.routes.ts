import { authV1 } from '@mailfleet/proto';
import type { FastifyInstance } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf } from '../../../plugins/auth.plugin.js';
import { GatewayError } from '../../../plugins/errors.plugin.js';
import { idParam, iso, nullableString, nullableTimestamp, successResponse, timestamp } from '../../../schemas/common.js';

const apiKey = {
  type: 'object',
  required: ['id', 'name', 'partialToken', 'permission', 'createdAt', 'lastUsed'],
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    partialToken: { type: 'string', description: 'prefix, an ellipsis and the last four characters' },
    permission: { type: 'string', enum: ['FULL', 'SENDING'] },
    domainId: { ...nullableString, description: 'set when the key is restricted to one domain' },
    createdAt: timestamp,
    lastUsed: nullableTimestamp,
  },
} as const;

function toApiKey(k: authV1.ApiKey) {
  return {
    id: k.id,
    name: k.name,
    partialToken: k.partialToken,
    permission: k.permission === authV1.Permission.PERMISSION_SENDING ? 'SENDING' : 'FULL',
    domainId: k.domainId ?? null,
    createdAt: iso(k.createdAt),
    lastUsed: iso(k.lastUsed),
  };
}

/** SPEC 4.1. A key may be restricted to one of the team's domains with `domainId`. */
export function apiKeysRoutes(deps: { upstreams: Upstreams; onKeyDeleted: (keyId: string) => void }) {
  const { auth, domains } = deps.upstreams;
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/api-keys', {
      schema: { tags: ['API keys'], summary: 'List API keys', response: { 200: { type: 'array', items: apiKey } } },
    }, async (req) => {
      const res = await auth.call.listApiKeys({ teamId: principalOf(req).teamId });
      return res.apiKeys.map(toApiKey);
    });

    app.post<{ Body: { name: string; permission?: 'FULL' | 'SENDING'; domainId?: string } }>('/api-keys', {
      schema: {
        tags: ['API keys'],
        summary: 'Create an API key; the token is returned only this once',
        body: {
          type: 'object',
          required: ['name'],
          additionalProperties: false,
          properties: {
            name: { type: 'string', minLength: 1, maxLength: 100 },
            permission: { type: 'string', enum: ['FULL', 'SENDING'], default: 'FULL' },
            domainId: { type: 'string', minLength: 1, description: 'restrict the key to this domain of the team' },
          },
        },
        response: { 200: { type: 'object', required: ['token'], properties: { token: { type: 'string' } } } },
      },
    }, async (req) => {
      const p = principalOf(req);
      if (p.domainId && req.body.domainId !== p.domainId) {
        throw new GatewayError(403, 'A domain-restricted key may only create keys restricted to its own domain');
      }
      if (req.body.domainId) {
        // The domain must be the team's: domains answers NOT_FOUND for another team's id.
        await domains.call.getDomain({ teamId: p.teamId, domainId: req.body.domainId }).catch((err: unknown) => {
          if ((err as { code?: number }).code === 5) throw new GatewayError(400, `Domain ${req.body.domainId} does not exist in this team`);
          throw err;
        });
      }
      const res = await auth.call.createApiKey({
        teamId: p.teamId,
        name: req.body.name,
        permission: req.body.permission === 'SENDING' ? authV1.Permission.PERMISSION_SENDING : authV1.Permission.PERMISSION_FULL,
        domainId: req.body.domainId,
        createdByUserId: p.userId,
      });
      return { token: res.token };
    });

    app.delete<{ Params: { id: string } }>('/api-keys/:id', {
      schema: { tags: ['API keys'], summary: 'Revoke an API key at once', params: idParam, response: { 200: successResponse } },
    }, async (req) => {
      await auth.call.deleteApiKey({ teamId: principalOf(req).teamId, keyId: req.params.id });
      deps.onKeyDeleted(req.params.id);
      return { success: true };
    });
  };
}
