import type { ProcessedEventsRepository } from '../../src/repositories/processed-events.repository.js';
import type { SuppressionRecord, SuppressionsRepository } from '../../src/repositories/suppressions.repository.js';

/** In-memory stand-ins with the repositories' contracts, for handler unit tests. */
export function fakeSuppressions(): SuppressionsRepository & { all(): SuppressionRecord[]; writes: number } {
  const rows = new Map<string, SuppressionRecord>();
  let seq = 0;
  const key = (teamId: string, email: string) => `${teamId}\u0000${email}`;
  const repo = {
    writes: 0,
    all: () => [...rows.values()],
    async ensureIndexes() {},
    async migrateLegacy() {
      return 0;
    },
    async upsert({ teamId, email, reason, source, now = new Date() }: Parameters<SuppressionsRepository['upsert']>[0]) {
      repo.writes++;
      const prev = rows.get(key(teamId, email));
      const rec: SuppressionRecord = prev
        ? { ...prev, reason, source, updatedAt: now }
        : { id: `sup_${++seq}`, teamId, email, reason, source, createdAt: now, updatedAt: now };
      rows.set(key(teamId, email), rec);
      return rec;
    },
    async applyAutomatic(writes: Parameters<SuppressionsRepository['applyAutomatic']>[0]) {
      repo.writes++;
      let upserted = 0;
      let lifted = 0;
      for (const w of writes) {
        if (w.kind === 'suppress') {
          await repo.upsert({ teamId: w.teamId, email: w.email, reason: w.reason, source: w.source, now: w.at });
          repo.writes--;
          upserted++;
        } else {
          const prev = rows.get(key(w.teamId, w.email));
          if (prev?.reason === 'UNSUBSCRIBE' && prev.updatedAt.getTime() <= w.at.getTime()) {
            rows.delete(key(w.teamId, w.email));
            lifted++;
          }
        }
      }
      return { upserted, lifted };
    },
    async list(teamId: string, q: Parameters<SuppressionsRepository['list']>[1]) {
      const matching = [...rows.values()]
        .filter((r) => r.teamId === teamId && (!q.reason || r.reason === q.reason) && (!q.search || r.email.includes(q.search)))
        .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
      return { items: matching.slice(q.skip, q.skip + q.limit), total: matching.length };
    },
    async remove(teamId: string, email: string) {
      return rows.delete(key(teamId, email));
    },
    async findByEmails(teamId: string, emails: readonly string[]) {
      return emails.flatMap((e) => rows.get(key(teamId, e)) ?? []);
    },
  };
  return repo;
}

export function fakeProcessed(): ProcessedEventsRepository & { ids: Set<string> } {
  const ids = new Set<string>();
  return {
    ids,
    async ensureIndexes() {},
    async appliedAmong(eventIds) {
      return new Set(eventIds.filter((id) => ids.has(id)));
    },
    async recordMany(inputs) {
      for (const { eventId } of inputs) ids.add(eventId);
    },
    async sweep() {
      return 0;
    },
  };
}
