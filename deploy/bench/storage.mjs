// Storage operations per email for `npm run bench`, from the FerretDB launcher's per-command statistics
// (deploy/ferretdb/stats.go): every command that reaches the store, whichever process sent it, counted by
// database, command, collection and filter shape. The launcher rewrites the file every 5 s, so a snapshot
// waits for a write that happened after the moment it stands for.
import fs from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { round } from './lib.mjs';

/** The launcher's rewrite period (stats.go) plus slack: how long a snapshot may wait for a fresh file. */
const FRESH_LIMIT_MS = 20_000;

/**
 * `nonStorage`: command names that are no storage operation (testkit's NON_STORAGE_COMMANDS: handshakes,
 * ping, endSessions...). `excludeDbs`: databases the bench itself writes (the raw insertOne's).
 */
export function storeStats({ file, nonStorage, excludeDbs = [] }) {
  const skipDb = new Set(excludeDbs);
  const read = async () => {
    const list = JSON.parse(await fs.readFile(file, 'utf8'));
    const counts = new Map();
    for (const s of list) {
      // key = "<db> <command> <collection> <filter shape>"; the collection is empty for getMore and the like.
      const [db, command, collection = ''] = s.key.split(' ');
      // An empty command is a message the launcher could not read as OP_MSG: the legacy OP_QUERY handshake.
      if (!command || nonStorage.has(command) || skipDb.has(db)) continue;
      counts.set(s.key, { db, command, collection, shape: s.key.split(' ').slice(3).join(' '), count: s.count });
    }
    return counts;
  };
  return {
    file,
    /** The statistics as written at some moment after `afterMs` (default now): {atMs, counts}. */
    async snapshot(afterMs = Date.now(), signal) {
      const deadline = Date.now() + FRESH_LIMIT_MS;
      for (;;) {
        const st = await fs.stat(file).catch(() => undefined);
        if (st && st.mtimeMs > afterMs) {
          try {
            return { atMs: st.mtimeMs, counts: await read() };
          } catch {
            // replaced while being read: the next rename brings a whole file
          }
        }
        if (Date.now() > deadline || signal?.aborted) {
          throw new Error(`no FerretDB statistics newer than ${new Date(afterMs).toISOString()} in ${file}`);
        }
        await sleep(100);
      }
    },
  };
}

/** b − a per key (keys only in b count fully). */
export function diff(a, b) {
  const out = new Map();
  for (const [key, v] of b.counts) {
    const n = v.count - (a.counts.get(key)?.count ?? 0);
    if (n > 0) out.set(key, { ...v, count: n });
  }
  return out;
}

const total = (m) => [...m.values()].reduce((s, v) => s + v.count, 0);

/** Per key: what one unit of `units` cost, once `idle` (per key per second) over `seconds` is taken off. */
function perUnit(d, units, idle, seconds) {
  const out = new Map();
  for (const [key, v] of d) {
    const n = (v.count - (idle.get(key)?.count ?? 0) * seconds) / units;
    if (n > 0) out.set(key, { ...v, count: n });
  }
  return out;
}

/** The platform's background operations per second per key, while nothing is asked of it. */
export async function idleRate(stats, signal) {
  const a = await stats.snapshot(Date.now(), signal);
  const b = await stats.snapshot(a.atMs, signal);
  const seconds = (b.atMs - a.atMs) / 1000;
  return { seconds: round(seconds, 1), perKey: perUnit(diff(a, b), seconds, new Map(), 0), perSecond: round(total(diff(a, b)) / seconds, 1) };
}

/**
 * What one call of `poll` (a read the bench makes through the API) costs the store, per key: `times` calls
 * between two snapshots, less the idle background of that window.
 */
export async function pollCost(stats, idle, poll, times, signal) {
  const a = await stats.snapshot(Date.now(), signal);
  for (let i = 0; i < times; i++) await poll();
  const b = await stats.snapshot(Date.now(), signal);
  const perKey = perUnit(diff(a, b), times, idle.perKey, (b.atMs - a.atMs) / 1000);
  return { times, perKey, perPoll: round(total(perKey), 2) };
}

/**
 * The storage operations of a phase of `emails` emails between snapshots `a` and `b`, less the bench's own
 * polls (`polls`: [{count, cost}] with cost from pollCost). Reports the total, per email, the idle background
 * of the window (counted in the total: the store did that work during the phase) and the top contributors by
 * database, command and collection.
 */
export function phaseOps({ a, b, emails, polls, idle, top = 8 }) {
  const d = diff(a, b);
  const measured = total(d);
  let pollOps = 0;
  for (const { count, cost } of polls) {
    for (const [key, c] of cost.perKey) {
      const v = d.get(key);
      if (!v) continue;
      const take = Math.min(v.count, c.count * count);
      v.count -= take;
      pollOps += take;
    }
  }
  const seconds = (b.atMs - a.atMs) / 1000;
  const ops = total(d);
  const byCollection = new Map();
  for (const v of d.values()) {
    const key = `${v.db} ${v.command} ${v.collection}`;
    const e = byCollection.get(key) ?? { database: v.db, command: v.command, collection: v.collection || '(cursor)', count: 0, shapes: {} };
    e.count += v.count;
    if (v.shape) e.shapes[v.shape] = round((e.shapes[v.shape] ?? 0) + v.count, 1);
    byCollection.set(key, e);
  }
  const contributors = [...byCollection.values()]
    .filter((e) => e.count >= 0.5)
    .sort((x, y) => y.count - x.count)
    .map((e) => ({ ...e, count: round(e.count, 1), perEmail: round(e.count / emails, 3) }));
  const background = (idle.perSecond ?? 0) * seconds;
  return {
    emails,
    windowSeconds: round(seconds, 1),
    measuredOps: measured,
    benchPollOps: round(pollOps, 1),
    ops: round(ops, 1),
    perEmail: round(ops / emails, 2),
    idleBackgroundOps: round(background, 0),
    perEmailWithoutIdle: round(Math.max(0, ops - background) / emails, 2),
    top: contributors.slice(0, top),
    all: contributors,
  };
}
