import { publishOutboxEntry, type Logger, type NatsHandle, type OutboxEntry, type ServiceMetrics } from '@mailfleet/kit';
import type { AnyBulkWriteOperation, Collection, Document } from 'mongodb';

/**
 * The fast path of the emails outbox. Every write of this process that
 * carries events names the email it wrote; this publisher publishes their
 * outbox entries soon after: as the write left them when it knows (an
 * update compared and set on the email's version), else read by id. No
 * collection scan: on FerretDB (no index use for the relay's `outbox.0
 * exists` filter) a scan of every email per second per replica was the
 * largest load of the whole send path. The relay's pass over the collection
 * still runs at a slow interval as the safety net (a crash between a write
 * and its publish, another replica that died).
 *
 * Removing published entries is a rewrite of the whole document on FerretDB,
 * so it is deferred: the email's next change (the relay's answer comes
 * milliseconds after QUEUED, the delivery report soon after SENT) drops the
 * entries this process published as part of its own write (`isPublished`),
 * and only what is still there after `removeAfterMs` is removed separately
 * (a conditional update that writes nothing when it is gone already).
 *
 * Publishing twice is harmless (Nats-Msg-Id dedup, consumers idempotent on
 * the event id), so this and the safety net need no coordination.
 */
export interface OutboxPublisher {
  /** These emails have just been written with events (read again to find them). */
  hint(ids: Iterable<string>): void;
  /**
   * This email was just written and its outbox is now exactly `outbox` (a
   * compare-and-set update knows it): published without reading it again.
   */
  hintWritten(id: string, outbox: readonly OutboxEntry[]): void;
  /** Whether this process published the entry and it may be dropped with the email's next write. */
  isPublished(eventId: string): boolean;
  /**
   * A write of the email took these published entries out of its outbox: they are forgotten, so the separate
   * removal of what is left names an entry still there (and there is none when nothing is left).
   */
  dropped(emailId: string, entryIds: readonly string[]): void;
  start(): void;
  /** Publishes what was hinted so far and removes what was published, then stops. */
  stop(): Promise<void>;
}

/** Documents per round: FerretDB keeps a SQLite connection per statement of a bulk command until it ends (pool of 100). */
const BATCH = 25;
/** Published entries remembered at most (older ones are simply removed by their own update). */
const MAX_REMEMBERED = 50_000;

export function createOutboxPublisher(opts: {
  collection: Collection<Document>;
  nats: NatsHandle;
  logger: Logger;
  metrics?: ServiceMetrics;
  /** Delay that gathers the hints of a burst of writes into one round. */
  delayMs?: number;
  /** How long a published entry waits for the email's next write to take it away. */
  removeAfterMs?: number;
  /** These entries are no longer on the email (removed now, or by a write before). */
  onRemoved?: (emailId: string, entryIds: readonly string[]) => void;
}): OutboxPublisher {
  /** Email id -> its outbox as written, or undefined to read it. */
  const pending = new Map<string, readonly OutboxEntry[] | undefined>();
  const delay = opts.delayMs ?? 100;
  // Long enough for a delivery report, which usually comes seconds after SENT even under a campaign's load, to
  // take the `email.sent` entry away inside its own write; well under the safety net's minimum age.
  const removeAfterMs = opts.removeAfterMs ?? 30_000;
  /** Published entry id -> email id. */
  const published = new Map<string, string>();
  /** Removals waiting: email id -> entries and when they are due. */
  const removals = new Map<string, { entries: OutboxEntry[]; dueAt: number }>();
  let timer: NodeJS.Timeout | undefined;
  let removalTimer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let removing: Promise<void> | undefined;
  let stopped = true;

  function remember(emailId: string, entries: OutboxEntry[]): void {
    for (const e of entries) published.set(e.id, emailId);
    while (published.size > MAX_REMEMBERED) {
      const oldest = published.keys().next().value as string;
      published.delete(oldest);
    }
    const known = removals.get(emailId);
    removals.set(emailId, { entries: [...(known?.entries ?? []), ...entries], dueAt: Date.now() + removeAfterMs });
    scheduleRemovals();
  }

  async function round(batch: [string, readonly OutboxEntry[] | undefined][]): Promise<void> {
    // One `_id: {$in}` read for the ids that came without their outbox.
    const unread = batch.filter(([, outbox]) => !outbox).map(([id]) => id);
    const read = unread.length === 0 ? []
      : await opts.collection.find({ _id: { $in: unread } } as Document, { projection: { _id: 1, outbox: 1 } }).toArray();
    const docs = [...batch.filter(([, outbox]) => outbox).map(([id, outbox]) => ({ _id: id, outbox })), ...read];
    // The emails of a round are published concurrently (each publish waits for the stream's ack); one email's
    // entries stay in order.
    const settled = await Promise.allSettled(docs.map(async (doc) => {
      const entries = ((doc.outbox ?? []) as OutboxEntry[]).filter((e) => !published.has(e.id));
      const done: OutboxEntry[] = [];
      try {
        for (const entry of entries) {
          await publishOutboxEntry(opts.nats, entry, opts.metrics);
          done.push(entry);
        }
      } finally {
        if (done.length > 0) remember(String(doc._id), done);
      }
    }));
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  async function drain(): Promise<void> {
    while (pending.size > 0) {
      const batch = [...pending].slice(0, BATCH);
      for (const [id] of batch) pending.delete(id);
      try {
        await round(batch);
      } catch (err) {
        // Left in the outbox: the relay's pass publishes them.
        opts.logger.warn({ err, count: batch.length }, 'publishing email events failed; the outbox relay will retry');
        return;
      }
    }
  }

  /** Removes the due (or, when `all`, every) published entries still on their emails. */
  async function removeDue(all = false): Promise<void> {
    const now = Date.now();
    let due = [...removals].filter(([, r]) => all || r.dueAt <= now);
    // Full bulks only, unless the oldest has waited another removeAfterMs: fewer, fuller writes under load.
    const oldest = due.reduce((min, [, r]) => Math.min(min, r.dueAt), Infinity);
    if (!all && oldest > now - removeAfterMs) due = due.slice(0, due.length - (due.length % BATCH));
    for (let i = 0; i < due.length; i += BATCH) {
      const chunk = due.slice(i, i + BATCH);
      for (const [emailId] of chunk) removals.delete(emailId);
      // Conditional on the first entry still being there: when a later write took them away this writes nothing.
      const ops: AnyBulkWriteOperation<Document>[] = chunk.map(([emailId, r]) => ({
        updateOne: { filter: { _id: emailId, 'outbox.id': r.entries[0]!.id } as Document, update: { $pullAll: { outbox: r.entries } } as Document },
      }));
      try {
        await opts.collection.bulkWrite(ops, { ordered: false });
        for (const [emailId, r] of chunk) opts.onRemoved?.(emailId, r.entries.map((e) => e.id));
        for (const [, r] of chunk) for (const e of r.entries) published.delete(e.id);
      } catch (err) {
        opts.logger.warn({ err, count: chunk.length }, 'removing published email events failed; the outbox relay will finish it');
      }
    }
  }

  function scheduleRemovals(): void {
    if (removalTimer || removing) return;
    removalTimer = setTimeout(() => {
      removalTimer = undefined;
      removing = removeDue().finally(() => {
        removing = undefined;
        if (removals.size > 0 && !stopped) scheduleRemovals();
      });
    }, stopped ? 0 : Math.min(removeAfterMs, 1_000));
  }

  function schedule(): void {
    if (stopped || timer || running) return;
    timer = setTimeout(() => {
      timer = undefined;
      running = drain().finally(() => {
        running = undefined;
        if (pending.size > 0) schedule();
      });
    }, delay);
  }

  return {
    hint(ids) {
      for (const id of ids) pending.set(id, undefined);
      schedule();
    },
    hintWritten(id, outbox) {
      // A read asked for already covers it (it sees this write or a later one).
      if (!pending.has(id) || pending.get(id) !== undefined) pending.set(id, outbox);
      schedule();
    },
    isPublished(eventId) {
      return published.has(eventId);
    },
    dropped(emailId, entryIds) {
      for (const id of entryIds) published.delete(id);
      const known = removals.get(emailId);
      if (!known) return;
      const left = known.entries.filter((e) => !entryIds.includes(e.id));
      if (left.length === 0) removals.delete(emailId);
      else removals.set(emailId, { entries: left, dueAt: known.dueAt });
    },
    start() {
      stopped = false;
      schedule();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      clearTimeout(removalTimer);
      timer = undefined;
      removalTimer = undefined;
      await running;
      await removing;
      await drain();
      await removeDue(true);
    },
  };
}
