import path from 'node:path';
import { simpleParser, type AddressObject } from 'mailparser';

/** One message of the embedded SMTP sink (deploy/src/mail-store.ts). */
export interface StoredMessage {
  id: string;
  receivedAt: Date;
  mailFrom: string | undefined;
  rcptTo: string[];
  raw: Buffer;
}

/** The local runner's readers (deploy/src/mail-store.ts, local-dns.ts, smtp-sink.ts), as `mailfleet inbox` uses them. */
export interface DevInboxReaders {
  readMailStore(mailDir: string): Promise<StoredMessage[]>;
  readLocalDnsState(dataDir: string): Promise<{ address: string } | undefined>;
  verifyDkim(raw: Buffer, dnsAddress: string): Promise<{ result: string; domain?: string; comment?: string }[]>;
  simulatorRule(address: string): string | undefined;
}

export type DkimResult = 'pass' | 'fail' | 'none' | 'neutral' | 'temperror' | 'permerror';

export interface DevInboxSummary {
  id: string;
  receivedAt: string;
  from: string;
  to: string[];
  subject: string;
  size: number;
  dkim: DkimResult;
}

export interface DevInboxMessage {
  id: string;
  receivedAt: string;
  from: string;
  to: string[];
  subject: string;
  headers: { name: string; value: string }[];
  html: string | null;
  text: string | null;
  dkim: { result: DkimResult; domain: string | null; selector: string | null };
  simulator: string | null;
}

export interface DevInbox {
  /** Newest first; `cursor` is the id of the last message of the previous page. */
  list(limit: number, cursor?: string): Promise<{ data: DevInboxSummary[]; nextCursor: string | null }>;
  get(id: string): Promise<DevInboxMessage | undefined>;
}

/**
 * `<repo>/deploy/dist/` seen from `<repo>/gateway/dist/clients/dev-inbox.js`. The runner is not part of the
 * gateway's image, and only the runner turns the dev inbox on (MAILFLEET_DEV_INBOX_DIR), so its readers are
 * loaded from the checkout when first asked for, as `npx mailfleet inbox` does; the sink's layout stays the
 * sink's own business.
 */
const DEPLOY_DIST = new URL('../../../deploy/dist/', import.meta.url);

export async function loadDevInboxReaders(): Promise<DevInboxReaders> {
  const [store, dns, sink] = await Promise.all([
    import(new URL('mail-store.js', DEPLOY_DIST).href) as Promise<Pick<DevInboxReaders, 'readMailStore'>>,
    import(new URL('local-dns.js', DEPLOY_DIST).href) as Promise<Pick<DevInboxReaders, 'readLocalDnsState' | 'verifyDkim'>>,
    import(new URL('smtp-sink.js', DEPLOY_DIST).href) as Promise<Pick<DevInboxReaders, 'simulatorRule'>>,
  ]);
  return { readMailStore: store.readMailStore, readLocalDnsState: dns.readLocalDnsState, verifyDkim: dns.verifyDkim, simulatorRule: sink.simulatorRule };
}

const RESULTS: readonly DkimResult[] = ['pass', 'fail', 'none', 'neutral', 'temperror', 'permerror'];

/** A message's DKIM verdict: pass when any signature passes, else the first signature's result. */
export function dkimVerdict(results: readonly { result: string; domain?: string }[]): { result: DkimResult; domain: string | null } {
  const chosen = results.find((r) => r.result === 'pass') ?? results[0];
  if (!chosen) return { result: 'none', domain: null };
  const result = (RESULTS as readonly string[]).includes(chosen.result) ? (chosen.result as DkimResult) : 'neutral';
  return { result, domain: chosen.domain ?? null };
}

function addressText(a: AddressObject | AddressObject[] | undefined): string | undefined {
  if (!a) return undefined;
  const names = (Array.isArray(a) ? a : [a]).flatMap((x) => x.value).map((v) => (v.name ? `${v.name} <${v.address ?? ''}>` : (v.address ?? '')));
  return names.filter((n) => n.length > 0).join(', ') || undefined;
}

function selectorOf(raw: Buffer, domain: string | null): string | null {
  // The s= tag of the DKIM-Signature header that names the verdict's domain.
  const head = raw.subarray(0, Math.min(raw.length, 64 * 1024)).toString('latin1').split(/\r?\n\r?\n/)[0] ?? '';
  const unfolded = head.replace(/\r?\n[ \t]+/g, ' ');
  for (const line of unfolded.split(/\r?\n/)) {
    if (!/^dkim-signature:/i.test(line)) continue;
    const d = /[;\s:]d=([^;\s]+)/i.exec(line)?.[1];
    const s = /[;\s:]s=([^;\s]+)/i.exec(line)?.[1];
    if (s && (!domain || d?.toLowerCase() === domain.toLowerCase())) return s;
  }
  return null;
}

/**
 * The dev inbox over the sink's mail dir: messages are read through the runner's reader on each call (the
 * sink appends; a local inbox is small), parsed with mailparser, and checked for DKIM against local mode's
 * DNS server; a message never changes, so its parse and verdict are kept by id.
 */
export function createDevInbox(opts: { mailDir: string; dataDir: string; readers?: () => Promise<DevInboxReaders> }): DevInbox {
  let readers: Promise<DevInboxReaders> | undefined;
  const load = () => (readers ??= (opts.readers ?? loadDevInboxReaders)().catch((err: unknown) => {
    readers = undefined;
    throw err;
  }));
  const parsed = new Map<string, { summary: DevInboxSummary; detail: DevInboxMessage }>();

  async function describe(r: DevInboxReaders, m: StoredMessage) {
    const hit = parsed.get(m.id);
    if (hit) return hit;
    const mail = await simpleParser(m.raw, { skipImageLinks: true });
    const dns = await r.readLocalDnsState(opts.dataDir);
    let verdict: { result: DkimResult; domain: string | null } = { result: 'temperror', domain: null };
    if (dns) {
      try {
        verdict = dkimVerdict(await r.verifyDkim(m.raw, dns.address));
      } catch {
        verdict = { result: 'temperror', domain: null };
      }
    }
    const from = addressText(mail.from) ?? m.mailFrom ?? '';
    const base = { id: m.id, receivedAt: m.receivedAt.toISOString(), from, to: m.rcptTo, subject: mail.subject ?? '' };
    const rule = m.rcptTo.map((a) => r.simulatorRule(a)).find((x) => x !== undefined);
    const entry = {
      summary: { ...base, size: m.raw.length, dkim: verdict.result },
      detail: {
        ...base,
        headers: mail.headerLines.map((h) => ({ name: h.line.slice(0, h.line.indexOf(':')).trim() || h.key, value: h.line.slice(h.line.indexOf(':') + 1).replace(/\r?\n[ \t]+/g, ' ').trim() })),
        html: typeof mail.html === 'string' ? mail.html : null,
        text: mail.text ?? null,
        dkim: { ...verdict, selector: verdict.result === 'none' ? null : selectorOf(m.raw, verdict.domain) },
        simulator: rule ?? null,
      },
    };
    // A verdict made while local DNS was not up is not kept: it may pass once it is.
    if (dns && verdict.result !== 'temperror') {
      if (parsed.size >= 5_000) parsed.delete(parsed.keys().next().value!);
      parsed.set(m.id, entry);
    }
    return entry;
  }

  async function newestFirst(r: DevInboxReaders): Promise<StoredMessage[]> {
    return [...(await r.readMailStore(path.resolve(opts.mailDir)))].reverse();
  }

  return {
    async list(limit, cursor) {
      const r = await load();
      const all = await newestFirst(r);
      const at = cursor ? all.findIndex((m) => m.id === cursor) : -1;
      // A cursor that names no message (the data dir was wiped) ends the listing rather than starting it over.
      if (cursor && at < 0) return { data: [], nextCursor: null };
      const start = at + 1;
      const page = all.slice(start, start + limit);
      const data = [];
      for (const m of page) data.push((await describe(r, m)).summary);
      const more = start + limit < all.length;
      return { data, nextCursor: more && page.length > 0 ? page[page.length - 1]!.id : null };
    },
    async get(id) {
      const r = await load();
      const m = (await newestFirst(r)).find((x) => x.id === id);
      return m ? (await describe(r, m)).detail : undefined;
    },
  };
}
