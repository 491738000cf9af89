import { DeliverPolicy, type ConsumerMessages } from '@nats-io/jetstream';
import { decodeEvent, EVENT_STREAM, type Logger, type NatsHandle } from '@mailfleet/kit';
import type { AuthCache } from './auth-cache.js';

/**
 * Every gateway replica hears every `key.revoked` (an ordered consumer of its
 * own, from "now": nothing older can be in a fresh cache) and drops the key
 * from its cache. The cache is trusted only while this listener runs.
 */
export function listenForKeyRevocations(opts: { nats: NatsHandle; cache: AuthCache; logger: Logger }): { stop(): Promise<void> } {
  let stopped = false;
  let messages: ConsumerMessages | undefined;

  const statusLoop = (async () => {
    for await (const s of opts.nats.nc.status()) {
      if (s.type === 'disconnect') opts.cache.setTrusted(false);
    }
  })().catch(() => undefined);

  const loop = (async () => {
    while (!stopped) {
      try {
        const consumer = await opts.nats.js.consumers.get(EVENT_STREAM, { filter_subjects: ['mailfleet.key.revoked'], deliver_policy: DeliverPolicy.New });
        messages = await consumer.consume();
        opts.cache.setTrusted(true);
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
        if (!stopped) opts.logger.warn({ err }, 'key revocation listener interrupted; cache bypassed until it resumes');
      }
      opts.cache.setTrusted(false);
      if (!stopped) await new Promise((r) => setTimeout(r, 1_000));
    }
  })();

  return {
    async stop() {
      stopped = true;
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
