// Pure helpers of the sign-in and invite pages (unit-tested without a browser).

/** Only same-app paths: `next` comes from the URL and must not send the user to another site. */
export function safeNext(next: string | null): string {
  return next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/';
}

/** The token travels in the fragment (`/invite#token=mfi_…`): never sent to a server or in a Referer. */
export function inviteToken(hash: string): string | null {
  return new URLSearchParams(hash.replace(/^#/, '')).get('token');
}

/**
 * The message of an API error body, whatever the form its route's SPEC asks for: `{code, message}`,
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
