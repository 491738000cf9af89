/**
 * Custom headers (`headers` in the send body). Refused: names that are not
 * RFC 5322 field names, values that could start a new header or break the
 * message (line breaks, NUL and other control characters, over-long lines),
 * and names the platform sets itself or that would let a sender pass for
 * someone else or forge our own trace and authentication headers.
 */
const FIELD_NAME = /^[\x21-\x39\x3b-\x7e]{1,76}$/;
// eslint-disable-next-line no-control-regex -- control characters (tab allowed) are exactly what is refused
const BAD_VALUE = /[\u0000-\u0008\u000a-\u001f\u007f]/;

/** Set by the platform (addressing, structure, identity) or by relays and receivers. */
const RESERVED = new Set([
  'from', 'sender', 'to', 'cc', 'bcc', 'reply-to', 'subject', 'date', 'message-id', 'in-reply-to', 'references',
  'mime-version', 'content-type', 'content-transfer-encoding', 'content-disposition', 'content-id', 'content-description',
  'return-path', 'received', 'received-spf', 'dkim-signature', 'domainkey-signature', 'authentication-results',
  'arc-seal', 'arc-message-signature', 'arc-authentication-results', 'delivered-to', 'envelope-to', 'x-original-to',
  'resent-from', 'resent-sender', 'resent-to', 'resent-cc', 'resent-bcc', 'resent-date', 'resent-message-id',
  'disposition-notification-to', 'return-receipt-to', 'errors-to', 'bounces-to',
]);
const RESERVED_PREFIXES = ['x-mailfleet-', 'arc-', 'resent-'];

export const MAX_CUSTOM_HEADERS = 50;
const MAX_VALUE_LENGTH = 995 - 76;

/** Why a header is refused, or undefined when it may be sent. */
export function headerProblem(name: string, value: string): string | undefined {
  if (!FIELD_NAME.test(name)) return `header name ${JSON.stringify(name)} is not a valid header field name`;
  const lower = name.toLowerCase();
  if (RESERVED.has(lower) || RESERVED_PREFIXES.some((p) => lower.startsWith(p))) {
    return `header ${name} is set by mailfleet and cannot be overridden (use the matching field of the request, e.g. replyTo, cc, inReplyToId)`;
  }
  if (BAD_VALUE.test(value)) return `header ${name} must not contain line breaks or control characters`;
  if (value.length > MAX_VALUE_LENGTH) return `header ${name} is longer than ${MAX_VALUE_LENGTH} characters`;
  return undefined;
}

/** Validates the whole map; the first problem found. */
export function headersProblem(headers: Readonly<Record<string, string>>): string | undefined {
  const entries = Object.entries(headers);
  if (entries.length > MAX_CUSTOM_HEADERS) return `at most ${MAX_CUSTOM_HEADERS} custom headers`;
  const seen = new Set<string>();
  for (const [name, value] of entries) {
    const p = headerProblem(name, value);
    if (p) return p;
    const lower = name.toLowerCase();
    if (seen.has(lower)) return `header ${name} is given twice`;
    seen.add(lower);
  }
  return undefined;
}
