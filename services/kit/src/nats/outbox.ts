import type { Collection, Document, Filter, UpdateFilter } from 'mongodb';
import type { Logger } from '../logger.js';
import { bulkWriteInChunks, findByIds } from '../mongo.js';
import { createPoller } from '../poller.js';
import type { ServiceMetrics } from '../metrics.js';
import type { NatsHandle } from './connection.js';
import { encodeEvent, subjectFor, type EventEnvelope } from './events.js';

/**
 * The outbox. A state change and the events it causes are written in ONE
 * single-document write: the events ride on the changed document in an
 * `outbox` array. A relay publishes them (message id = event id) and pulls
 * them off. A crash between the write and the publish, or between the publish
 * and the pull, leads to a republish that JetStream's duplicate window and the
 * consumers' idempotency on event id absorb. No transactions needed, so it
 * works on FerretDB as on MongoDB.
 */
export interface OutboxEntry {
  id: string;
  subject: string;
  /** The event's type (for metrics and logs, without parsing it). */
  type?: string;
  /**
   * The event exactly as it is published: its JSON text. Not an object, because the document is read and
   * rewritten whole by every change on FerretDB, which stores a type schema beside each field of an
   * object: the envelope's schema alone was larger than the event.
   */
  json?: string;
  /** How entries were written before `json` (still published): the event as an object. */
  event?: EventEnvelope;
  createdAt: Date;
}

/** The message an outbox entry publishes, in either of its forms. */
export function outboxMessage(entry: OutboxEntry): Uint8Array {
  if (entry.json !== undefined) return new TextEncoder().encode(entry.json);
  if (entry.event) return encodeEvent(entry.event);
  throw new Error(`outbox entry ${entry.id} carries no event`);
}

/** The type of the event an outbox entry carries. */
export function outboxEventType(entry: OutboxEntry): string {
  return entry.type ?? entry.event?.type ?? 'unknown';
}

/** How long a publish waits for the stream's ack before it counts as failed (the entry then waits for the relay). */
const PUBLISH_TIMEOUT_MS = 5_000;

/**
 * Publishes one outbox entry to its stream, with the entry's id as the message id (the stream's duplicate window
 * drops a second publish of it), and counts it.
 */
export async function publishOutboxEntry(nats: NatsHandle, entry: OutboxEntry, metrics?: ServiceMetrics): Promise<void> {
  await nats.publishEvent(entry.subject, outboxMessage(entry), { msgID: entry.id, timeoutMs: PUBLISH_TIMEOUT_MS });
  metrics?.eventsPublished.inc({ type: outboxEventType(entry) });
}

export interface OutboxDoc {
  outbox?: OutboxEntry[];
  /** Set on a document deleted with events: the relay removes it once its outbox is empty. */
  _deletedAt?: Date;
}

export function outboxEntries(events: readonly EventEnvelope<unknown>[]): OutboxEntry[] {
  return events.map((e) => ({ id: e.id, subject: subjectFor(e.type), type: e.type, json: JSON.stringify(e), createdAt: new Date() }));
}

/** Merges `$push: {outbox: ...}` into an update so the change and its events land together. */
export function withOutbox<T extends Document>(update: UpdateFilter<T>, events: readonly EventEnvelope<unknown>[]): UpdateFilter<T> {
  if (events.length === 0) return update;
  const u = { ...update } as Record<string, unknown>;
  const push = { ...((u.$push as Record<string, unknown> | undefined) ?? {}) };
  push.outbox = { $each: outboxEntries(events) };
  u.$push = push;
  return u as UpdateFilter<T>;
}

/** A deletion that others must learn of: a tombstone carrying the events, purged after publish. */
export function deleteWithOutbox<T extends Document>(events: readonly EventEnvelope<unknown>[], now = new Date()): UpdateFilter<T> {
  return withOutbox<T>({ $set: { _deletedAt: now } } as unknown as UpdateFilter<T>, events);
}

/** Filter fragment every read of an outbox-carrying collection adds so tombstones stay invisible. */
export const NOT_DELETED = { _deletedAt: { $exists: false } } as const;

export interface OutboxRelay {
  start(): void;
  /** Asks for a pass soon (after a write), instead of waiting for the poll: a scan of every collection. */
  kick(): void;
  /**
   * Asks for a pass soon over just these documents of one of the collections (a writer that knows what it
   * wrote): read by their ids, where a scan for waiting entries reads every document of the collection on
   * FerretDB. The scan still runs once per interval (less often when it is costly: see maxScanShare), for what a
   * writer that died before its kick left.
   */
  kickIds(collection: Collection<Document>, ids: readonly unknown[]): void;
  /** One full pass over every collection; resolves with the number of events published. */
  drainOnce(): Promise<number>;
  /** Stops polling, finishing the pass in progress (and so publishing what it took). */
  stop(): Promise<void>;
}

export interface OutboxRelayOptions {
  nats: NatsHandle;
  collections: readonly Collection<Document>[];
  logger: Logger;
  metrics?: ServiceMetrics;
  intervalMs?: number;
  batchSize?: number;
  /** Documents published at once (each document's own events stay in order). */
  concurrency?: number;
  /**
   * Entries younger than this are left alone: the writer publishes them itself (a fast path such as the
   * emails publisher), and this relay is the safety net for what it left. Without it a pass re-reads
   * every document whose entries are waiting for their removal, batch after batch. Such a pass takes one
   * batch. The first pass after start takes every entry (what a process that died left), batch after
   * batch. Default 0: every entry, every pass.
   */
  minAgeMs?: number;
  /**
   * The share of the time the interval's scans may take (default 0.01): a scan that took this long waits at
   * least that long divided by this share after it, when longer than the interval. On FerretDB a scan reads
   * every document of the collection (about 30 µs each here: 2.8 s of the store's CPU at 100,000 emails, and
   * emails are kept), so at a fixed interval the safety net would grow with the data without bound. Kicks
   * still scan at once, and a writer's named documents are read by id at once, whatever this spacing.
   */
  maxScanShare?: number;
  /** Test hook: runs after an entry is published and before it is pulled (crash simulation). */
  afterPublish?: (entry: OutboxEntry) => Promise<void> | void;
}

/** Passes between two sweeps for left-over tombstones (the first pass sweeps). */
const TOMBSTONE_SWEEP_EVERY = 300;

export function createOutboxRelay(opts: OutboxRelayOptions): OutboxRelay {
  const intervalMs = opts.intervalMs ?? 1_000;
  const batchSize = opts.batchSize ?? 500;
  const concurrency = opts.concurrency ?? 16;

  /** Passes per collection, for the occasional sweep. */
  const passes = new Map<Collection<Document>, number>();

  const minAgeMs = opts.minAgeMs ?? 0;
  const maxScanShare = opts.maxScanShare ?? 0.01;
  let started = false;
  /** Time spent in the current scan's reads, and in the last whole scan's. */
  let scanReadMs = 0;
  let lastScanReadMs = 0;

  const projection = { _id: 1, outbox: 1, _deletedAt: 1 };

  async function passCollection(col: Collection<Document>, cutoff: Date | undefined): Promise<number> {
    const pending = (cutoff ? { 'outbox.0.createdAt': { $lt: cutoff } } : { 'outbox.0': { $exists: true } }) as Filter<Document>;
    const readStart = performance.now();
    const docs = await col.find(pending, { projection }).limit(batchSize).toArray();
    scanReadMs += performance.now() - readStart;
    const count = await publishDocs(col, docs);
    // A full batch means more may wait: go on at once, except in the safety net's aged passes, where each
    // batch is another scan of the whole collection for entries the fast path is mostly removing anyway;
    // there a real backlog (a dead replica's) goes out a batch per interval.
    return count + (docs.length === batchSize && !cutoff ? await passCollection(col, cutoff) : 0);
  }

  /** Publishes and pulls the entries of these documents (as read: _id, outbox, _deletedAt); resolves with how many. */
  async function publishDocs(col: Collection<Document>, docs: readonly Document[]): Promise<number> {
    const published: { id: unknown; entries: OutboxEntry[] }[] = [];
    let failure: unknown;
    // Documents are independent: publish several at once. A document's own events stay in order.
    const queue = [...docs];
    const publishDoc = async (doc: Document) => {
      const done: OutboxEntry[] = [];
      try {
        for (const entry of (doc.outbox ?? []) as OutboxEntry[]) {
          await publishOutboxEntry(opts.nats, entry, opts.metrics);
          await opts.afterPublish?.(entry);
          done.push(entry);
        }
      } catch (err) {
        failure ??= err;
      }
      if (done.length > 0) published.push({ id: doc._id, entries: done });
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, queue.length) }, async () => {
      for (let doc = queue.shift(); doc && failure === undefined; doc = queue.shift()) await publishDoc(doc);
    }));
    if (published.length > 0) {
      // One round trip removes every published entry. $pullAll of the exact entries read:
      // FerretDB v1 ignores $pull with a condition, both servers honour this.
      await bulkWriteInChunks(col, published.map((p) => ({
        updateOne: { filter: { _id: p.id } as Filter<Document>, update: { $pullAll: { outbox: p.entries } } as unknown as UpdateFilter<Document> },
      })));
    }
    if (failure !== undefined) throw failure;
    // Tombstones whose events are all out can go now: the ones this pass emptied, each by its id (a
    // primary-key delete, where a filter on _deletedAt alone reads the whole collection on FerretDB),
    // and now and then every one left over (a crash between the pull and this delete).
    const tombstones = docs.filter((d) => d._deletedAt !== undefined && published.some((p) => p.id === d._id && p.entries.length === (d.outbox as unknown[]).length));
    await Promise.all(tombstones.map((d) => col.deleteOne({ _id: d._id, _deletedAt: { $exists: true }, 'outbox.0': { $exists: false } } as Filter<Document>)));
    const pass = (passes.get(col) ?? 0) + 1;
    passes.set(col, pass);
    if (pass % TOMBSTONE_SWEEP_EVERY === 1) {
      await col.deleteMany({ _deletedAt: { $exists: true }, 'outbox.0': { $exists: false } } as Filter<Document>);
    }
    return published.reduce((n, p) => n + p.entries.length, 0);
  }

  /** Documents writers named since the last pass, by collection. */
  let named = new Map<Collection<Document>, Set<unknown>>();
  /** A scan of every collection is due: at start, after a plain kick or a failed pass, and once per interval. */
  let scanWanted = true;
  let lastScanAt = 0;

  async function drainOnce(): Promise<number> {
    const cutoff = started && minAgeMs > 0 ? new Date(Date.now() - minAgeMs) : undefined;
    scanWanted = false;
    lastScanAt = Date.now();
    scanReadMs = 0;
    // A scan with a cutoff leaves young entries to their writers: the named ones stay for the next pass.
    if (!cutoff) named = new Map();
    let total = 0;
    try {
      for (const col of opts.collections) total += await passCollection(col, cutoff);
    } catch (err) {
      // The retry scans again, however recent this one.
      scanWanted = true;
      throw err;
    } finally {
      lastScanReadMs = scanReadMs;
    }
    started = true;
    return total;
  }

  /** Whether the interval's scan is due: the interval has passed, and a hundredth (maxScanShare) is what the last took. */
  function scanDue(): boolean {
    return Date.now() - lastScanAt >= Math.max(intervalMs, lastScanReadMs / maxScanShare);
  }

  /**
   * A poller's pass: the documents writers named, unless a scan is wanted (start, a plain kick, a failure) or due.
   * The interval's timer with nothing named and no scan due passes without reading anything.
   */
  async function pass(): Promise<number> {
    if (scanWanted || scanDue()) return drainOnce();
    if (named.size === 0) return 0;
    const taken = named;
    named = new Map();
    let total = 0;
    try {
      for (const [col, ids] of taken) {
        const docs = await findByIds(col, [...ids], { 'outbox.0': { $exists: true } }, { projection });
        for (let i = 0; i < docs.length; i += batchSize) total += await publishDocs(col, docs.slice(i, i + batchSize));
      }
    } catch (err) {
      // What is left of the named documents is found by the scan of the retry.
      scanWanted = true;
      throw err;
    }
    return total;
  }

  // A failed pass (NATS away) is tried again within a second, whatever the safety-net interval.
  const poller = createPoller({ name: 'outbox relay', pass, logger: opts.logger, intervalMs, retryMs: Math.min(intervalMs, 1_000) });

  return {
    start: () => poller.start(),
    kick: () => {
      scanWanted = true;
      poller.kick();
    },
    kickIds: (collection, ids) => {
      if (ids.length === 0) return;
      let set = named.get(collection);
      if (!set) named.set(collection, (set = new Set()));
      for (const id of ids) set.add(id);
      poller.kick();
    },
    drainOnce,
    stop: () => poller.stop(),
  };
}

/** The index the relay's scan uses; repositories create it beside their own. */
export async function ensureOutboxIndex(col: Collection<Document>): Promise<void> {
  await col.createIndex({ 'outbox.0.createdAt': 1 }, { name: 'outbox_pending', sparse: true });
  // The relay's tombstone clean-up asks for this on every pass. An equivalent index under
  // another name (created by a repository before the kit did) serves as well.
  await col.createIndex({ _deletedAt: 1 }, { name: 'outbox_tombstones', sparse: true }).catch((err: unknown) => {
    const code = (err as { code?: number }).code;
    if (code !== 85 && code !== 86) throw err;
  });
}
