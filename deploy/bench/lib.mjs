// Small helpers for `npm run bench`: statistics, process memory, HTTP, the table.
/* global fetch */
import fs from 'node:fs';
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

/** Nearest-rank percentile of numbers (sorted copy); undefined for an empty list. */
export function percentile(values, p) {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

export function summarize(values) {
  if (values.length === 0) return { count: 0, p50: null, p99: null, max: null, mean: null };
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return {
    count: values.length,
    p50: round(percentile(values, 50)),
    p99: round(percentile(values, 99)),
    max: round(Math.max(...values)),
    mean: round(mean),
  };
}

export function round(n, digits = 2) {
  if (n === undefined || n === null || !Number.isFinite(n)) return null;
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** Every process below `rootPid` (children, grandchildren...), from /proc. */
export function descendants(rootPid) {
  let entries;
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return [];
  }
  const parentOf = new Map();
  for (const e of entries) {
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      parentOf.set(Number(e), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const found = [];
  const frontier = [rootPid];
  while (frontier.length > 0) {
    const parent = frontier.pop();
    for (const [pid, ppid] of parentOf) {
      if (ppid === parent) {
        found.push(pid);
        frontier.push(pid);
      }
    }
  }
  return found;
}

/** Which platform child a command line belongs to (undefined: not one of them). */
function childName(cmdline) {
  const service = /services\/([a-z]+)\/dist\/main\.js/.exec(cmdline);
  if (service) return service[1];
  if (cmdline.includes('gateway/dist/server.js')) return 'gateway';
  if (cmdline.includes('smtp-sink.main.js')) return 'smtp-sink';
  if (cmdline.includes('nats-server')) return 'nats';
  if (cmdline.includes('ferretdb')) return 'ferretdb';
  return undefined;
}

/**
 * `read(pid)` of every platform process below this one, summed by child name; `read` answers a number or
 * undefined (nothing to count). A process that ends between the listing and the read is left out.
 */
function sumByChild(read) {
  const out = {};
  for (const pid of descendants(process.pid)) {
    try {
      const name = childName(fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' '));
      if (!name) continue;
      const value = read(pid);
      if (value === undefined || !Number.isFinite(value)) continue;
      out[name] = (out[name] ?? 0) + value;
    } catch {
      // the process ended between the listing and the read
    }
  }
  return out;
}

/** VmRSS in MiB of every platform process below this one, by child name (plus this bench process). */
export function platformRss() {
  const out = sumByChild((pid) => {
    const kb = Number(/VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
    return kb / 1024;
  });
  for (const name of Object.keys(out)) out[name] = round(out[name], 1);
  out['bench (this process)'] = round(process.memoryUsage().rss / 1024 / 1024, 1);
  return out;
}

/**
 * CPU seconds (user + system) each platform process below this one has used so far, by child name (plus this
 * bench process). The difference of two readings is what a phase cost each process: the profile of where a
 * 2-core machine's time went.
 */
export function platformCpuSeconds() {
  const tick = 100; // USER_HZ on Linux
  const out = sumByChild((pid) => {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / tick;
  });
  const own = process.cpuUsage();
  out['bench (this process)'] = (own.user + own.system) / 1e6;
  return out;
}

/** What each process spent between two platformCpuSeconds readings, largest first, with the total. */
export function cpuBetween(a, b, perItems) {
  const rows = Object.keys(b)
    .map((name) => ({ name, seconds: round(b[name] - (a[name] ?? 0), 2) }))
    .sort((x, y) => y.seconds - x.seconds);
  const total = round(rows.reduce((s, r) => s + r.seconds, 0), 2);
  return {
    totalSeconds: total,
    msPerItem: perItems ? round((total * 1000) / perItems, 2) : null,
    byProcess: rows.map((r) => ({ ...r, msPerItem: perItems ? round((r.seconds * 1000) / perItems, 2) : null })),
  };
}

export async function api(base, method, path, { token, body } = {}) {
  const headers = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let parsed;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed };
}

export function runCli(repoRoot, args, env) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [`${repoRoot}/services/auth/bin/mailfleet.mjs`, ...args], { env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      if (err) reject(new Error(`mailfleet ${args.join(' ')} failed: ${String(stderr).trim() || err.message}`));
      else resolve(String(stdout));
    });
  });
}

/** The sink's own reader (either storage layout), loaded when first needed: dist/ may be built after this module loads. */
const sinkReader = async (dir) => (await import('../dist/smtp-sink.js')).createSinkReader(dir, { withRaw: false });
const sinkCounters = new Map();

/** Number of complete messages in an SMTP sink directory (read incrementally: each record once per directory). */
export async function sinkCount(dir) {
  let counter = sinkCounters.get(dir);
  if (!counter) {
    counter = { reader: await sinkReader(dir), count: 0 };
    sinkCounters.set(dir, counter);
  }
  try {
    counter.count += (await counter.reader.read()).length;
  } catch {
    // not readable now: the next call reads it
  }
  return counter.count;
}

const fmt = (v, unit = '') => (v === null || v === undefined ? '—' : `${typeof v === 'number' ? v.toLocaleString('en-US', { maximumFractionDigits: 2 }) : v}${unit}`);
export { fmt };

/** Rows of [label, value] (or [section] for a heading) as an aligned text table. */
export function table(rows) {
  const width = Math.max(...rows.filter((r) => r.length > 1).map((r) => r[0].length));
  return rows
    .map((r) => (r.length === 1 ? `\n${r[0]}\n${'-'.repeat(r[0].length)}` : `  ${r[0].padEnd(width)}  ${r[1]}`))
    .join('\n');
}

/**
 * Follows an SMTP sink directory incrementally: each complete message is returned once.
 * `scan()` returns the messages new since the last scan as {rcptTo, mailFrom, receivedAtMs}.
 * `skipExisting()` marks what is there now as seen.
 */
export function sinkWatcher(dir) {
  let reader;
  const read = async () => {
    reader ??= await sinkReader(dir);
    try {
      return await reader.read();
    } catch {
      return []; // not readable now: the next scan reads it
    }
  };
  return {
    async skipExisting() {
      await read();
    },
    async scan() {
      return (await read()).map((m) => ({ rcptTo: m.rcptTo ?? [], mailFrom: m.mailFrom, receivedAtMs: Date.parse(m.receivedAt) }));
    },
  };
}

/** Runs `fn` over `items` with at most `limit` in flight; resolves to the results in order. */
export async function mapLimit(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i], i);
      }
    }),
  );
  return out;
}

/** api() that answers {status: 0, body: error message} instead of throwing (the gateway may be down in a drill). */
export async function apiSafe(base, method, path, opts) {
  try {
    return await api(base, method, path, opts);
  } catch (error) {
    return { status: 0, body: String(error.cause?.code ?? error.message) };
  }
}

/**
 * apiSafe() asked again every 2 s while the answer is a 5xx or no answer (a busy or restarting platform),
 * for up to `forMs`; resolves to the last answer.
 */
export async function apiPatient(base, method, path, opts, { forMs, signal }) {
  const until = Date.now() + forMs;
  for (;;) {
    const r = await apiSafe(base, method, path, opts);
    if ((r.status > 0 && r.status < 500) || Date.now() > until || signal?.aborted) return r;
    await sleep(2000);
  }
}
