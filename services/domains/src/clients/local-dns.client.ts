import type { Logger } from '@mailfleet/kit';
import type { DnsRecordSpec } from '../domain/records.js';

/**
 * Local mode only (LOCAL_DNS_CONTROL_URL, set by `npm start`, never by the Helm chart): hands a
 * domain's records to the platform's local authoritative DNS server, which verification then
 * asks over DNS like any other server. Publishing is idempotent (the domain's whole set replaces
 * what it had), so a lost call is repaired by the next one: `PUT verify` publishes again.
 */
export interface RecordPublisher {
  publish(domainId: string, records: readonly DnsRecordSpec[]): Promise<void>;
  remove(domainId: string): Promise<void>;
}

/** Does nothing: production, where the customer publishes records in their own zone. */
export const noRecordPublisher: RecordPublisher = {
  publish: async () => undefined,
  remove: async () => undefined,
};

export function createLocalDnsPublisher(opts: { controlUrl: string; logger: Logger; timeoutMs?: number; fetch?: typeof fetch }): RecordPublisher {
  const base = opts.controlUrl.replace(/\/+$/, '');
  const doFetch = opts.fetch ?? fetch;
  const timeoutMs = opts.timeoutMs ?? 5_000;

  // A failure is logged, not thrown: the domain exists either way, and its records are
  // published again by the next PUT verify (or stay unpublished, and verification says so).
  async function call(method: 'PUT' | 'DELETE', domainId: string, body?: unknown): Promise<void> {
    try {
      const res = await doFetch(`${base}/owners/${encodeURIComponent(domainId)}`, {
        method,
        ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
    } catch (err) {
      opts.logger.warn({ domainId, method, err: (err as Error).message }, 'local DNS: could not update the records of the domain');
    }
  }

  return {
    publish: (domainId, records) =>
      call('PUT', domainId, { records: records.map((r) => ({ name: r.name, type: r.type, value: r.value, priority: r.priority })) }),
    remove: (domainId) => call('DELETE', domainId),
  };
}
