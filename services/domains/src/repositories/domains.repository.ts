import { randomUUID } from 'node:crypto';
import {
  AlreadyExistsError, ensureOutboxIndex, isDuplicateKeyError, NOT_DELETED, outboxEntries, withOutbox, type OutboxDoc,
} from '@mailfleet/kit';
import type { Collection, Db, Document, Filter, UpdateFilter } from 'mongodb';
import type { SealedKey } from '../domain/dkim-keys.js';
import { changeEvents, createdEvent, deletedEvent } from '../domain/events.js';
import type { DnsRecordSpec, DnsRecordState, RecordKind, RecordStatus } from '../domain/records.js';
import type { CheckStatus, DomainStatus, VerificationState } from '../domain/verification.js';

/** A domain as the rest of the service sees it (no key material, no scheduling internals). */
export interface DomainRecord {
  readonly id: string;
  readonly teamId: string;
  readonly name: string;
  readonly region: string;
  readonly status: DomainStatus;
  readonly clickTracking: boolean;
  readonly openTracking: boolean;
  /** Base64 DER of the DKIM public key. */
  readonly publicKey: string;
  readonly dkimSelector: string;
  readonly mailFromHost: string;
  readonly subdomain: string | null;
  readonly dkimStatus: CheckStatus | null;
  readonly spfDetails: CheckStatus | null;
  readonly dmarcAdded: boolean;
  readonly isVerifying: boolean;
  readonly errorMessage: string | null;
  readonly verificationError: string | null;
  readonly lastCheckedTime: Date | null;
  readonly records: readonly DnsRecordState[];
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export interface NewDomain {
  readonly id: string;
  readonly teamId: string;
  readonly name: string;
  readonly region: string;
  readonly subdomain: string | null;
  readonly publicKey: string;
  readonly dkimSelector: string;
  readonly sealedKey: SealedKey;
  readonly verificationToken: string;
  readonly mailFromHost: string;
  readonly records: readonly DnsRecordSpec[];
}

/** Verification bookkeeping of a domain, for the decision of its next state. */
export interface VerificationSnapshot extends VerificationState {
  /** Changes on every PUT verify: a check started before it does not write its result over the new run. */
  readonly runId: string;
}

/** A change to a domain; absent fields stay as they are. */
export interface DomainPatch {
  status?: DomainStatus;
  isVerifying?: boolean;
  clickTracking?: boolean;
  openTracking?: boolean;
  dkimStatus?: CheckStatus | null;
  spfDetails?: CheckStatus | null;
  dmarcAdded?: boolean;
  errorMessage?: string | null;
  verificationError?: string | null;
  lastCheckedTime?: Date;
  /** New status per record kind; kinds not named keep theirs. */
  recordStatuses?: Partial<Record<RecordKind, RecordStatus>>;
  /** Verification scheduling; nextCheckAt null stops checks until the next PUT verify. */
  schedule?: { nextCheckAt: Date | null; attempt: number; tempFailures: number; tempSince: Date | null; newRun?: boolean };
}

export interface ClaimedCheck {
  readonly record: DomainRecord;
  readonly claimToken: string;
  readonly runId: string;
  /** The records to look up, from the claimed document. */
  readonly records: readonly DnsRecordState[];
}

export interface ChangeResult {
  readonly before: DomainRecord;
  readonly after: DomainRecord;
}

export interface DomainsRepository {
  readonly collection: Collection<Document>;
  ensureIndexes(): Promise<void>;
  /** Inserts the domain with its `domain.created` event; AlreadyExistsError when the team has that name. */
  create(input: NewDomain, now?: Date): Promise<DomainRecord>;
  get(teamId: string, id: string): Promise<DomainRecord | undefined>;
  /** The team's domains, newest first; only `onlyId` when given. */
  list(teamId: string, onlyId?: string): Promise<DomainRecord[]>;
  /** A live domain by exact (normalised) name with its sealed private key. */
  findForSending(teamId: string, name: string): Promise<{ record: DomainRecord; sealedKey: SealedKey } | undefined>;
  /**
   * Applies the patch `decide` returns for the current state, with its events,
   * in one conditional write (retried when another write came first).
   * Undefined when the team has no such live domain; `decide` returning null
   * leaves it as is.
   */
  change(teamId: string, id: string, decide: (current: DomainRecord, v: VerificationSnapshot) => DomainPatch | null, now?: Date): Promise<ChangeResult | undefined>;
  /** Deletes permanently (tombstone carrying `domain.deleted`; the key material goes at once). */
  delete(teamId: string, id: string, now?: Date): Promise<DomainRecord | undefined>;
  /** Claims the most overdue domain whose check is due and not claimed by a live lease. */
  claimDue(now: Date, leaseMs: number): Promise<ClaimedCheck | undefined>;
  /**
   * Writes a check's result if the claim still holds and no PUT verify began
   * a new run meanwhile (then only the claim is released so the new run is
   * checked at once). Releases the claim either way.
   */
  completeCheck(claim: ClaimedCheck, decide: (current: DomainRecord, v: VerificationSnapshot) => DomainPatch, now?: Date): Promise<ChangeResult | undefined>;
  releaseClaim(claim: ClaimedCheck): Promise<void>;
  /** When the next unclaimed check falls due (the worker sleeps until then). */
  nextDueAt(now: Date): Promise<Date | undefined>;
}

interface RecordDoc {
  kind: RecordKind;
  type: 'TXT' | 'MX';
  name: string;
  value: string;
  priority: number | null;
  recommended: boolean;
  status: RecordStatus;
}

interface DomainDoc extends OutboxDoc {
  _id: string;
  teamId: string;
  name: string;
  /** `<teamId>:<name>` under a sparse unique index; unset on delete so the name can be registered again at once. */
  nameKey?: string;
  region: string;
  status: DomainStatus;
  clickTracking: boolean;
  openTracking: boolean;
  publicKey: string;
  dkimSelector: string;
  /** AES-256-GCM sealed PKCS#8 PEM; removed on delete. */
  dkimKey?: SealedKey;
  verificationToken: string;
  mailFromHost: string;
  subdomain: string | null;
  dkimStatus: CheckStatus | null;
  spfDetails: CheckStatus | null;
  dmarcAdded: boolean;
  isVerifying: boolean;
  errorMessage: string | null;
  verificationError: string | null;
  lastCheckedTime: Date | null;
  records: RecordDoc[];
  createdAt: Date;
  updatedAt: Date;
  /** Bumped by every change: the compare-and-set of `change`. */
  version: number;
  /** When the worker should check next; absent when no check is due ever (until PUT verify). */
  nextCheckAt?: Date;
  /** Lease of the replica checking it now; the epoch when free. */
  claimedUntil: Date;
  claimToken?: string;
  runId: string;
  attempt: number;
  tempFailures: number;
  tempSince: Date | null;
}

const EPOCH = new Date(0);
const MAX_CAS_ATTEMPTS = 20;

function toRecord(d: DomainDoc): DomainRecord {
  return {
    id: d._id, teamId: d.teamId, name: d.name, region: d.region, status: d.status, clickTracking: d.clickTracking, openTracking: d.openTracking,
    publicKey: d.publicKey, dkimSelector: d.dkimSelector, mailFromHost: d.mailFromHost, subdomain: d.subdomain,
    dkimStatus: d.dkimStatus, spfDetails: d.spfDetails, dmarcAdded: d.dmarcAdded, isVerifying: d.isVerifying,
    errorMessage: d.errorMessage, verificationError: d.verificationError, lastCheckedTime: d.lastCheckedTime,
    records: d.records.map((r) => ({ kind: r.kind, type: r.type, name: r.name, value: r.value, priority: r.priority, recommended: r.recommended, status: r.status })),
    createdAt: d.createdAt, updatedAt: d.updatedAt,
  };
}

function snapshotOf(d: DomainDoc): VerificationSnapshot {
  return { status: d.status, attempt: d.attempt, tempFailures: d.tempFailures, tempSince: d.tempSince, dmarcAdded: d.dmarcAdded, runId: d.runId };
}

/** The domain after a patch, in memory: what the write will leave, for events and the answer. */
function patched(d: DomainDoc, p: DomainPatch): { doc: DomainDoc; set: Partial<DomainDoc>; unset: string[] } {
  const set: Partial<DomainDoc> = {};
  const unset: string[] = [];
  const fields = ['status', 'isVerifying', 'clickTracking', 'openTracking', 'dkimStatus', 'spfDetails', 'dmarcAdded', 'errorMessage', 'verificationError', 'lastCheckedTime'] as const;
  for (const f of fields) {
    if (p[f] !== undefined) (set as Record<string, unknown>)[f] = p[f];
  }
  if (p.recordStatuses) {
    const statuses = p.recordStatuses;
    const records = d.records.map((r) => (statuses[r.kind] ? { ...r, status: statuses[r.kind]! } : r));
    if (records.some((r, i) => r.status !== d.records[i]!.status)) set.records = records;
  }
  if (p.schedule) {
    Object.assign(set, { attempt: p.schedule.attempt, tempFailures: p.schedule.tempFailures, tempSince: p.schedule.tempSince });
    if (p.schedule.nextCheckAt) set.nextCheckAt = p.schedule.nextCheckAt;
    else unset.push('nextCheckAt');
    if (p.schedule.newRun) set.runId = randomUUID();
  }
  const doc = { ...d, ...set };
  if (unset.includes('nextCheckAt')) delete doc.nextCheckAt;
  return { doc, set, unset };
}

/** Whether a client would see a difference (lastCheckedTime aside): then updatedAt moves. */
function visiblyChanged(a: DomainRecord, b: DomainRecord): boolean {
  const strip = (r: DomainRecord) => JSON.stringify({ ...r, lastCheckedTime: null, updatedAt: null });
  return strip(a) !== strip(b);
}

export function createDomainsRepository(db: Db): DomainsRepository {
  const col = db.collection<DomainDoc>('domains');

  /** One compare-and-set loop: read, decide, write conditioned on the version read. */
  async function casChange(
    filter: Filter<DomainDoc>,
    decide: (doc: DomainDoc) => { patch: DomainPatch; releaseClaim?: boolean } | null | 'abort',
    now: Date,
  ): Promise<ChangeResult | undefined> {
    for (let i = 0; i < MAX_CAS_ATTEMPTS; i++) {
      const doc = await col.findOne({ ...filter, ...NOT_DELETED } as Filter<DomainDoc>);
      if (!doc) return undefined;
      const decision = decide(doc);
      if (decision === 'abort') return undefined;
      const before = toRecord(doc);
      if (decision === null) return { before, after: before };
      const { doc: next, set, unset } = patched(doc, decision.patch);
      let after = toRecord(next);
      if (visiblyChanged(before, after)) {
        set.updatedAt = now;
        after = { ...after, updatedAt: now };
      }
      const unsetDoc: Record<string, ''> = Object.fromEntries(unset.map((k) => [k, '']));
      if (decision.releaseClaim) {
        set.claimedUntil = EPOCH;
        unsetDoc.claimToken = '';
      }
      const update: UpdateFilter<DomainDoc> = { $set: set, $inc: { version: 1 } };
      if (Object.keys(unsetDoc).length > 0) update.$unset = unsetDoc as UpdateFilter<DomainDoc>['$unset'];
      const res = await col.updateOne(
        { _id: doc._id, version: doc.version, ...NOT_DELETED } as Filter<DomainDoc>,
        withOutbox(update, changeEvents(before, after, now)),
      );
      if (res.matchedCount === 1) return { before, after };
    }
    throw new Error(`domain changed concurrently ${MAX_CAS_ATTEMPTS} times in a row; giving up`);
  }

  async function releaseClaim(claim: ClaimedCheck): Promise<void> {
    await col.updateOne(
      { _id: claim.record.id, claimToken: claim.claimToken } as Filter<DomainDoc>,
      { $set: { claimedUntil: EPOCH }, $unset: { claimToken: '' } },
    );
  }

  return {
    collection: col as unknown as Collection<Document>,
    releaseClaim,
    async ensureIndexes() {
      await col.createIndex({ nameKey: 1 }, { unique: true, sparse: true, name: 'team_name_unique' });
      await col.createIndex({ teamId: 1, createdAt: -1 }, { name: 'team_created' });
      await col.createIndex({ nextCheckAt: 1 }, { name: 'next_check', sparse: true });
      await ensureOutboxIndex(col as unknown as Collection<Document>);
    },

    async create(input, now = new Date()) {
      const doc: DomainDoc = {
        _id: input.id, teamId: input.teamId, name: input.name, nameKey: `${input.teamId}:${input.name}`, region: input.region,
        status: 'NOT_STARTED', clickTracking: false, openTracking: false, publicKey: input.publicKey, dkimSelector: input.dkimSelector,
        dkimKey: input.sealedKey, verificationToken: input.verificationToken, mailFromHost: input.mailFromHost, subdomain: input.subdomain,
        dkimStatus: null, spfDetails: null, dmarcAdded: false, isVerifying: false, errorMessage: null, verificationError: null,
        lastCheckedTime: null, records: input.records.map((r) => ({ ...r, status: 'NOT_STARTED' as const })),
        createdAt: now, updatedAt: now, version: 1, claimedUntil: EPOCH, runId: randomUUID(), attempt: 0, tempFailures: 0, tempSince: null,
      };
      const record = toRecord(doc);
      doc.outbox = outboxEntries([createdEvent(record, now)]);
      try {
        await col.insertOne(doc);
      } catch (err) {
        if (isDuplicateKeyError(err)) throw new AlreadyExistsError(`Domain ${input.name} already exists in this team`);
        throw err;
      }
      return record;
    },

    async get(teamId, id) {
      const d = await col.findOne({ _id: id, teamId, ...NOT_DELETED } as Filter<DomainDoc>);
      return d ? toRecord(d) : undefined;
    },

    async list(teamId, onlyId) {
      const filter = { teamId, ...NOT_DELETED, ...(onlyId ? { _id: onlyId } : {}) } as Filter<DomainDoc>;
      return (await col.find(filter).sort({ createdAt: -1, _id: -1 }).toArray()).map(toRecord);
    },

    async findForSending(teamId, name) {
      const d = await col.findOne({ teamId, name, ...NOT_DELETED } as Filter<DomainDoc>);
      if (!d?.dkimKey) return undefined;
      return { record: toRecord(d), sealedKey: d.dkimKey };
    },

    async change(teamId, id, decide, now = new Date()) {
      return casChange({ _id: id, teamId } as Filter<DomainDoc>, (doc) => {
        const patch = decide(toRecord(doc), snapshotOf(doc));
        return patch ? { patch } : null;
      }, now);
    },

    async delete(teamId, id, now = new Date()) {
      for (let i = 0; i < MAX_CAS_ATTEMPTS; i++) {
        const doc = await col.findOne({ _id: id, teamId, ...NOT_DELETED } as Filter<DomainDoc>);
        if (!doc) return undefined;
        const record = toRecord(doc);
        const update = withOutbox<DomainDoc>(
          { $set: { _deletedAt: now }, $unset: { nameKey: '', dkimKey: '', nextCheckAt: '', claimToken: '' }, $inc: { version: 1 } },
          [deletedEvent(record, now)],
        );
        const res = await col.updateOne({ _id: id, teamId, version: doc.version, ...NOT_DELETED } as Filter<DomainDoc>, update);
        if (res.matchedCount === 1) return record;
      }
      throw new Error('domain changed concurrently while deleting; giving up');
    },

    async claimDue(now, leaseMs) {
      const claimToken = randomUUID();
      const d = await col.findOneAndUpdate(
        { nextCheckAt: { $lte: now }, claimedUntil: { $lt: now }, ...NOT_DELETED } as Filter<DomainDoc>,
        { $set: { claimedUntil: new Date(now.getTime() + leaseMs), claimToken } },
        { sort: { nextCheckAt: 1 }, returnDocument: 'after' },
      );
      if (!d || d.claimToken !== claimToken) return undefined;
      return { record: toRecord(d), claimToken, runId: d.runId, records: toRecord(d).records };
    },

    async completeCheck(claim, decide, now = new Date()) {
      let superseded = false;
      const result = await casChange({ _id: claim.record.id, claimToken: claim.claimToken } as Filter<DomainDoc>, (doc) => {
        if (doc.runId !== claim.runId) {
          superseded = true;
          return 'abort';
        }
        return { patch: decide(toRecord(doc), snapshotOf(doc)), releaseClaim: true };
      }, now);
      if (superseded) await releaseClaim(claim);
      return result;
    },

    async nextDueAt(now) {
      const [d] = await col.find({ nextCheckAt: { $exists: true }, claimedUntil: { $lt: now }, ...NOT_DELETED } as Filter<DomainDoc>, { projection: { nextCheckAt: 1 } })
        .sort({ nextCheckAt: 1 }).limit(1).toArray();
      return d?.nextCheckAt;
    },
  };
}
