import { dropIndexesIfPresent, insertManyIgnoringDuplicates, isDuplicateKeyError, isFerretDb, moveToNewIds } from '@mailfleet/kit';
import type { Collection, Db, Document, Filter } from 'mongodb';
import { emailSummaryOf, type EmailFact, type EmailStatus, type EmailSummary } from '../domain/events.js';

/** One email event of the activity and events feeds (SPEC 2.5 and 4.11). */
export interface FeedItem {
  readonly id: string;
  readonly emailId: string;
  readonly teamId: string;
  readonly status: EmailStatus;
  readonly data: Record<string, unknown>;
  readonly createdAt: Date;
  readonly email: EmailSummary;
}

/**
 * Only what a page is chosen by, plus the payload; the email id and summary are read back from the payload.
 */
interface FeedDoc {
  /**
   * `team|creation time|event id` (see feedKey): a page is a range of one team's keys read newest first, which
   * MongoDB serves from the _id index and the embedded FerretDB narrows and sorts in SQLite; the key is the same
   * for a redelivered event, so it is inserted once. Earlier versions keyed by the event id alone (migrated at start).
   */
  _id: string;
  teamId: string;
  domainId: string;
  status: EmailStatus;
  /**
   * The payload as JSON text: it holds caller-chosen keys (metadata) that
   * need not be valid field names (`$`, `.`), and it is only ever shown whole.
   */
  dataJson: string;
  createdAt: Date;
  /** Written by earlier versions (now read from `dataJson`): used when present. */
  emailId?: string;
  email?: { id: string; to: string[]; subject: string; from: string };
}

export interface FeedFilter {
  readonly status?: EmailStatus | undefined;
  /** Only events created after this instant. */
  readonly after?: Date | undefined;
  readonly domainId?: string | undefined;
}

export interface FeedRepository {
  /** Creates the indexes and moves documents of the earlier layout (keyed by event id) to feed keys, once. */
  ensureIndexes(): Promise<void>;
  /** Adds the event; a second insert of the same event id changes nothing. */
  add(fact: EmailFact): Promise<void>;
  /** Adds the events in one write; ones already there (by event id) are left as they are. */
  addMany(facts: readonly EmailFact[]): Promise<void>;
  /** A page of the team's events, newest first (ties broken by id, so pages never overlap). */
  list(teamId: string, filter: FeedFilter, page: number, limit: number): Promise<FeedItem[]>;
  /** Deletes events created before `before`. */
  sweep(before: Date): Promise<number>;
}

function parseData(json: string): Record<string, unknown> {
  try {
    const v = JSON.parse(json) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** Milliseconds since the epoch in a fixed width, so that key order is time order (to the year 2286). */
const TIME_WIDTH = 13;
const MAX_TIME = 10 ** TIME_WIDTH - 1;

function timeKey(ms: number): string {
  return String(Math.min(MAX_TIME, Math.max(0, Math.trunc(ms)))).padStart(TIME_WIDTH, '0');
}

/** The feed key of an event: team ids hold no `|`, so one team's keys are exactly those from `team|` up to `team|~`. */
export function feedKey(teamId: string, createdAt: Date, eventId: string): string {
  return `${teamId}|${timeKey(createdAt.getTime())}|${eventId}`;
}

/** The event id of a stored document, of either layout. */
function eventIdOf(d: Pick<FeedDoc, '_id' | 'teamId'>): string {
  const prefix = `${d.teamId}|`;
  return d._id.startsWith(prefix) && d._id.length > prefix.length + TIME_WIDTH + 1 ? d._id.slice(prefix.length + TIME_WIDTH + 1) : d._id;
}

/** Marks the move of documents keyed by the event id alone to feed keys as done. */
const LAYOUT_MARK = 'event_feed.team-time-keys';
const MIGRATE_BATCH = 500;
/** Indexes of the layout before: pages now go by _id, so they only cost writes. */
const RETIRED_INDEXES = ['team_newest', 'team_status_newest', 'team_domain_newest'];

function docOf(fact: EmailFact): FeedDoc {
  return {
    _id: feedKey(fact.teamId, fact.createdAt, fact.eventId), teamId: fact.teamId, domainId: fact.domainId, status: fact.status,
    dataJson: JSON.stringify(fact.data), createdAt: fact.createdAt,
  };
}

export function createFeedRepository(db: Db): FeedRepository {
  const col: Collection<FeedDoc> = db.collection<FeedDoc>('event_feed');
  const marks = db.collection<{ _id: string; at: Date }>('migrations');

  /** Unordered: everything but the ids already there goes in. */
  async function insertNew(docs: FeedDoc[]): Promise<void> {
    if (docs.length > 0) await insertManyIgnoringDuplicates(col as unknown as Collection<Document>, docs);
  }

  /**
   * Each pass copies a batch of old documents under their feed keys, then deletes the old ones: a crash between
   * the two leaves copies that the next pass's insert ignores, and two replicas migrating at once do the same.
   */
  async function migrate(): Promise<void> {
    if (await marks.findOne({ _id: LAYOUT_MARK })) return;
    for (;;) {
      const old = await col.find({ _id: { $not: /\|/ } }).limit(MIGRATE_BATCH).toArray();
      if (old.length === 0) break;
      await moveToNewIds(col, old, (d) => feedKey(d.teamId, d.createdAt, d._id));
    }
    await marks.updateOne({ _id: LAYOUT_MARK }, { $setOnInsert: { at: new Date() } }, { upsert: true });
  }

  return {
    async ensureIndexes() {
      await col.createIndex({ createdAt: 1 }, { name: 'created' });
      // MongoDB's _id index serves a page in key order. The embedded FerretDB's SQLite backend needs an index of
      // its own for that: one whose first key is _id is built on the unescaped _id text (deploy/ferretdb/patches.json;
      // `{_id: -1}` alone is refused). MongoDB would only pay for a redundant index on every insert, so it gets none.
      if (await isFerretDb(db)) await col.createIndex({ _id: -1, teamId: 1 }, { name: 'key_order' });
      await dropIndexesIfPresent(col, RETIRED_INDEXES);
      await migrate();
    },

    async add(fact) {
      try {
        await col.insertOne(docOf(fact));
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
    },

    async addMany(facts) {
      await insertNew(facts.map(docOf));
    },

    async list(teamId, filter, page, limit) {
      // Newest first is descending key order: creation time, then event id, as the layout before sorted.
      const from = filter.after ? `${teamId}|${timeKey(filter.after.getTime() + 1)}|` : `${teamId}|`;
      const q: Filter<FeedDoc> = { _id: { $gte: from, $lt: `${teamId}|~` }, teamId };
      if (filter.domainId !== undefined) q.domainId = filter.domainId;
      if (filter.status) q.status = filter.status;
      if (filter.after) q.createdAt = { $gt: filter.after };
      const docs = await col.find(q).sort({ _id: -1 }).skip((page - 1) * limit).limit(limit).toArray();
      return docs.map((d) => {
        const data = parseData(d.dataJson);
        const email = d.email ?? emailSummaryOf(data);
        return { id: eventIdOf(d), emailId: d.emailId ?? email.id, teamId: d.teamId, status: d.status, data, createdAt: d.createdAt, email };
      });
    },

    async sweep(before) {
      return (await col.deleteMany({ createdAt: { $lt: before } })).deletedCount;
    },
  };
}
