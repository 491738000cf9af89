import type { emailsV1 } from '@mailfleet/proto';
import type { FastifyInstance } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf } from '../../../plugins/auth.plugin.js';
import { idParam, iso, nullableString, successResponse, timestamp } from '../../../schemas/common.js';

/** SPEC 2.11; timestamps carry milliseconds. */
const template = {
  type: 'object',
  required: ['id', 'name', 'subject', 'html', 'content', 'teamId', 'createdAt', 'updatedAt'],
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    subject: { type: 'string', description: 'may hold {{name}} placeholders' },
    html: { ...nullableString, description: 'HTML body; may hold {{name}} placeholders' },
    content: { ...nullableString, description: 'plain text body; may hold {{name}} placeholders' },
    teamId: { type: 'string' },
    createdAt: timestamp,
    updatedAt: timestamp,
  },
} as const;

function toTemplate(t: emailsV1.Template) {
  return {
    id: t.id, name: t.name, subject: t.subject, html: t.html ?? null, content: t.content ?? null, teamId: t.teamId,
    createdAt: iso(t.createdAt), updatedAt: iso(t.updatedAt),
  };
}

const fields = {
  name: { type: 'string', minLength: 1, maxLength: 200 },
  subject: { type: 'string', maxLength: 998 },
  html: { type: 'string', maxLength: 5 * 1024 * 1024 },
  content: { type: 'string', maxLength: 5 * 1024 * 1024 },
} as const;

interface TemplateBody {
  name: string;
  subject: string;
  html?: string;
  content?: string;
}

/** SPEC 4.6: reusable subjects and bodies with `{{name}}` placeholders; errors as `{code, message}`. */
export function templatesRoutes(deps: { upstreams: Upstreams }) {
  const { emails } = deps.upstreams;
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/templates', {
      config: { errorForm: 'code' },
      schema: { tags: ['Templates'], summary: 'List templates, newest first', response: { 200: { type: 'array', items: template } } },
    }, async (req) => {
      const res = await emails.call.listTemplates({ teamId: principalOf(req).teamId });
      return res.templates.map(toTemplate);
    });

    app.post<{ Body: TemplateBody }>('/templates', {
      config: { errorForm: 'code' },
      schema: {
        tags: ['Templates'],
        summary: 'Create a template',
        body: { type: 'object', required: ['name', 'subject'], properties: fields },
        response: { 200: { type: 'object', required: ['id'], properties: { id: { type: 'string' } } } },
      },
    }, async (req) => {
      const { name, subject, html, content } = req.body;
      const res = await emails.call.createTemplate({ teamId: principalOf(req).teamId, name, subject, html, content });
      return { id: res.template!.id };
    });

    app.get<{ Params: { id: string } }>('/templates/:id', {
      config: { errorForm: 'code' },
      schema: { tags: ['Templates'], summary: 'Get a template', params: idParam, response: { 200: template } },
    }, async (req) => {
      const res = await emails.call.getTemplate({ teamId: principalOf(req).teamId, templateId: req.params.id });
      return toTemplate(res.template!);
    });

    app.patch<{ Params: { id: string }; Body: Partial<TemplateBody> }>('/templates/:id', {
      config: { errorForm: 'code' },
      schema: {
        tags: ['Templates'],
        summary: 'Change a template; only the given fields change',
        params: idParam,
        body: { type: 'object', properties: fields },
        response: { 200: successResponse },
      },
    }, async (req) => {
      const { name, subject, html, content } = req.body;
      await emails.call.updateTemplate({ teamId: principalOf(req).teamId, templateId: req.params.id, name, subject, html, content });
      return { success: true };
    });

    app.delete<{ Params: { id: string } }>('/templates/:id', {
      config: { errorForm: 'code' },
      schema: { tags: ['Templates'], summary: 'Delete a template (permanent)', params: idParam, response: { 200: successResponse } },
    }, async (req) => {
      await emails.call.deleteTemplate({ teamId: principalOf(req).teamId, templateId: req.params.id });
      return { success: true };
    });
  };
}
