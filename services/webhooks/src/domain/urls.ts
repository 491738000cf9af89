import { isIP } from 'node:net';
import { InvalidArgumentError } from '@mailfleet/kit';

export const MAX_URL_LENGTH = 2048;

/** The parts of a webhook URL the sender needs. `host` is bare (an IPv6 literal without brackets). */
export interface WebhookTarget {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** Path and query, as sent. */
  readonly path: string;
  /** True when the host is an IP address literal (no DNS, no SNI). */
  readonly isIpLiteral: boolean;
}

/**
 * Parses and normalises a webhook URL: absolute, HTTPS only, a host, no
 * credentials (they would end up in logs and responses), no fragment (never
 * sent). Throws InvalidArgumentError with a message for the API caller.
 */
export function parseWebhookUrl(raw: string): WebhookTarget {
  const text = raw.trim();
  if (text.length === 0) throw new InvalidArgumentError('url is required');
  if (text.length > MAX_URL_LENGTH) throw new InvalidArgumentError(`url must be at most ${MAX_URL_LENGTH} characters`);
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new InvalidArgumentError('url must be an absolute HTTPS URL');
  }
  if (u.protocol !== 'https:') throw new InvalidArgumentError('url must be an HTTPS URL (https://...)');
  if (!u.hostname) throw new InvalidArgumentError('url must name a host');
  if (u.username || u.password) throw new InvalidArgumentError('url must not contain credentials');
  u.hash = '';
  const host = u.hostname.startsWith('[') && u.hostname.endsWith(']') ? u.hostname.slice(1, -1) : u.hostname;
  return {
    url: u.toString(),
    host,
    port: u.port ? Number(u.port) : 443,
    path: `${u.pathname}${u.search}`,
    isIpLiteral: isIP(host) !== 0,
  };
}
