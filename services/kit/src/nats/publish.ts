import { createInbox, headers, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';

/** The stream's answer to a publish. */
export interface PublishAck {
  readonly stream: string;
  readonly seq: number;
  /** The stream had this message id already (within its duplicate window): stored once. */
  readonly duplicate: boolean;
}

export interface AckedPublisher {
  /**
   * Publishes to a JetStream subject with `Nats-Msg-Id`, and resolves once the stream stored it (or knew the id).
   * Rejects when the stream refuses it, when no stream takes the subject, or after `timeoutMs`.
   */
  publish(subject: string, data: Uint8Array, opts: { msgID: string; timeoutMs: number }): Promise<PublishAck>;
}

interface Waiting {
  readonly subject: string;
  readonly resolve: (ack: PublishAck) => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/**
 * JetStream publishes whose acks come back on one subscription: each publish names `<inbox>.<n>` as its reply
 * subject, and one wildcard subscription hands each ack to its publish (the way the Go client's PublishAsync
 * works). `js.publish` makes each publish a request of its own: a reply subscription entry, a deferred, a timer
 * and, once answered, an Error built (stack trace and all) to cancel what was already resolved.
 */
export function createAckedPublisher(nc: NatsConnection): AckedPublisher {
  const inbox = createInbox();
  const waiting = new Map<string, Waiting>();
  let sub: Subscription | undefined;
  let next = 0;
  const decoder = new TextDecoder();

  function settle(token: string, outcome: PublishAck | Error): void {
    const w = waiting.get(token);
    if (!w) return;
    waiting.delete(token);
    clearTimeout(w.timer);
    if (outcome instanceof Error) w.reject(outcome);
    else w.resolve(outcome);
  }

  function onReply(err: Error | null, msg: Msg): void {
    if (err) {
      // The subscription itself failed (the connection closed): every publish still waiting fails.
      for (const token of [...waiting.keys()]) settle(token, err);
      sub = undefined;
      return;
    }
    const token = msg.subject.slice(inbox.length + 1);
    const w = waiting.get(token);
    if (!w) return;
    if (msg.data.length === 0 && msg.headers?.code === 503) {
      settle(token, new Error(`no JetStream stream takes ${w.subject}`));
      return;
    }
    try {
      const ack = JSON.parse(decoder.decode(msg.data)) as { stream?: string; seq?: number; duplicate?: boolean; error?: { code?: number; err_code?: number; description?: string } };
      if (ack.error) settle(token, new Error(`JetStream refused a publish to ${w.subject}: ${ack.error.description ?? 'no description'} (${ack.error.err_code ?? ack.error.code ?? '?'})`));
      else if (!ack.stream) settle(token, new Error(`JetStream answered a publish to ${w.subject} without a stream`));
      else settle(token, { stream: ack.stream, seq: ack.seq ?? 0, duplicate: ack.duplicate === true });
    } catch (e) {
      settle(token, e instanceof Error ? e : new Error(String(e)));
    }
  }

  return {
    publish(subject, data, opts) {
      return new Promise<PublishAck>((resolve, reject) => {
        const token = String(next++);
        try {
          sub ??= nc.subscribe(`${inbox}.*`, { callback: onReply });
          const h = headers();
          h.set('Nats-Msg-Id', opts.msgID);
          nc.publish(subject, data, { reply: `${inbox}.${token}`, headers: h });
        } catch (e) {
          reject(e instanceof Error ? e : new Error(String(e)));
          return;
        }
        // The ack is read from the socket on a later turn of the event loop, never before this.
        const timer = setTimeout(() => settle(token, new Error(`no JetStream ack for a publish to ${subject} within ${opts.timeoutMs} ms`)), opts.timeoutMs);
        waiting.set(token, { subject, resolve, reject, timer });
      });
    },
  };
}
