import { status } from '@grpc/grpc-js';
import type { campaignsV1 } from '@mailfleet/proto';
import type { FastifyInstance } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf } from '../../../plugins/auth.plugin.js';
import { idParam, iso, successResponse, timestamp } from '../../../schemas/common.js';
import { bookSchema, strictFields, stringMap, toBook } from './contacts.schemas.js';

const listItem = {
  ...bookSchema,
  required: [...bookSchema.required, '_count'],
  properties: {
    ...bookSchema.properties,
    _count: { type: 'object', required: ['contacts'], properties: { contacts: { type: 'integer', description: 'contacts in the book' } } },
  },
} as const;

const detail = {
  ...bookSchema,
  required: [...bookSchema.required, 'details'],
  properties: {
    ...bookSchema.properties,
    details: {
      type: 'object',
      required: ['totalContacts', 'unsubscribedContacts', 'campaigns'],
      properties: {
        totalContacts: { type: 'integer' },
        unsubscribedContacts: { type: 'integer' },
        campaigns: {
          type: 'array',
          description: 'campaigns that target the book, newest first',
          items: { type: 'object', required: ['id', 'name', 'createdAt'], properties: { id: { type: 'string' }, name: { type: 'string' }, createdAt: timestamp } },
        },
      },
    },
  },
} as const;

const bookFields = {
  name: { type: 'string', minLength: 1, maxLength: 255 },
  emoji: { type: 'string', maxLength: 32 },
  properties: stringMap,
} as const;

interface BookBody {
  name: string;
  emoji?: string;
  properties?: Record<string, string>;
}

/** The campaigns service answers UNIMPLEMENTED until its issue lands: then, and only then, the book has no campaigns. */
async function bookCampaigns(upstreams: Upstreams, teamId: string, contactBookId: string): Promise<campaignsV1.BookCampaign[]> {
  try {
    return (await upstreams.campaigns.call.listCampaignsForBook({ teamId, contactBookId })).campaigns;
  } catch (err) {
    if ((err as { code?: unknown }).code === status.UNIMPLEMENTED) return [];
    throw err;
  }
}

/** SPEC 4.5: contact books; errors as `{code, message}`, 404 for a missing or another team's book. */
export function contactBooksRoutes(deps: { upstreams: Upstreams }) {
  const { contacts } = deps.upstreams;
  const config = { errorForm: 'code', rateLimit: { family: 'CONTACT' } } as const;
  const tags = ['Contact books'];
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/contactBooks', {
      config,
      schema: { tags, summary: 'List contact books, newest first, with their contact counts', response: { 200: { type: 'array', items: listItem } } },
    }, async (req) => {
      const res = await contacts.call.listContactBooks({ teamId: principalOf(req).teamId });
      return res.contactBooks.map((i) => ({ ...toBook(i.contactBook!), _count: { contacts: i.contactsCount } }));
    });

    app.post<{ Body: BookBody }>('/contactBooks', {
      config,
      preValidation: strictFields({ properties: true }),
      schema: {
        tags,
        summary: 'Create a contact book',
        body: { type: 'object', required: ['name'], additionalProperties: false, properties: bookFields },
        response: { 200: bookSchema },
      },
    }, async (req) => {
      const res = await contacts.call.createContactBook({
        teamId: principalOf(req).teamId, name: req.body.name, emoji: req.body.emoji, properties: req.body.properties ?? {},
      });
      return toBook(res.contactBook!);
    });

    app.get<{ Params: { id: string } }>('/contactBooks/:id', {
      config,
      schema: { tags, summary: 'A contact book with its totals and campaigns', params: idParam, response: { 200: detail } },
    }, async (req) => {
      const teamId = principalOf(req).teamId;
      const res = await contacts.call.getContactBook({ teamId, contactBookId: req.params.id });
      const campaigns = await bookCampaigns(deps.upstreams, teamId, req.params.id);
      return {
        ...toBook(res.contactBook!),
        details: {
          totalContacts: res.details?.totalContacts ?? 0,
          unsubscribedContacts: res.details?.unsubscribedContacts ?? 0,
          campaigns: campaigns.map((c) => ({ id: c.id, name: c.name, createdAt: iso(c.createdAt) })),
        },
      };
    });

    app.patch<{ Params: { id: string }; Body: Partial<BookBody> }>('/contactBooks/:id', {
      config,
      preValidation: strictFields({ properties: true }),
      schema: {
        tags,
        summary: 'Change a contact book; only the given fields change',
        params: idParam,
        body: { type: 'object', additionalProperties: false, properties: bookFields },
        response: { 200: { type: 'object', required: ['id', 'name'], properties: { id: { type: 'string' }, name: { type: 'string' } } } },
      },
    }, async (req) => {
      const res = await contacts.call.updateContactBook({
        teamId: principalOf(req).teamId, contactBookId: req.params.id, name: req.body.name, emoji: req.body.emoji,
        properties: req.body.properties === undefined ? undefined : { values: req.body.properties },
      });
      return { id: res.contactBook!.id, name: res.contactBook!.name };
    });

    app.delete<{ Params: { id: string } }>('/contactBooks/:id', {
      config,
      schema: { tags, summary: 'Delete a contact book and all its contacts, permanently', params: idParam, response: { 200: successResponse } },
    }, async (req) => {
      await contacts.call.deleteContactBook({ teamId: principalOf(req).teamId, contactBookId: req.params.id });
      return { success: true };
    });
  };
}
