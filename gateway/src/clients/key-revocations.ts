import { DeliverPolicy, type ConsumerMessages } from '@nats-io/jetstream';
import { decodeEvent, EVENT_STREAM, type Logger, type NatsHandle } from '@mailfleet/kit';
import type { AuthCache } from './auth-cache.js';

export interface KeyRevocationOptions {
  nats: NatsHandle;
  cache: AuthCache;
  logger: Logger;
  /** How long one proof that the connection is live lets the cache keep its long TTL. */
  leaseMs?: number;
  /** How often the connection is probed (a PING answered by the server); well under leaseMs. */
  probeMs?: number;
}

/**
 * Every gateway replica hears every `key.revoked` (an ordered consumer of its
 * own, from "now": nothing older can be in a fresh cache) and drops the key
 * from its cache. The cache keeps its long TTL only on a lease: while the
 * consumer runs and the server answered a PING within `leaseMs`. A connection
 * cut off without a disconnect (a hung peer, a network partition: the client
 * notices only after its ping interval) thus stops the long TTL within
 * `leaseMs`, and the cache falls back to its short bound. The server delivers
 * on one connection in order, so a PONG also means the events sent before it
 * were received.
 */
export function listenForKeyRevocations(opts: KeyRevocationOptions): { stop(): Promise<void> } {
  const leaseMs = opts.leaseMs ?? 1_000;
  const probeMs = opts.probeMs ?? 250;
  let stopped = false;
  let consuming = false;
  let probing = false;
  let messages: ConsumerMessages | undefined;

  const statusLoop = (async () => {
    for await (const s of opts.nats.nc.status()) {
      if (s.type === 'disconnect') opts.cache.setTrusted(false);
    }
  })().catch(() => undefined);

  const probe = setInterval(() => {
    if (!consuming || probing || stopped) return;
    probing = true;
    // A flush that never answers (a cut-off connection) gives up after a while so probing resumes.
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((r) => { timer = setTimeout(() => r(false), 5 * leaseMs); });
    void Promise.race([opts.nats.nc.flush().then(() => true, () => false), timeout])
      .then((live) => {
        if (live && consuming && !stopped) opts.cache.trustFor(leaseMs);
      })
      .finally(() => {
        clearTimeout(timer);
        probing = false;
      });
  }, probeMs);
  probe.unref();

  const loop = (async () => {
    while (!stopped) {
      try {
        const consumer = await opts.nats.js.consumers.get(EVENT_STREAM, { filter_subjects: ['mailfleet.key.revoked'], deliver_policy: DeliverPolicy.New });
        messages = await consumer.consume();
        consuming = true;
        opts.cache.trustFor(leaseMs);
        for await (const m of messages) {
          try {
            const e = decodeEvent(m.data);
            const keyId = (e.data as { keyId?: unknown }).keyId;
            if (typeof keyId === 'string') opts.cache.revokeKey(keyId);
          } catch (err) {
            opts.logger.warn({ err }, 'ignoring undecodable key.revoked event');
          }
        }
      } catch (err) {
        if (!stopped) opts.logger.warn({ err }, 'key revocation listener interrupted; short cache bound until it resumes');
      }
      consuming = false;
      opts.cache.setTrusted(false);
      if (!stopped) await new Promise((r) => setTimeout(r, 1_000));
    }
  })();

  return {
    async stop() {
      stopped = true;
      consuming = false;
      clearInterval(probe);
      opts.cache.setTrusted(false);
      try {
        await messages?.close();
      } catch {
        // closed already
      }
      await loop;
      void statusLoop;
    },
  };
}
