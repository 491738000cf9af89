import { isDuplicateKeyError } from '@mailfleet/kit';
import type { Collection, Db, Filter } from 'mongodb';
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
 * Only what a page is chosen by, plus the payload: FerretDB reads (decodes) every document of the collection for
 * a page, so every field costs on every read; the email id and summary are read back from the payload.
 */
interface FeedDoc {
  /** The event id: a redelivered event is inserted once. */
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

function docOf(fact: EmailFact): FeedDoc {
  return {
    _id: fact.eventId, teamId: fact.teamId, domainId: fact.domainId, status: fact.status,
    dataJson: JSON.stringify(fact.data), createdAt: fact.createdAt,
  };
}

function onlyDuplicates(err: unknown): boolean {
  const raw = (err as { writeErrors?: unknown }).writeErrors;
  const list = (Array.isArray(raw) ? raw : raw ? [raw] : []) as { code?: number; err?: { code?: number } }[];
  return list.length > 0 ? list.every((w) => (w.code ?? w.err?.code) === 11000) : isDuplicateKeyError(err);
}

export function createFeedRepository(db: Db): FeedRepository {
  const col: Collection<FeedDoc> = db.collection<FeedDoc>('event_feed');

  return {
    async ensureIndexes() {
      await col.createIndex({ teamId: 1, createdAt: -1, _id: -1 }, { name: 'team_newest' });
      await col.createIndex({ teamId: 1, status: 1, createdAt: -1, _id: -1 }, { name: 'team_status_newest' });
      await col.createIndex({ teamId: 1, domainId: 1, createdAt: -1, _id: -1 }, { name: 'team_domain_newest' });
      await col.createIndex({ createdAt: 1 }, { name: 'created' });
    },

    async add(fact) {
      try {
        await col.insertOne(docOf(fact));
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
    },

    async addMany(facts) {
      if (facts.length === 0) return;
      try {
        await col.insertMany(facts.map(docOf), { ordered: false });
      } catch (err) {
        // Unordered: everything but the duplicates went in; anything else is a real failure.
        if (!onlyDuplicates(err)) throw err;
      }
    },

    async list(teamId, filter, page, limit) {
      const q: Filter<FeedDoc> = { teamId };
      if (filter.domainId !== undefined) q.domainId = filter.domainId;
      if (filter.status) q.status = filter.status;
      if (filter.after) q.createdAt = { $gt: filter.after };
      const docs = await col.find(q).sort({ createdAt: -1, _id: -1 }).skip((page - 1) * limit).limit(limit).toArray();
      return docs.map((d) => {
        const data = parseData(d.dataJson);
        const email = d.email ?? emailSummaryOf(data);
        return { id: d._id, emailId: d.emailId ?? email.id, teamId: d.teamId, status: d.status, data, createdAt: d.createdAt, email };
      });
    },

    async sweep(before) {
      return (await col.deleteMany({ createdAt: { $lt: before } })).deletedCount;
    },
  };
}
