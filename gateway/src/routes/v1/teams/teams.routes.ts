import { authV1 } from '@mailfleet/proto';
import type { FastifyInstance } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf } from '../../../plugins/auth.plugin.js';
import { idParam, iso, timestamp } from '../../../schemas/common.js';

export function planName(p: authV1.Plan): string {
  return authV1.planToJSON(p).replace(/^PLAN_/, '');
}

const teamItem = {
  type: 'object',
  required: ['id', 'name', 'plan', 'createdAt', 'updatedAt'],
  properties: { id: { type: 'string' }, name: { type: 'string' }, plan: { type: 'string' }, createdAt: timestamp, updatedAt: timestamp },
} as const;
const teamDetail = { ...teamItem, required: [...teamItem.required, 'slug'], properties: { ...teamItem.properties, slug: { type: 'string' } } } as const;

function toItem(t: authV1.Team) {
  return { id: t.id, name: t.name, plan: planName(t.plan), createdAt: iso(t.createdAt), updatedAt: iso(t.updatedAt) };
}

/** SPEC 4.7: the teams of the user behind the key. */
export function teamsRoutes(deps: { upstreams: Upstreams }) {
  const { auth } = deps.upstreams;
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/teams', {
      schema: { tags: ['Teams'], summary: 'Teams the current user belongs to', response: { 200: { type: 'array', items: teamItem } } },
    }, async (req) => (await auth.call.listTeams({ userId: principalOf(req).userId })).teams.map(toItem));

    app.get<{ Params: { id: string } }>('/teams/:id', {
      schema: { tags: ['Teams'], summary: 'One team, with its slug', params: idParam, response: { 200: teamDetail } },
    }, async (req) => {
      const { team } = await auth.call.getTeam({ userId: principalOf(req).userId, teamId: req.params.id });
      return { ...toItem(team!), slug: team!.slug };
    });
  };
}
