import { isDuplicateKeyError } from '@mailfleet/kit';
import type { Collection, Db, Filter } from 'mongodb';
import type { DomainFact } from '../domain/events.js';

export interface KnownDomain {
  readonly id: string;
  readonly name: string;
  readonly deleted: boolean;
}

/** The projection of `domain.*` events: the latest known name of each domain, kept after deletion for history. */
interface DomainDoc {
  _id: string;
  teamId: string;
  domainId: string;
  name: string;
  deleted: boolean;
  /** createdAt of the event this state comes from. */
  at: Date;
}

export interface DomainsRepository {
  ensureIndexes(): Promise<void>;
  /** Applies the fact unless a newer one is stored (events may arrive out of order or twice). */
  apply(fact: DomainFact): Promise<void>;
  /** The domain id a filter means: an id the team's domains have, else the live (else latest) domain of that name. */
  resolve(teamId: string, idOrName: string): Promise<string | undefined>;
  list(teamId: string): Promise<KnownDomain[]>;
}

export function createDomainsRepository(db: Db): DomainsRepository {
  const col: Collection<DomainDoc> = db.collection<DomainDoc>('domains');
  const idOf = (teamId: string, domainId: string) => JSON.stringify([teamId, domainId]);

  return {
    async ensureIndexes() {
      await col.createIndex({ teamId: 1, name: 1 }, { name: 'team_name' });
    },

    async apply(fact) {
      // Newer facts win; at the same instant a deletion wins over an update.
      const older: Filter<DomainDoc>[] = [{ at: { $lt: fact.at } }];
      if (fact.deleted) older.push({ at: fact.at, deleted: false });
      try {
        await col.updateOne(
          { _id: idOf(fact.teamId, fact.id), $or: older },
          { $set: { teamId: fact.teamId, domainId: fact.id, name: fact.name, deleted: fact.deleted, at: fact.at } },
          { upsert: true },
        );
      } catch (err) {
        // A newer (or the same) fact is stored already.
        if (!isDuplicateKeyError(err)) throw err;
      }
    },

    async resolve(teamId, idOrName) {
      if (await col.findOne({ _id: idOf(teamId, idOrName) })) return idOrName;
      const named = await col.find({ teamId, name: idOrName.trim().toLowerCase() }).toArray();
      named.sort((a, b) => Number(a.deleted) - Number(b.deleted) || b.at.getTime() - a.at.getTime());
      return named[0]?.domainId;
    },

    async list(teamId) {
      const docs = await col.find({ teamId }).toArray();
      return docs.map((d) => ({ id: d.domainId, name: d.name, deleted: d.deleted }));
    },
  };
}
