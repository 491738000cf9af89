import type { FastifyInstance } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf } from '../../../plugins/auth.plugin.js';
import { idParam, iso, successResponse, timestamp } from '../../../schemas/common.js';

const user = {
  type: 'object',
  required: ['id', 'email', 'name', 'createdAt'],
  properties: { id: { type: 'string' }, email: { type: 'string' }, name: { type: ['string', 'null'] }, createdAt: timestamp },
} as const;

/** The people of the current team (contract: Users and invites). */
export function usersRoutes(deps: { upstreams: Upstreams }) {
  const { auth } = deps.upstreams;
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/users', {
      schema: {
        tags: ['Users'], summary: 'The people of the current team (who sign in to the console)',
        response: { 200: { type: 'object', required: ['data'], properties: { data: { type: 'array', items: user } } } },
      },
    }, async (req) => {
      const res = await auth.call.listTeamUsers({ teamId: principalOf(req).teamId });
      return { data: res.users.map((u) => ({ id: u.id, email: u.email, name: u.name ?? null, createdAt: iso(u.createdAt) })) };
    });

    app.delete<{ Params: { id: string } }>('/users/:id', {
      schema: {
        tags: ['Users'], summary: 'Remove a user from the current team and end their sessions in it (not yourself)',
        params: idParam, response: { 200: successResponse },
      },
    }, async (req) => {
      const p = principalOf(req);
      await auth.call.removeTeamMember({ teamId: p.teamId, userId: req.params.id, callerUserId: p.userId });
      return { success: true };
    });
  };
}
