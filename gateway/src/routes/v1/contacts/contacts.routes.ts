import type { contactsV1 } from '@mailfleet/proto';
import type { FastifyInstance } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf } from '../../../plugins/auth.plugin.js';
import { GatewayError } from '../../../plugins/errors.plugin.js';
import { pageParam, successResponse } from '../../../schemas/common.js';
import { contactBooksRoutes } from './contact-books.routes.js';
import { contactSchema, nameField, propertiesField, rawFieldProblem, strictFields, stringMap, toContact } from './contacts.schemas.js';

/** SPEC 8 default page size of contacts, and the cap above which a page is refused (400). */
const DEFAULT_LIMIT = 5000;
const MAX_LIMIT = 10_000;
const BULK_MAX = 1000;

const bookParam = {
  type: 'object',
  required: ['contactBookId'],
  properties: { contactBookId: { type: 'string', minLength: 1, maxLength: 200 } },
} as const;
const contactParams = {
  type: 'object',
  required: ['contactBookId', 'contactId'],
  properties: { contactBookId: { type: 'string', minLength: 1, maxLength: 200 }, contactId: { type: 'string', minLength: 1, maxLength: 200 } },
} as const;

const name = { type: ['string', 'null'], maxLength: 256 } as const;
const changeFields = {
  firstName: name,
  lastName: name,
  subscribed: { type: 'boolean', description: 'false: the contact receives no email (and the address is suppressed)' },
  properties: stringMap,
} as const;
const inputFields = { email: { type: 'string', minLength: 1, maxLength: 320 }, ...changeFields } as const;
const contactIdResponse = { type: 'object', required: ['contactId'], properties: { contactId: { type: 'string' } } } as const;

interface ChangeBody {
  firstName?: string | null;
  lastName?: string | null;
  subscribed?: boolean;
  properties?: Record<string, string>;
}
interface InputBody extends ChangeBody {
  email: string;
}
type BookParams = { contactBookId: string };
type ContactParams = BookParams & { contactId: string };

function toInput(b: InputBody): contactsV1.ContactInput {
  return { email: b.email, firstName: nameField(b.firstName), lastName: nameField(b.lastName), subscribed: b.subscribed, properties: propertiesField(b.properties) };
}

function csv(v: string | undefined): string[] {
  return (v ?? '').split(',').map((s) => s.trim()).filter((s) => s.length > 0);
}

const bulkItemError = {
  type: 'object',
  required: ['index', 'email', 'code', 'message'],
  properties: {
    index: { type: 'integer', description: 'position of the item in the request' },
    email: { type: 'string' },
    code: { type: 'string', description: 'INVALID_EMAIL, INVALID_NAME, INVALID_PROPERTIES, INVALID_FIELD, DUPLICATE_IN_BATCH or CONFLICT' },
    message: { type: 'string' },
  },
} as const;

interface ItemError {
  index: number;
  email: string;
  code: string;
  message: string;
}

const ITEM_FIELDS = new Set(['email', 'firstName', 'lastName', 'subscribed', 'properties']);

/** The per-item checks of a bulk upsert that the gateway makes (types); the service checks the values. */
function bulkItemProblem(item: unknown): { code: string; message: string } | undefined {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) return { code: 'INVALID_FIELD', message: 'each item must be an object' };
  const o = item as Record<string, unknown>;
  if (typeof o.email !== 'string' || o.email.trim() === '') return { code: 'INVALID_EMAIL', message: 'email is required and must be a string' };
  const unknown = Object.keys(o).find((k) => !ITEM_FIELDS.has(k));
  if (unknown) return { code: 'INVALID_FIELD', message: `unknown field ${unknown}` };
  const problem = rawFieldProblem(o, { names: true, subscribed: true, properties: true });
  if (!problem) return undefined;
  return { code: problem.startsWith('properties') ? 'INVALID_PROPERTIES' : problem.startsWith('subscribed') ? 'INVALID_FIELD' : 'INVALID_NAME', message: problem };
}

/**
 * SPEC 4.4 contacts (errors as `{error: {code, message}}`) plus the useSend
 * bulk endpoints, and SPEC 4.5 contact books. Contact operations count
 * against CONTACT; the list (bulk retrieval) against BULK_CONTACT.
 */
export function contactsRoutes(deps: { upstreams: Upstreams }) {
  const { contacts } = deps.upstreams;
  const config = { errorForm: 'nested', rateLimit: { family: 'CONTACT' } } as const;
  const tags = ['Contacts'];
  return async (app: FastifyInstance): Promise<void> => {
    await contactBooksRoutes(deps)(app);

    app.get<{ Params: BookParams; Querystring: { page: number; limit: number; emails?: string; ids?: string } }>('/contactBooks/:contactBookId/contacts', {
      config: { errorForm: 'nested', rateLimit: { family: 'BULK_CONTACT' } },
      schema: {
        tags,
        summary: 'List a book\'s contacts, oldest first; filters combine with paging',
        params: bookParam,
        querystring: {
          type: 'object',
          properties: {
            page: pageParam,
            limit: { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT },
            emails: { type: 'string', description: 'comma-separated addresses (case-insensitive)' },
            ids: { type: 'string', description: 'comma-separated contact ids' },
          },
        },
        response: { 200: { type: 'array', items: contactSchema } },
      },
    }, async (req) => {
      const res = await contacts.call.listContacts({
        teamId: principalOf(req).teamId, contactBookId: req.params.contactBookId, page: req.query.page, limit: req.query.limit,
        emails: csv(req.query.emails), ids: csv(req.query.ids),
      }, { deadlineMs: 30_000 }); // a page holds up to 10000 contacts
      return res.contacts.map(toContact);
    });

    app.post<{ Params: BookParams; Body: InputBody }>('/contactBooks/:contactBookId/contacts', {
      config,
      preValidation: strictFields({ email: true, names: true, subscribed: true, properties: true }),
      schema: {
        tags,
        summary: 'Add a contact; 409 when the book already has the address',
        params: bookParam,
        body: { type: 'object', required: ['email'], additionalProperties: false, properties: inputFields },
        response: { 200: contactIdResponse },
      },
    }, async (req) => {
      const res = await contacts.call.createContact({ teamId: principalOf(req).teamId, contactBookId: req.params.contactBookId, contact: toInput(req.body) });
      return { contactId: res.contact!.id };
    });

    app.post<{ Params: BookParams; Body: unknown[] }>('/contactBooks/:contactBookId/contacts/bulk', {
      config,
      schema: {
        tags,
        summary: 'Create or update up to 1000 contacts by email; invalid items are reported, the others stored',
        params: bookParam,
        // Items are only required to be objects here: a mistyped item is an item error, not a failed request.
        body: {
          type: 'array',
          minItems: 1,
          maxItems: BULK_MAX,
          items: { type: 'object', description: 'a contact: email (required), firstName, lastName, subscribed, properties, as for POST .../contacts' },
        },
        response: {
          200: {
            type: 'object',
            required: ['message', 'count', 'created', 'updated', 'errors'],
            properties: {
              message: { type: 'string' },
              count: { type: 'integer', description: 'contacts stored (created + updated)' },
              created: { type: 'integer' },
              updated: { type: 'integer' },
              errors: { type: 'array', items: bulkItemError },
            },
          },
        },
      },
    }, async (req) => {
      const errors: ItemError[] = [];
      const sent: number[] = [];
      const items: contactsV1.ContactInput[] = [];
      req.body.forEach((item, index) => {
        const problem = bulkItemProblem(item);
        const email = String((item as { email?: unknown } | null)?.email ?? '');
        if (problem) {
          errors.push({ index, email, ...problem });
          return;
        }
        sent.push(index);
        items.push(toInput(item as InputBody));
      });
      let created = 0;
      let updated = 0;
      if (items.length > 0) {
        const res = await contacts.call.bulkUpsertContacts({ teamId: principalOf(req).teamId, contactBookId: req.params.contactBookId, contacts: items }, { deadlineMs: 60_000 });
        created = res.createdCount;
        updated = res.updatedCount;
        for (const e of res.errors) errors.push({ index: sent[e.index] ?? e.index, email: e.email, code: e.code, message: e.message });
      } else {
        // Nothing valid to store: the book must still exist and be the team's.
        await contacts.call.getContactBook({ teamId: principalOf(req).teamId, contactBookId: req.params.contactBookId });
      }
      errors.sort((a, b) => a.index - b.index);
      const count = created + updated;
      return {
        message: `${count} contact${count === 1 ? '' : 's'} stored (${created} created, ${updated} updated), ${errors.length} failed`,
        count, created, updated, errors,
      };
    });

    app.delete<{ Params: BookParams; Body: { contactIds: string[] } }>('/contactBooks/:contactBookId/contacts/bulk', {
      config,
      schema: {
        tags,
        summary: 'Delete up to 1000 contacts by id; unknown ids are ignored',
        params: bookParam,
        body: {
          type: 'object',
          required: ['contactIds'],
          additionalProperties: false,
          properties: { contactIds: { type: 'array', minItems: 1, maxItems: BULK_MAX, items: { type: 'string', minLength: 1, maxLength: 200 } } },
        },
        response: { 200: { type: 'object', required: ['success', 'count'], properties: { success: { type: 'boolean', const: true }, count: { type: 'integer' } } } },
      },
    }, async (req) => {
      const res = await contacts.call.bulkDeleteContacts({
        teamId: principalOf(req).teamId, contactBookId: req.params.contactBookId, contactIds: req.body.contactIds, emails: [],
      }, { deadlineMs: 60_000 });
      return { success: true, count: res.deletedCount };
    });

    app.get<{ Params: ContactParams }>('/contactBooks/:contactBookId/contacts/:contactId', {
      config,
      schema: { tags, summary: 'A contact', params: contactParams, response: { 200: contactSchema } },
    }, async (req) => {
      const res = await contacts.call.getContact({ teamId: principalOf(req).teamId, contactBookId: req.params.contactBookId, contactId: req.params.contactId });
      return toContact(res.contact!);
    });

    app.patch<{ Params: ContactParams; Body: ChangeBody & { email?: unknown } }>('/contactBooks/:contactBookId/contacts/:contactId', {
      config,
      preValidation: [
        async (req: { body: unknown }) => {
          if (typeof req.body === 'object' && req.body !== null && 'email' in req.body) {
            throw new GatewayError(400, 'The email of a contact cannot be changed; PUT upserts a contact by email', 'BAD_REQUEST');
          }
        },
        strictFields({ names: true, subscribed: true, properties: true }),
      ],
      schema: {
        tags,
        summary: 'Change a contact; only the given fields change, never the email',
        params: contactParams,
        body: { type: 'object', additionalProperties: false, properties: changeFields },
        response: { 200: contactIdResponse },
      },
    }, async (req) => {
      const b = req.body ?? {};
      const res = await contacts.call.updateContact({
        teamId: principalOf(req).teamId, contactBookId: req.params.contactBookId, contactId: req.params.contactId,
        firstName: nameField(b.firstName), lastName: nameField(b.lastName), subscribed: b.subscribed, properties: propertiesField(b.properties),
      });
      return { contactId: res.contact!.id };
    });

    app.put<{ Params: ContactParams; Body: InputBody }>('/contactBooks/:contactBookId/contacts/:contactId', {
      config,
      preValidation: strictFields({ email: true, names: true, subscribed: true, properties: true }),
      schema: {
        tags,
        summary: 'Create or update the contact with this email (the path id does not identify it)',
        params: contactParams,
        body: { type: 'object', required: ['email'], additionalProperties: false, properties: inputFields },
        response: { 200: contactIdResponse },
      },
    }, async (req) => {
      const res = await contacts.call.upsertContact({ teamId: principalOf(req).teamId, contactBookId: req.params.contactBookId, contact: toInput(req.body) });
      return { contactId: res.contact!.id };
    });

    app.delete<{ Params: ContactParams }>('/contactBooks/:contactBookId/contacts/:contactId', {
      config,
      schema: { tags, summary: 'Delete a contact', params: contactParams, response: { 200: successResponse } },
    }, async (req) => {
      await contacts.call.deleteContact({ teamId: principalOf(req).teamId, contactBookId: req.params.contactBookId, contactId: req.params.contactId });
      return { success: true };
    });
  };
}
