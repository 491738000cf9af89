import { countsFrom, METRICS, zeroCounts, type Counts } from '../../src/domain/counts.js';
import type { DomainFact } from '../../src/domain/events.js';
import type { DomainsRepository, KnownDomain } from '../../src/repositories/domains.repository.js';
import type { FeedItem, FeedRepository } from '../../src/repositories/feed.repository.js';
import { markIdOf, rollupIdOf, type RollupKey, type RollupsRepository } from '../../src/repositories/rollups.repository.js';

/** In-memory rollups with the same once-per-email semantics (no crash steps). */
export function fakeRollups(): RollupsRepository & { rows: Map<string, RollupKey & { counts: Counts }> } {
  const rows = new Map<string, RollupKey & { counts: Counts }>();
  const marks = new Set<string>();
  return {
    rows,
    async ensureIndexes() {},
    async countOnce(input) {
      const m = markIdOf(input.teamId, input.emailId, input.metric);
      if (marks.has(m)) return 'already counted';
      marks.add(m);
      const id = rollupIdOf(input.rollup);
      const row = rows.get(id) ?? { ...input.rollup, counts: zeroCounts() };
      row.counts[input.metric] += 1;
      rows.set(id, row);
      return 'counted';
    },
    async countBatch(inputs) {
      let counted = 0;
      for (const input of inputs) if ((await this.countOnce(input)) === 'counted') counted++;
      return { counted, alreadyCounted: inputs.length - counted, busy: new Set<string>() };
    },
    async claim() {
      throw new Error('not in the fake');
    },
    async apply() {
      throw new Error('not in the fake');
    },
    async finish() {
      throw new Error('not in the fake');
    },
    async sum(query, groupBy, metrics = METRICS) {
      const out = new Map<string, Counts>();
      for (const r of rows.values()) {
        if (r.teamId !== query.teamId) continue;
        if (query.domainId !== undefined && r.domainId !== query.domainId) continue;
        if (query.range && (r.day > query.range.to || (query.range.from && r.day < query.range.from))) continue;
        const key = groupBy ? r[groupBy] : '';
        const acc = out.get(key) ?? zeroCounts();
        for (const m of metrics) acc[m] += r.counts[m];
        out.set(key, countsFrom(acc));
      }
      return out;
    },
    async sweepMarks() {
      return 0;
    },
  };
}

export function fakeFeed(): FeedRepository & { items: FeedItem[] } {
  const items: FeedItem[] = [];
  return {
    items,
    async ensureIndexes() {},
    async add(f) {
      if (items.some((i) => i.id === f.eventId)) return;
      items.push({ id: f.eventId, emailId: f.emailId, teamId: f.teamId, status: f.status, data: { ...f.data }, createdAt: f.createdAt, email: { ...f.summary, to: [...f.summary.to] } });
    },
    async addMany(facts) {
      for (const f of facts) await this.add(f);
    },
    async list(teamId, filter, page, limit) {
      return items
        .filter((i) => i.teamId === teamId && (!filter.status || i.status === filter.status) && (!filter.after || i.createdAt > filter.after)
          && (filter.domainId === undefined || i.data.domainId === filter.domainId))
        .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1))
        .slice((page - 1) * limit, page * limit);
    },
    async sweep() {
      return 0;
    },
  };
}

export function fakeDomains(initial: (KnownDomain & { teamId: string })[] = []): DomainsRepository & { applied: DomainFact[] } {
  const known = [...initial];
  const applied: DomainFact[] = [];
  return {
    applied,
    async ensureIndexes() {},
    async apply(fact) {
      applied.push(fact);
      const i = known.findIndex((d) => d.teamId === fact.teamId && d.id === fact.id);
      const d = { teamId: fact.teamId, id: fact.id, name: fact.name, deleted: fact.deleted };
      if (i >= 0) known[i] = d;
      else known.push(d);
    },
    async resolve(teamId, idOrName) {
      const mine = known.filter((d) => d.teamId === teamId);
      return (mine.find((d) => d.id === idOrName) ?? mine.find((d) => d.name === idOrName.toLowerCase() && !d.deleted) ?? mine.find((d) => d.name === idOrName.toLowerCase()))?.id;
    },
    async list(teamId) {
      return known.filter((d) => d.teamId === teamId).map(({ id, name, deleted }) => ({ id, name, deleted }));
    },
  };
}
