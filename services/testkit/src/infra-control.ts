import { inject } from 'vitest';
import type { DnsFailureMode, DnsRecordType, DnsRecordValues } from './dns-server.js';

/** POSTs to the global setup's control endpoint (from inject('infraControlUrl') unless `baseUrl` is given). */
export async function controlRequest<T = unknown>(path: string, body: object = {}, baseUrl?: string): Promise<T> {
  const base = baseUrl ?? inject('infraControlUrl');
  if (!base) {
    throw new Error('infraControlUrl is not provided: run this test in the integration or e2e vitest project');
  }
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`infra control ${path} failed (${res.status}): ${text}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

export interface NatsInstanceOptions {
  /**
   * A named NATS server of its own, started on first use and kept for the run
   * (integration project only). Stopping the shared server (no instance) hits
   * every test file running at that moment; a fault drill that only concerns
   * one file should use its own instance.
   */
  instance?: string;
}

/** Stops NATS (clean shutdown); its URL stays valid for startNats(). */
export async function stopNats(opts: NatsInstanceOptions = {}): Promise<void> {
  await controlRequest('/nats/stop', opts);
}

/** Starts NATS again on the same port and store dir (or a named instance the first time); resolves to its URL once JetStream is up. */
export async function startNats(opts: NatsInstanceOptions = {}): Promise<string> {
  return (await controlRequest<{ url: string }>('/nats/start', opts)).url;
}

export async function restartNats(opts: NatsInstanceOptions = {}): Promise<void> {
  await controlRequest('/nats/restart', opts);
}

/** Kills NATS without a clean shutdown (default SIGKILL) and waits until it is gone. */
export async function killNats(opts: NatsInstanceOptions & { signal?: NodeJS.Signals } = {}): Promise<void> {
  await controlRequest('/nats/kill', opts);
}

/** A NATS server (JetStream on) for this caller alone, controllable with `{instance: name}`; resolves to its URL. */
export async function isolatedNats(name = `nats-${process.pid}-${Math.random().toString(36).slice(2, 8)}`): Promise<{ instance: string; url: string }> {
  return { instance: name, url: await startNats({ instance: name }) };
}

/** e2e: sets records on the DNS server that the platform asks (DNS_SERVERS). Empty values remove them. */
export async function setDnsRecords(name: string, type: DnsRecordType, values: DnsRecordValues): Promise<void> {
  await controlRequest('/dns/records', { name, type, values });
}

/**
 * e2e: makes the platform's DNS server fail for `name` and every name below
 * it (or for all names with `'*'`): `'servfail'` answers SERVFAIL, `'timeout'`
 * does not answer. `null` lifts the failure; records are answered again.
 */
export async function setDnsFailure(name: string, mode: DnsFailureMode | null): Promise<void> {
  await controlRequest('/dns/failure', { name, mode });
}

export async function clearDnsRecords(): Promise<void> {
  await controlRequest('/dns/clear');
}

/** e2e fault drills: one platform child by name ('emails', 'gateway', 'nats', ...). */
export async function killChild(name: string, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  await controlRequest('/platform/kill', { name, signal });
}

export async function stopChild(name: string): Promise<void> {
  await controlRequest('/platform/stop', { name });
}

/** Starts a stopped child; resolves once it reports ready. */
export async function startChild(name: string): Promise<void> {
  await controlRequest('/platform/start', { name });
}

export async function restartChild(name: string): Promise<void> {
  await controlRequest('/platform/restart', { name });
}

/** e2e: the last output lines of one child. */
export async function childLogs(name: string): Promise<string[]> {
  return controlRequest<string[]>('/platform/logs', { name });
}
