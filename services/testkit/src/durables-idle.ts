import { EVENT_STREAM } from '@mailfleet/kit';
import type { JetStreamManager } from '@nats-io/jetstream';

export interface DurablesIdleOptions {
  readonly stream?: string;
  readonly timeoutMs?: number;
  readonly intervalMs?: number;
}

/** The stream sequence of the last message any of the durable's subjects holds now (0: none). */
async function lastSequenceFor(jsm: JetStreamManager, stream: string, durable: string): Promise<number> {
  const { config } = await jsm.consumers.info(stream, durable);
  const filters = config.filter_subjects?.length ? config.filter_subjects : config.filter_subject ? [config.filter_subject] : ['>'];
  const seqs = await Promise.all(filters.map(async (f) => {
    try {
      return (await jsm.streams.getMessage(stream, { last_by_subj: f }))?.seq ?? 0;
    } catch {
      return 0; // no message on these subjects yet
    }
  }));
  return Math.max(0, ...seqs);
}

/**
 * Resolves once every durable has handled (acknowledged or terminated) every
 * message its subjects hold at the time of the call.
 *
 * `num_pending` and `num_ack_pending` both at 0 are not enough: right after a
 * publish is acknowledged, the server may not have counted the new message on
 * the consumer yet, so for a moment both read 0 while the message was never
 * delivered (about once in 300 publish-then-ask rounds on this machine). A
 * durable is idle only once it has also delivered up to the last sequence of
 * its subjects.
 */
export async function durablesIdle(jsm: JetStreamManager, durables: readonly string[], opts: DurablesIdleOptions = {}): Promise<void> {
  const stream = opts.stream ?? EVENT_STREAM;
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  const targets = await Promise.all(durables.map((d) => lastSequenceFor(jsm, stream, d)));
  for (;;) {
    const infos = await Promise.all(durables.map((d) => jsm.consumers.info(stream, d)));
    const busy = infos.filter((i, k) => i.num_pending > 0 || i.num_ack_pending > 0 || i.delivered.stream_seq < targets[k]!);
    if (busy.length === 0) return;
    if (Date.now() > deadline) {
      const state = busy.map((i) => ({ durable: i.name, pending: i.num_pending, unacknowledged: i.num_ack_pending, delivered: i.delivered.stream_seq }));
      throw new Error(`consumers still busy: ${JSON.stringify(state)} (waiting for stream sequences ${JSON.stringify(targets)})`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 100));
  }
}
