import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from '../logger.js';
import { createAckedPublisher, type PublishAck } from './publish.js';

export interface NatsHandle {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  /**
   * Publishes an event to its stream with `Nats-Msg-Id` (the stream's dedup) and resolves with the stream's ack;
   * every publish of the connection shares one reply subscription.
   */
  publishEvent(subject: string, data: Uint8Array, opts: { msgID: string; timeoutMs: number }): Promise<PublishAck>;
  /** Resolves when the server answers a round trip within the time limit. */
  ping(timeoutMs?: number): Promise<void>;
  /** Drains subscriptions and pending publishes, then closes. */
  drain(): Promise<void>;
}

/** Connects with unlimited reconnects: a restarted NATS must not take the process down. */
export async function connectNats(opts: { url: string; name: string; logger: Logger }): Promise<NatsHandle> {
  const nc = await connect({
    servers: opts.url.split(','),
    name: opts.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    pingInterval: 10_000,
    // Every request (each JetStream publish waits for its ack) would otherwise build two Error objects up front
    // to keep the caller's stack for a timeout: a few % of the emails service's CPU under load. Errors still
    // carry their message and cause.
    noAsyncTraces: true,
  });
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' || s.type === 'reconnect') opts.logger.warn({ nats: s.type }, 'nats connection status');
    }
  })().catch(() => undefined);
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  return {
    nc,
    js,
    jsm,
    publishEvent: createAckedPublisher(nc).publish,
    async ping(timeoutMs = 2_000) {
      if (nc.isClosed()) throw new Error('nats connection closed');
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          nc.rtt(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error('nats did not answer in time')), timeoutMs);
          }),
        ]);
      } finally {
        clearTimeout(timer);
      }
    },
    async drain() {
      if (nc.isClosed()) return;
      try {
        await nc.drain();
      } catch {
        await nc.close();
      }
    },
  };
}
