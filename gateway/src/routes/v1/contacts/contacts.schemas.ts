import type { contactsV1 } from '@mailfleet/proto';
import { GatewayError } from '../../../plugins/errors.plugin.js';
import { iso, nullableString, timestamp } from '../../../schemas/common.js';

/** Custom string properties (SPEC 2.9, 2.10): every value a string. */
export const stringMap = { type: 'object', additionalProperties: { type: 'string' } } as const;

/** SPEC 2.9. */
export const contactSchema = {
  type: 'object',
  required: ['id', 'email', 'firstName', 'lastName', 'subscribed', 'properties', 'contactBookId', 'createdAt', 'updatedAt'],
  properties: {
    id: { type: 'string' },
    email: { type: 'string', description: 'normalised: trimmed, lower case' },
    firstName: nullableString,
    lastName: nullableString,
    subscribed: { type: 'boolean', description: 'false: the contact receives no email' },
    properties: stringMap,
    contactBookId: { type: 'string' },
    createdAt: timestamp,
    updatedAt: timestamp,
  },
} as const;

/** SPEC 2.10 without the list/get extras; timestamps carry milliseconds. */
export const bookSchema = {
  type: 'object',
  required: ['id', 'name', 'emoji', 'teamId', 'properties', 'createdAt', 'updatedAt'],
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    emoji: { type: 'string' },
    teamId: { type: 'string' },
    properties: stringMap,
    createdAt: timestamp,
    updatedAt: timestamp,
  },
} as const;

export function toContact(c: contactsV1.Contact) {
  return {
    id: c.id,
    email: c.email,
    firstName: c.firstName ?? null,
    lastName: c.lastName ?? null,
    subscribed: c.subscribed,
    properties: c.properties,
    contactBookId: c.contactBookId,
    createdAt: iso(c.createdAt),
    updatedAt: iso(c.updatedAt),
  };
}

export function toBook(b: contactsV1.ContactBook) {
  return { id: b.id, name: b.name, emoji: b.emoji, teamId: b.teamId, properties: b.properties, createdAt: iso(b.createdAt), updatedAt: iso(b.updatedAt) };
}

/**
 * Type checks made on the raw JSON before schema validation. The gateway's
 * validator coerces scalars (`1` becomes `"1"`), which is right for query
 * strings but would let a property value of another type through: SPEC 2.9
 * says every property value is a string, so anything else is refused.
 * Returns the problem, or undefined when the fields present have their types.
 */
export function rawFieldProblem(body: unknown, fields: { names?: boolean; subscribed?: boolean; properties?: boolean; email?: boolean }): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined; // the schema reports it
  const b = body as Record<string, unknown>;
  if (fields.email && 'email' in b && typeof b.email !== 'string') return 'email must be a string';
  if (fields.names) {
    for (const f of ['firstName', 'lastName'] as const) {
      if (f in b && b[f] !== null && typeof b[f] !== 'string') return `${f} must be a string or null`;
    }
  }
  if (fields.subscribed && 'subscribed' in b && typeof b.subscribed !== 'boolean') return 'subscribed must be a boolean';
  if (fields.properties && 'properties' in b) {
    const p = b.properties;
    if (typeof p !== 'object' || p === null || Array.isArray(p)) return 'properties must be an object of strings';
    for (const [k, v] of Object.entries(p)) if (typeof v !== 'string') return `properties.${k} must be a string`;
  }
  return undefined;
}

/** A preValidation hook that refuses mistyped fields with a 400 in the route's error form. */
export function strictFields(fields: Parameters<typeof rawFieldProblem>[1]) {
  return async (request: { body: unknown }): Promise<void> => {
    const problem = rawFieldProblem(request.body, fields);
    if (problem) throw new GatewayError(400, problem, 'BAD_REQUEST');
  };
}

/** An optional name as the RPC takes it: null (clear) travels as "", absent stays absent. */
export function nameField(v: string | null | undefined): string | undefined {
  return v === null ? '' : v;
}

export function propertiesField(p: Record<string, string> | undefined): contactsV1.Properties | undefined {
  return p === undefined ? undefined : { values: p };
}
