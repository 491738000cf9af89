import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import { Resolver } from 'node:dns/promises';
import path from 'node:path';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { startDnsServer, type MxRecord } from './dns-server.js';
import { LOOPBACK } from './net.js';

/**
 * Local mode's DNS (ARCHITECTURE.md "Running it"): when `npm start` runs its own SMTP sink and no
 * DNS_SERVERS is set, this authoritative server answers for every domain the domains service
 * publishes, so verification and DKIM work with no DNS set-up. The domains service asks it
 * through DNS_SERVERS with the same client and protocol as in production, and publishes through
 * a small HTTP control interface (LOCAL_DNS_CONTROL_URL), loopback only, under a random path
 * prefix so that only who was given the URL (the platform's children) can change the zone.
 *
 * Records belong to an owner (the domain id): two teams may register the same name, and deleting
 * one team's domain must not remove the other's values. The union is served. The owners' records
 * are kept in `<dataDir>/dns/zone.json`, so a restart of `npm start` keeps verified domains verified.
 */

/** One published record, as the domains service describes it. */
export interface LocalDnsRecord {
  /** Fully qualified, no trailing dot. */
  name: string;
  type: 'TXT' | 'MX';
  /** TXT: the text; MX: the exchange host. */
  value: string;
  /** MX preference. */
  priority?: number | null;
}

export interface LocalDns {
  /** `127.0.0.1:PORT` (UDP and TCP): the DNS_SERVERS value of local mode. */
  readonly address: string;
  /** `http://127.0.0.1:PORT/<secret>`: PUT/DELETE `<controlUrl>/owners/{id}`, GET `<controlUrl>/owners`. */
  readonly controlUrl: string;
  /** The records of every owner, as served now. */
  records(): Record<string, LocalDnsRecord[]>;
  close(): Promise<void>;
}

export interface StartLocalDnsOptions {
  /** Zone and address files go to `<dataDir>/dns/`. */
  dataDir: string;
  /** DNS port (UDP and TCP); default a free one. */
  port?: number;
  /** Control port; default a free one. */
  controlPort?: number;
}

/** What `startLocalDns` leaves in `<dataDir>/dns/server.json` while it runs (the dev inbox reads it). */
export interface LocalDnsState {
  address: string;
  controlUrl: string;
  pid: number;
}

const MAX_BODY = 256 * 1024;
const OWNER_PATH = /^\/owners\/([A-Za-z0-9_-]{1,128})$/;
const PREFIX_PATH = /^\/([a-f0-9]{32})(\/.*)$/;

export function localDnsDir(dataDir: string): string {
  return path.join(dataDir, 'dns');
}

/** The running local DNS server of a data dir, or undefined when local mode is not running there. */
export async function readLocalDnsState(dataDir: string): Promise<LocalDnsState | undefined> {
  try {
    const state = JSON.parse(await fsp.readFile(path.join(localDnsDir(dataDir), 'server.json'), 'utf8')) as LocalDnsState;
    return typeof state.address === 'string' ? state : undefined;
  } catch {
    return undefined;
  }
}

export async function startLocalDns(opts: StartLocalDnsOptions): Promise<LocalDns> {
  const dir = localDnsDir(opts.dataDir);
  await fsp.mkdir(dir, { recursive: true });
  const zoneFile = path.join(dir, 'zone.json');
  const stateFile = path.join(dir, 'server.json');
  const owners = new Map<string, LocalDnsRecord[]>(Object.entries(await loadZone(zoneFile)));

  const dns = await startDnsServer(opts.port !== undefined ? { port: opts.port } : {});
  const serve = (): void => {
    dns.clear();
    const byKey = new Map<string, { name: string; type: 'TXT' | 'MX'; values: Map<string, string | MxRecord> }>();
    for (const records of owners.values()) {
      for (const r of records) {
        const key = `${r.type} ${r.name.toLowerCase()}`;
        let set = byKey.get(key);
        if (!set) byKey.set(key, (set = { name: r.name, type: r.type, values: new Map() }));
        // Equal values from two owners (two teams' SPF records of one name) are one record.
        const value = r.type === 'MX' ? { priority: r.priority ?? 10, exchange: r.value } : r.value;
        set.values.set(JSON.stringify(value), value);
      }
    }
    for (const set of byKey.values()) {
      if (set.type === 'MX') dns.setRecords(set.name, 'MX', [...set.values.values()] as MxRecord[]);
      else dns.setRecords(set.name, 'TXT', [...set.values.values()] as string[]);
    }
  };
  const persist = async (): Promise<void> => {
    // Write then rename: a crash leaves the old zone or the new one, never half of one.
    const tmp = `${zoneFile}.${process.pid}.tmp`;
    await fsp.writeFile(tmp, `${JSON.stringify(Object.fromEntries(owners), null, 2)}\n`);
    await fsp.rename(tmp, zoneFile);
  };
  serve();

  // One change at a time, so the zone file follows the order of the requests.
  let chain: Promise<void> = Promise.resolve();
  const change = (apply: () => void): Promise<void> => {
    const next = chain.then(async () => {
      apply();
      serve();
      await persist();
    });
    chain = next.catch(() => undefined);
    return next;
  };

  const secret = randomBytes(16).toString('hex');
  const control = http.createServer((req, res) => {
    const reply = (code: number, body?: unknown): void => {
      res.writeHead(code, body === undefined ? {} : { 'content-type': 'application/json' });
      res.end(body === undefined ? undefined : JSON.stringify(body));
    };
    const prefixed = PREFIX_PATH.exec(new URL(req.url ?? '/', 'http://local-dns').pathname);
    if (prefixed?.[1] !== secret) return reply(404, { error: 'not found' });
    const pathname = prefixed[2]!;
    if (req.method === 'GET' && pathname === '/owners') return reply(200, Object.fromEntries(owners));
    const owner = OWNER_PATH.exec(pathname)?.[1];
    if (!owner) return reply(404, { error: 'PUT or DELETE /owners/{id}, GET /owners' });
    if (req.method === 'DELETE') {
      change(() => void owners.delete(owner)).then(() => reply(204), (e: Error) => reply(500, { error: e.message }));
      return;
    }
    if (req.method !== 'PUT') return reply(405, { error: 'PUT or DELETE' });
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) req.destroy();
      else chunks.push(c);
    });
    req.on('end', () => {
      let records: LocalDnsRecord[];
      try {
        records = parseRecords(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (e) {
        return reply(400, { error: (e as Error).message });
      }
      change(() => void owners.set(owner, records)).then(() => reply(204), (e: Error) => reply(500, { error: e.message }));
    });
  });
  const controlPort = await new Promise<number>((resolve, reject) => {
    control.once('error', reject);
    control.listen(opts.controlPort ?? 0, LOOPBACK, () => {
      control.off('error', reject);
      resolve((control.address() as { port: number }).port);
    });
  });
  const controlUrl = `http://${LOOPBACK}:${controlPort}/${secret}`;
  const state: LocalDnsState = { address: dns.address, controlUrl, pid: process.pid };
  await fsp.writeFile(stateFile, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });

  let closed: Promise<void> | undefined;
  return {
    address: dns.address,
    controlUrl,
    records: () => Object.fromEntries([...owners].map(([k, v]) => [k, [...v]])),
    close() {
      closed ??= (async () => {
        control.closeAllConnections();
        await new Promise<void>((resolve) => control.close(() => resolve()));
        await chain;
        await dns.close();
        // Only our own state file: a second platform on the same data dir may have replaced it.
        const current = await readLocalDnsState(opts.dataDir);
        if (current?.pid === process.pid && current.address === dns.address) fs.rmSync(stateFile, { force: true });
      })();
      return closed;
    },
  };
}

async function loadZone(file: string): Promise<Record<string, LocalDnsRecord[]>> {
  let text: string;
  try {
    text = await fsp.readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw error;
  }
  const parsed = JSON.parse(text) as Record<string, unknown>;
  return Object.fromEntries(Object.entries(parsed).map(([owner, records]) => [owner, parseRecords({ records })]));
}

function parseRecords(body: unknown): LocalDnsRecord[] {
  const list = (body as { records?: unknown })?.records;
  if (!Array.isArray(list)) throw new Error('body must be {"records": [...]}');
  return list.map((item: unknown, i): LocalDnsRecord => {
    const r = item as Partial<LocalDnsRecord>;
    if (typeof r?.name !== 'string' || !/^[A-Za-z0-9_.-]{1,253}$/.test(r.name)) throw new Error(`records[${i}].name must be a host name`);
    if (r.type !== 'TXT' && r.type !== 'MX') throw new Error(`records[${i}].type must be TXT or MX`);
    if (typeof r.value !== 'string' || r.value.length > 4096) throw new Error(`records[${i}].value must be a string`);
    const priority = r.priority ?? null;
    if (priority !== null && !(Number.isInteger(priority) && priority >= 0 && priority <= 65535)) {
      throw new Error(`records[${i}].priority must be 0-65535`);
    }
    return { name: r.name.replace(/\.$/, ''), type: r.type, value: r.value, priority };
  });
}

/** `pass`, `fail`, `neutral`, `none` (no signature), `temperror`… for each signature: `d=domain`. */
export interface DkimResult {
  result: string;
  domain?: string;
  comment?: string;
}

/**
 * Verifies a message's DKIM signatures against a DNS server (local mode's), over DNS as a
 * receiver would. An unsigned message gives `none`; an unreachable server a `temperror`.
 */
export async function verifyDkim(raw: Buffer, dnsAddress: string): Promise<DkimResult[]> {
  const resolver = new Resolver({ timeout: 2_000, tries: 1 });
  resolver.setServers([dnsAddress]);
  const verified = await dkimVerify(raw, {
    resolver: async (name: string, type: string) => (type === 'TXT' ? resolver.resolveTxt(name) : []),
  });
  if (verified.results.length === 0) return [{ result: 'none' }];
  return verified.results.map((r) => ({
    result: r.status.result,
    ...(r.signingDomain ? { domain: r.signingDomain } : {}),
    ...(r.status.comment ? { comment: String(r.status.comment) } : {}),
  }));
}
