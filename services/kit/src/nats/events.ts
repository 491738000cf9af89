import { randomUUID } from 'node:crypto';
import { DiscardPolicy, RetentionPolicy, StorageType, type JetStreamManager, type StreamConfig } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';

/** The internal envelope: the public one (SPEC 6.1) plus teamId. */
export interface EventEnvelope<D = Record<string, unknown>> {
  readonly id: string;
  readonly type: string;
  readonly createdAt: string;
  readonly teamId: string;
  readonly data: D;
}

export const EVENT_STREAM = 'MAILFLEET_EVENTS';
export const EVENT_SUBJECT_PREFIX = 'mailfleet';

/** `email.delivered` -> `mailfleet.email.delivered`. */
export function subjectFor(type: string): string {
  if (!/^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$/.test(type)) throw new Error(`invalid event type ${JSON.stringify(type)}`);
  return `${EVENT_SUBJECT_PREFIX}.${type}`;
}

export function newEventId(): string {
  return `evt_${randomUUID().replace(/-/g, '')}`;
}

export function createEvent<D>(type: string, teamId: string, data: D, now: Date = new Date()): EventEnvelope<D> {
  subjectFor(type);
  return { id: newEventId(), type, createdAt: now.toISOString(), teamId, data };
}

export function encodeEvent(e: EventEnvelope<unknown>): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(e));
}

export class PoisonEventError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PoisonEventError';
  }
}

export function decodeEvent(bytes: Uint8Array): EventEnvelope {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new PoisonEventError('event is not JSON');
  }
  const e = parsed as Partial<EventEnvelope>;
  if (typeof e !== 'object' || e === null || typeof e.id !== 'string' || typeof e.type !== 'string' || typeof e.teamId !== 'string'
    || typeof e.createdAt !== 'string' || typeof e.data !== 'object' || e.data === null) {
    throw new PoisonEventError('event lacks id, type, createdAt, teamId or data');
  }
  return e as EventEnvelope;
}

/** Dedup window: a republish within it (relay retry after a crash) is dropped by the server. */
export const DUPLICATE_WINDOW_MS = 10 * 60_000;

export function eventStreamConfig(overrides: Partial<StreamConfig> = {}): Partial<StreamConfig> & { name: string } {
  return {
    name: EVENT_STREAM,
    subjects: [`${EVENT_SUBJECT_PREFIX}.>`],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_age: nanos(7 * 24 * 3600_000),
    duplicate_window: nanos(DUPLICATE_WINDOW_MS),
    num_replicas: 1,
    ...overrides,
  };
}

/**
 * Declares the domain event stream; idempotent and safe to run from every
 * publisher at start. Replica count comes from configuration (a JetStream
 * cluster in production runs 3).
 */
export async function ensureEventStream(jsm: JetStreamManager, opts: { replicas?: number } = {}): Promise<void> {
  const config = eventStreamConfig({ num_replicas: opts.replicas ?? 1 });
  try {
    await jsm.streams.info(config.name);
    await jsm.streams.update(config.name, { subjects: config.subjects, max_age: config.max_age, duplicate_window: config.duplicate_window });
  } catch (err) {
    if (isNotFound(err)) {
      try {
        await jsm.streams.add(config);
      } catch (addErr) {
        // Another replica created it in between.
        if (!/already in use|exists/i.test(String((addErr as Error).message))) throw addErr;
      }
      return;
    }
    throw err;
  }
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; message?: string; code?: number | string; api_error?: { err_code?: number } };
  return e?.name === 'StreamNotFoundError' || /not found/i.test(e?.message ?? '') || e?.api_error?.err_code === 10059;
}
