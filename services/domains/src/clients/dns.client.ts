import { lookup, Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { Logger } from '@mailfleet/kit';
import type { DnsServerAddress } from '../config.js';
import type { LookupResult, MxValue } from '../domain/records.js';

/** DNS lookups for verification, each answer classified as found, missing or temporary. */
export interface DnsClient {
  /** TXT records, each the concatenation of its character-strings. */
  txt(name: string): Promise<LookupResult<string>>;
  mx(name: string): Promise<LookupResult<MxValue>>;
}

/** Answers that prove the record is absent; every other failure says nothing about it. */
const ABSENT = new Set(['ENOTFOUND', 'ENODATA']);

const READABLE: Record<string, string> = {
  ESERVFAIL: 'SERVFAIL', ETIMEOUT: 'timeout', EREFUSED: 'REFUSED', ECONNREFUSED: 'connection refused',
  EBADRESP: 'bad response', ECANCELLED: 'cancelled', ENOTFOUND: 'NXDOMAIN', ENODATA: 'no such record',
};

export function classifyDnsError(err: unknown): { kind: 'missing' | 'temporary'; code: string } {
  const code = String((err as { code?: unknown })?.code ?? 'EUNKNOWN');
  return { kind: ABSENT.has(code) ? 'missing' : 'temporary', code: READABLE[code] ?? code };
}

/** `host[:port]` in the form Resolver.setServers takes. */
function serverString(host: string, port: number | undefined): string {
  if (isIP(host) === 6) return port ? `[${host}]:${port}` : host;
  return port ? `${host}:${port}` : host;
}

/**
 * Node's resolver (c-ares, no cache) with a per-query timeout and tries,
 * asking the configured servers (DNS_SERVERS) or the system's. Host names in
 * DNS_SERVERS are resolved once, at start. Each lookup also has an overall
 * guard so one stuck query cannot hold a verification claim forever.
 */
export async function createDnsClient(opts: {
  servers?: readonly DnsServerAddress[] | undefined;
  timeoutMs: number;
  tries: number;
  logger: Logger;
}): Promise<DnsClient> {
  const resolver = new Resolver({ timeout: opts.timeoutMs, tries: opts.tries });
  if (opts.servers && opts.servers.length > 0) {
    const list: string[] = [];
    for (const s of opts.servers) {
      const host = isIP(s.host) ? s.host : (await lookup(s.host)).address;
      list.push(serverString(host, s.port));
    }
    resolver.setServers(list);
  }
  opts.logger.info({ dnsServers: resolver.getServers() }, 'domain verification DNS servers');
  const serverCount = Math.max(1, resolver.getServers().length);
  const guardMs = opts.timeoutMs * opts.tries * serverCount * 4 + 1_000;

  async function guarded<T>(fn: () => Promise<T[]>): Promise<LookupResult<T>> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const values = await Promise.race([
        fn(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(Object.assign(new Error('DNS lookup took too long'), { code: 'ETIMEOUT' })), guardMs);
        }),
      ]);
      return { kind: 'found', values };
    } catch (err) {
      const c = classifyDnsError(err);
      return { kind: c.kind, code: c.code };
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    txt: (name) => guarded(async () => (await resolver.resolveTxt(name)).map((chunks) => chunks.join(''))),
    mx: (name) => guarded(async () => (await resolver.resolveMx(name)).map((mx) => ({ priority: mx.priority, exchange: mx.exchange }))),
  };
}
