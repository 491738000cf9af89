import type { Logger } from '@mailfleet/kit';
import type { Principal } from '../plugins/auth.plugin.js';

export interface KeyTouchBuffer {
  record(p: Principal, at?: Date): void;
  flush(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Coalesces lastUsed: each request only updates a map in memory; the newest
 * time per key is sent to auth in one batch every few seconds (and at
 * shutdown). Losing a few seconds of lastUsed on a crash is acceptable; a
 * database write per request is not.
 */
export function createKeyTouchBuffer(opts: {
  send: (touches: { teamId: string; keyId: string; lastUsed: Date }[]) => Promise<unknown>;
  logger: Logger;
  intervalMs?: number;
}): KeyTouchBuffer {
  let pending = new Map<string, { teamId: string; keyId: string; lastUsed: Date }>();
  const flush = async () => {
    if (pending.size === 0) return;
    const batch = [...pending.values()];
    pending = new Map();
    for (let i = 0; i < batch.length; i += 1000) {
      try {
        await opts.send(batch.slice(i, i + 1000));
      } catch (err) {
        opts.logger.warn({ err, keys: batch.length }, 'could not record key last use; will retry with the next batch');
        for (const t of batch.slice(i)) {
          const cur = pending.get(t.keyId);
          if (!cur || cur.lastUsed < t.lastUsed) pending.set(t.keyId, t);
        }
        return;
      }
    }
  };
  const timer = setInterval(() => void flush(), opts.intervalMs ?? 10_000);
  timer.unref();
  return {
    record(p, at = new Date()) {
      pending.set(p.keyId, { teamId: p.teamId, keyId: p.keyId, lastUsed: at });
    },
    flush,
    async stop() {
      clearInterval(timer);
      await flush();
    },
  };
}
