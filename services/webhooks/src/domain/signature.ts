import { createHmac } from 'node:crypto';

export const SIGNATURE_HEADER = 'X-Service-Signature';

/** SPEC 6.4: `sha256=` and the lowercase hex HMAC-SHA256 of the exact body bytes, keyed with the webhook secret. */
export function signBody(secret: string, body: Buffer | string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** Headers of every delivery: the signature over the exact body, and the event's id and type for receivers that route or deduplicate before parsing. */
export function deliveryHeaders(secret: string, body: string, event: { id: string; type: string }): Record<string, string> {
  return {
    [SIGNATURE_HEADER]: signBody(secret, body),
    'X-Service-Event-Id': event.id,
    'X-Service-Event-Type': event.type,
  };
}
