/** Reusable JSON schemas for route definitions (they also feed the OpenAPI document). */
export const idParam = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 200 } },
} as const;

export const successResponse = {
  type: 'object',
  required: ['success'],
  properties: { success: { type: 'boolean', const: true } },
} as const;

export const errorCodeResponse = {
  type: 'object',
  required: ['code', 'message'],
  properties: { code: { type: 'string' }, message: { type: 'string' } },
} as const;

export const nullableString = { type: ['string', 'null'] } as const;
export const timestamp = { type: 'string', format: 'date-time' } as const;
export const nullableTimestamp = { type: ['string', 'null'], format: 'date-time' } as const;

/** ISO string of an optional Date (protobuf Timestamp), or null. */
export function iso(d: Date | undefined): string | null {
  return d ? d.toISOString() : null;
}

/** The largest page number: page travels to the services as an int32. */
export const MAX_PAGE = 2_147_483_647;

/** The `page` query parameter of every paged list (1-based). */
export const pageParam = { type: 'integer', minimum: 1, maximum: MAX_PAGE, default: 1 } as const;
