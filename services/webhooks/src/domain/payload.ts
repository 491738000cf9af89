import { TEST_EVENT_TYPE } from './event-types.js';

/** What a delivery carries: the event without teamId (SPEC 6.1). */
export interface PublicEnvelope {
  readonly id: string;
  readonly type: string;
  readonly createdAt: string;
  readonly data: unknown;
}

/**
 * The exact body of every attempt of a delivery: serialised once when the
 * delivery is made, so every attempt (and every signature) covers the same bytes.
 */
export function serializePayload(event: PublicEnvelope): string {
  return JSON.stringify({ id: event.id, type: event.type, createdAt: event.createdAt, data: event.data });
}

export const TEST_MESSAGE = 'This is a test event from mailfleet. If you can read this, your endpoint works.';

export function testEnvelope(id: string, now: Date): PublicEnvelope {
  return { id, type: TEST_EVENT_TYPE, createdAt: now.toISOString(), data: { message: TEST_MESSAGE } };
}
