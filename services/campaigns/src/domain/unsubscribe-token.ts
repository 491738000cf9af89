import { createHmac, timingSafeEqual } from 'node:crypto';

/** Who an unsubscribe link is for. */
export interface UnsubscribeTarget {
  readonly teamId: string;
  readonly campaignId: string;
  readonly contactId: string;
}

const SIG_LENGTH = 32;

function keyFor(master: string): string {
  return createHmac('sha256', master).update('mailfleet campaign-unsubscribe v1').digest('hex');
}

function sign(master: string, payload: string): string {
  return createHmac('sha256', keyFor(master)).update(`unsub.${payload}`).digest('base64url').slice(0, SIG_LENGTH);
}

/** A URL-safe signed token naming team, campaign and contact. */
export function createUnsubscribeToken(master: string, t: UnsubscribeTarget): string {
  const payload = Buffer.from(JSON.stringify([t.teamId, t.campaignId, t.contactId]), 'utf8').toString('base64url');
  return `${payload}.${sign(master, payload)}`;
}

/** The target of a genuine token, undefined for anything forged or malformed. */
export function verifyUnsubscribeToken(master: string, token: string): UnsubscribeTarget | undefined {
  const dot = token.indexOf('.');
  if (dot <= 0) return undefined;
  const payload = token.slice(0, dot);
  const sig = Buffer.from(token.slice(dot + 1));
  const expected = Buffer.from(sign(master, payload));
  if (sig.length !== expected.length || !timingSafeEqual(sig, expected)) return undefined;
  try {
    const v: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    if (!Array.isArray(v) || v.length !== 3 || v.some((x) => typeof x !== 'string' || !x)) return undefined;
    const [teamId, campaignId, contactId] = v as [string, string, string];
    return { teamId, campaignId, contactId };
  } catch {
    return undefined;
  }
}

/**
 * The public link (`PUBLIC_URL/v1/campaigns/unsubscribe?token=<token>`); the same URL takes the RFC 8058
 * POST. The token is in the query: path parameters are limited to 100 characters by the gateway's router.
 */
export function unsubscribeUrl(publicUrl: string, token: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/v1/campaigns/unsubscribe?token=${token}`;
}
