import createClient from 'openapi-fetch';
import { errorMessage } from '../lib/links';
import type { paths } from './schema';

export { errorMessage };

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

/** Unwraps an openapi-fetch result: the data, or an ApiError carrying the API's message. */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok) {
    const { message, code } = errorMessage(error, response.status);
    throw new ApiError(response.status, message, code);
  }
  return data as T;
}
