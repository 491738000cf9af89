import type { FastifyInstance } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf } from '../../../plugins/auth.plugin.js';
import { planName } from '../teams/teams.routes.js';

/** SPEC 4.10 settings: plan and sending limits (-1 unlimited). */
export function settingsRoutes(deps: { upstreams: Upstreams }) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/settings', {
      schema: {
        tags: ['Settings'],
        summary: 'Plan and sending limits of the team',
        response: {
          200: {
            type: 'object',
            required: ['id', 'name', 'plan', 'dailyEmailLimit', 'monthlyEmailLimit'],
            properties: {
              id: { type: 'string' }, name: { type: 'string' }, plan: { type: 'string' },
              dailyEmailLimit: { type: 'number' }, monthlyEmailLimit: { type: 'number', description: '-1 means unlimited' },
            },
          },
        },
      },
    }, async (req) => {
      const { settings } = await deps.upstreams.auth.call.getSettings({ teamId: principalOf(req).teamId });
      const s = settings!;
      return { id: s.teamId, name: s.name, plan: planName(s.plan), dailyEmailLimit: s.dailyEmailLimit, monthlyEmailLimit: s.monthlyEmailLimit };
    });
  };
}
