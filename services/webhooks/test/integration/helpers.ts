import { createHmac } from 'node:crypto';
import { createServer } from 'node:net';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createEvent, encodeEvent, subjectFor, type EventEnvelope } from '@mailfleet/kit';
import type { RecordedRequest } from '@mailfleet/testkit';

/** Publishes events the way the outbox relay does: on mailfleet.<type>, message id = event id. */
export interface Publisher {
  publish(type: string, teamId: string, data?: Record<string, unknown>): Promise<EventEnvelope>;
  /** The same event again under another message id (past the server's duplicate window). */
  republish(e: EventEnvelope, msgID: string): Promise<void>;
  close(): Promise<void>;
}

export async function connectPublisher(natsUrl: string): Promise<Publisher> {
  const nc: NatsConnection = await connect({ servers: natsUrl });
  const js: JetStreamClient = jetstream(nc);
  return {
    async publish(type, teamId, data = { id: `dom_${Math.random().toString(36).slice(2)}`, name: 'example.test' }) {
      const e = createEvent(type, teamId, data) as EventEnvelope;
      await js.publish(subjectFor(type), encodeEvent(e), { msgID: e.id });
      return e;
    },
    async republish(e, msgID) {
      await js.publish(subjectFor(e.type), encodeEvent(e), { msgID });
    },
    close: () => nc.close(),
  };
}

/** What a receiver does before parsing (SPEC 6.4): HMAC of the raw body, compared with the header. */
export function signatureValid(req: RecordedRequest, secret: string): boolean {
  const expected = `sha256=${createHmac('sha256', secret).update(req.rawBody).digest('hex')}`;
  return req.headers['x-service-signature'] === expected;
}

export function bodyOf(req: RecordedRequest): { id: string; type: string; createdAt: string; data: Record<string, unknown> } {
  return JSON.parse(req.rawBody.toString('utf8')) as { id: string; type: string; createdAt: string; data: Record<string, unknown> };
}

export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as { port: number }).port;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

let seq = 0;
export const newTeamId = (): string => `team_it_${Date.now().toString(36)}_${++seq}`;
