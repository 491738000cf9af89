import createClient from 'openapi-fetch';
import type { paths } from './schema';

/** Same origin as the gateway: the session cookie goes with every call, the browser adds Origin. */
export const api = createClient<paths>({ baseUrl: '', credentials: 'same-origin' });

/** An API error with the message the gateway sent, whatever its error form. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/**
 * The gateway answers errors in the form each route's SPEC asks for: `{code, message}`,
 * `{error: {code, message}}`, `{error: "..."}` or `{success: false, message}`.
 */
export function errorMessage(body: unknown, status: number): { message: string; code?: string } {
  if (body && typeof body === 'object') {
    const b = body as Record<string, unknown>;
    if (b.error && typeof b.error === 'object') {
      const e = b.error as Record<string, unknown>;
      if (typeof e.message === 'string') return { message: e.message, code: typeof e.code === 'string' ? e.code : undefined };
    }
    if (typeof b.message === 'string') return { message: b.message, code: typeof b.code === 'string' ? b.code : undefined };
    if (typeof b.error === 'string') return { message: b.error };
  }
  if (typeof body === 'string' && body) return { message: body };
  return { message: `Request failed (HTTP ${status})` };
}

/** Unwraps an openapi-fetch result: the data, or an ApiError carrying the API's message. */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok) {
    const { message, code } = errorMessage(error, response.status);
    throw new ApiError(response.status, message, code);
  }
  return data as T;
}
