import type { LookupAddress } from 'node:dns';
import dns from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { rootCertificates } from 'node:tls';
import { InvalidArgumentError } from '@mailfleet/kit';
import { Pool, type Dispatcher } from 'undici';
import { classifyAddress } from '../domain/addresses.js';
import type { AttemptResult } from '../domain/retry-policy.js';
import type { WebhookTarget } from '../domain/urls.js';

/** Resolves a host name to every address it has (the system resolver by default: /etc/hosts, then DNS). */
export type Resolver = (host: string) => Promise<LookupAddress[]>;

export const systemResolver: Resolver = (host) => dns.lookup(host, { all: true, verbatim: true });

export interface EndpointClientOptions {
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS: skip the SSRF guard. */
  readonly allowPrivateNetworks: boolean;
  /** Default time limit of one attempt (DNS included). */
  readonly timeoutMs: number;
  /** Bytes of the response body kept. */
  readonly responseTextLimit: number;
  readonly resolver?: Resolver;
  /**
   * Extra trusted CA certificates (PEM) beside the system's. Processes get
   * theirs from NODE_EXTRA_CA_CERTS; this is for in-process tests.
   */
  readonly extraCa?: readonly string[];
  readonly userAgent?: string;
}

export interface EndpointClient {
  /**
   * The check at create and update: refuses (InvalidArgumentError) a URL whose
   * host is, or resolves to, a non-public address. A name that does not
   * resolve now is accepted: every attempt resolves and checks again.
   */
  vet(target: WebhookTarget): Promise<void>;
  /**
   * One POST of `body` with JSON content type and the given headers. Never
   * throws: every fault (refused address, DNS, connect, TLS, time-out, non-2xx,
   * redirect) is a failed result with a readable `error`.
   */
  post(target: WebhookTarget, body: string, headers: Readonly<Record<string, string>>, opts?: { timeoutMs?: number }): Promise<AttemptResult>;
}

const VET_TIMEOUT_MS = 3_000;
/** Connection pools kept (one per endpoint and vetted address set); the least recently used goes first. */
const MAX_POOLS = 256;
/**
 * An idle connection is closed after this, before the 5 s a Node receiver keeps one (Node also honours a shorter
 * `Keep-Alive: timeout` hint): a post on a connection the receiver has just closed fails and waits for its retry.
 */
const IDLE_SOCKET_MS = 4_000;
/**
 * How long an attempt reuses the addresses another attempt to the same host resolved: a busy endpoint is looked up
 * about once a second, not once per post (each lookup is a getaddrinfo on libuv's thread pool). The check runs on
 * every attempt all the same, and the connection goes to the addresses checked.
 */
const RESOLVED_REUSE_MS = 1_000;
const MAX_RESOLVED_HOSTS = 1_024;

class RefusedAddressError extends Error {}

class TimeoutError extends Error {}

function refusal(host: string, isLiteral: boolean, a: LookupAddress): string | undefined {
  const kind = classifyAddress(a.address);
  if (kind === 'public') return undefined;
  const article = /^[aeiou]/.test(kind) ? 'an' : 'a';
  const where = isLiteral ? `${host} is` : `${host} resolves to ${a.address},`;
  return `${where} ${article} ${kind} address; webhooks may only reach public addresses`;
}

/** Why the target may not be reached at these addresses: the first one that is not public, else undefined. */
function refusalOf(target: WebhookTarget, addresses: readonly LookupAddress[]): string | undefined {
  for (const a of addresses) {
    const why = refusal(target.host, target.isIpLiteral, a);
    if (why) return why;
  }
  return undefined;
}

/** A lookup shared by the attempts to one host for RESOLVED_REUSE_MS; `answer` once it has come. */
interface SharedLookup {
  readonly until: number;
  readonly addresses: Promise<LookupAddress[]>;
  answer?: LookupAddress[];
}

/** A lookup function that answers with the addresses already vetted: the connection goes where the check looked (no DNS rebinding). */
function pinnedLookup(addresses: readonly LookupAddress[]): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, addresses.map((a) => ({ address: a.address, family: a.family })));
    else callback(null, addresses[0]!.address, addresses[0]!.family);
  }) as unknown as LookupFunction;
}

function describe(err: unknown, timeoutMs: number): string {
  if (err instanceof TimeoutError) return `timed out after ${timeoutMs} ms`;
  if (err instanceof RefusedAddressError) return `refused: ${err.message}`;
  const e = err as { name?: string; code?: string; message?: string };
  if (e?.name === 'AbortError') return `timed out after ${timeoutMs} ms`;
  // undici's word for a connection the receiver closed (or reset) before its answer was complete.
  if (e?.code === 'UND_ERR_SOCKET') return `connection closed by the receiver before its answer (${e.message ?? 'socket error'})`;
  const message = e?.message || String(err);
  return e?.code && !message.includes(e.code) ? `${message} (${e.code})` : message;
}

export function createEndpointClient(opts: EndpointClientOptions): EndpointClient {
  const resolver = opts.resolver ?? systemResolver;
  const ca = opts.extraCa && opts.extraCa.length > 0 ? [...rootCertificates, ...opts.extraCa] : undefined;
  const userAgent = opts.userAgent ?? 'mailfleet-webhooks/1';

  /**
   * Keep-alive pools, one per (host, port, vetted addresses): a pooled connection was opened to an address
   * that a check passed, and it serves only attempts whose own check found that same set, so reuse never
   * skips the SSRF guard or follows a rebinding. New connections of a pool resolve through the pinned lookup
   * of the addresses it was made for. Without pooling every attempt paid a TCP and TLS handshake on both sides.
   * undici's pools rather than node:https agents: they spend less CPU per post. The worker's cap bounds the posts
   * in flight to one webhook, so a pool's connections are not capped again here.
   */
  const pools = new Map<string, Pool>();
  /** The sorted address list of a lookup's answer, made once per answer (an answer is shared for a second). */
  const addressKeys = new WeakMap<readonly LookupAddress[], string>();
  function poolFor(target: WebhookTarget, addresses: readonly LookupAddress[]): Pool {
    let addressKey = addressKeys.get(addresses);
    if (addressKey === undefined) {
      addressKey = JSON.stringify(addresses.map((a) => a.address).sort());
      addressKeys.set(addresses, addressKey);
    }
    const key = `${JSON.stringify(target.host)} ${target.port} ${addressKey}`;
    const hit = pools.get(key);
    if (hit) {
      pools.delete(key);
      pools.set(key, hit);
      return hit;
    }
    const host = isIP(target.host) === 6 ? `[${target.host}]` : target.host;
    const pool = new Pool(`https://${host}:${target.port}`, {
      pipelining: 1,
      keepAliveTimeout: IDLE_SOCKET_MS,
      keepAliveMaxTimeout: IDLE_SOCKET_MS,
      // SNI and the certificate check go by the URL's name (none for an address literal), never the pinned address.
      connect: { lookup: pinnedLookup(addresses), ...(ca ? { ca } : {}) },
    });
    pools.set(key, pool);
    if (pools.size > MAX_POOLS) {
      const [oldestKey, oldest] = pools.entries().next().value as [string, Pool];
      pools.delete(oldestKey);
      void oldest.destroy().catch(() => undefined);
    }
    return pool;
  }

  async function addressesOf(target: WebhookTarget): Promise<LookupAddress[]> {
    if (target.isIpLiteral) return [{ address: target.host, family: isIP(target.host) }];
    const found = await resolver(target.host);
    if (found.length === 0) throw new Error(`${target.host} has no addresses`);
    return found;
  }

  /** Lookups of the last RESOLVED_REUSE_MS by host, shared by the attempts that ask meanwhile (failures are not kept). */
  const resolved = new Map<string, SharedLookup>();
  /** The host's shared lookup while it is under RESOLVED_REUSE_MS old (never for an IP literal). */
  function sharedLookupOf(target: WebhookTarget, t: number): SharedLookup | undefined {
    const hit = target.isIpLiteral ? undefined : resolved.get(target.host);
    return hit && hit.until > t ? hit : undefined;
  }
  /** A shared lookup whose answer is in: most attempts to a busy endpoint, with nothing to wait for. */
  function answeredAddressesOf(target: WebhookTarget): LookupAddress[] | undefined {
    return sharedLookupOf(target, performance.now())?.answer;
  }
  function recentAddressesOf(target: WebhookTarget): Promise<LookupAddress[]> {
    if (target.isIpLiteral) return addressesOf(target);
    const t = performance.now();
    const hit = sharedLookupOf(target, t);
    if (hit) return hit.addresses;
    const entry: SharedLookup = { until: t + RESOLVED_REUSE_MS, addresses: addressesOf(target) };
    resolved.delete(target.host);
    resolved.set(target.host, entry);
    if (resolved.size > MAX_RESOLVED_HOSTS) resolved.delete(resolved.keys().next().value as string);
    entry.addresses.then((answer) => {
      entry.answer = answer;
    }, () => {
      if (resolved.get(target.host) === entry) resolved.delete(target.host);
    });
    return entry.addresses;
  }

  /** Unless private networks are allowed, refuses when ANY address is not public. */
  function checked(target: WebhookTarget, addresses: LookupAddress[]): LookupAddress[] {
    const why = opts.allowPrivateNetworks ? undefined : refusalOf(target, addresses);
    if (why) throw new RefusedAddressError(why);
    return addresses;
  }

  /** Resolves (reusing a lookup under a second old) and checks the addresses. */
  async function vetted(target: WebhookTarget): Promise<LookupAddress[]> {
    return checked(target, await recentAddressesOf(target));
  }

  /**
   * One POST through the pool's dispatcher with a handler of its own: no AbortController, response stream or
   * listeners per post (undici's `request` makes each), the answer's text kept up to the limit as it arrives. Settles
   * once: at the answer's end, at an error, at the text limit (the rest is not read: the connection is dropped) or
   * when `deadline` fires (the post is aborted then or as soon as it starts).
   */
  function send(
    target: WebhookTarget, addresses: LookupAddress[], bytes: Buffer, headers: Readonly<Record<string, string>>,
    limits: { started: number; timeoutMs: number; deadline: Deadline },
  ): Promise<AttemptResult> {
    const { started, timeoutMs, deadline } = limits;
    const took = () => Math.round(performance.now() - started);
    const timedOut = (): AttemptResult => ({ ok: false, error: describe(new TimeoutError(), timeoutMs), durationMs: took() });
    return new Promise<AttemptResult>((resolve) => {
      let controller: Dispatcher.DispatchController | undefined;
      let status = 0;
      let location: string | undefined;
      const chunks: Buffer[] = [];
      let kept = 0;
      let settled = false;
      const settle = (result: AttemptResult): void => {
        if (settled) return;
        settled = true;
        deadline.onExpiry = undefined;
        resolve(result);
      };
      const answered = (): void => {
        const responseText = Buffer.concat(chunks).toString('utf8');
        if (status >= 200 && status < 300) settle({ ok: true, status, responseText, durationMs: took() });
        else if (status >= 300 && status < 400) {
          settle({ ok: false, status, responseText, error: `redirect not followed (HTTP ${status}${location ? ` to ${location}` : ''})`, durationMs: took() });
        } else settle({ ok: false, status, responseText, error: `receiver answered ${status}`, durationMs: took() });
      };
      deadline.onExpiry = () => {
        controller?.abort(new TimeoutError());
        // An answer whose status came in time is judged by it, with the text that arrived; none is a time-out.
        if (status > 0) answered();
        else settle(timedOut());
      };
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(c) {
          controller = c;
          if (settled) c.abort(new TimeoutError());
        },
        onResponseStart(_c, statusCode, responseHeaders) {
          if (statusCode < 200) return;
          status = statusCode;
          const where = responseHeaders['location'];
          location = Array.isArray(where) ? where[0] : where;
        },
        onResponseData(c, chunk) {
          if (settled) return;
          const part = chunk.subarray(0, opts.responseTextLimit - kept);
          chunks.push(part);
          kept += part.length;
          if (kept >= opts.responseTextLimit) {
            // Judged by its status: the rest of an endless answer is never read.
            answered();
            c.abort(new Error('answer text limit reached'));
          }
        },
        onResponseEnd() {
          answered();
        },
        onResponseError(_c, err) {
          // An answer cut short after its status keeps what arrived; before it, the error is the result.
          if (status > 0) answered();
          else settle({ ok: false, error: describe(err, timeoutMs), durationMs: took() });
        },
      };
      if (deadline.expired) {
        settle(timedOut());
        return;
      }
      poolFor(target, addresses).dispatch({
        path: target.path, method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(bytes.length), 'user-agent': userAgent },
        body: bytes,
      }, handler);
    });
  }

  return {
    async vet(target) {
      if (opts.allowPrivateNetworks) return;
      let addresses: LookupAddress[];
      try {
        // Bounded well inside an API call's deadline: a slow resolver must not turn a create into a 504.
        addresses = await withTimeout(addressesOf(target), Math.min(opts.timeoutMs, VET_TIMEOUT_MS));
      } catch {
        return;
      }
      const why = refusalOf(target, addresses);
      if (why) throw new InvalidArgumentError(`url refused: ${why}`);
    },

    async post(target, body, headers, callOpts = {}) {
      const timeoutMs = Math.max(1, callOpts.timeoutMs ?? opts.timeoutMs);
      const started = performance.now();
      const deadline = new Deadline(timeoutMs);
      try {
        // A lookup already answered is checked at once; one under way is waited for within the time limit.
        const answer = answeredAddressesOf(target);
        const addresses = answer ? checked(target, answer) : await deadline.race(vetted(target));
        return await send(target, addresses, Buffer.from(body, 'utf8'), headers, { started, timeoutMs, deadline });
      } catch (err) {
        return { ok: false, error: describe(err, timeoutMs), durationMs: Math.round(performance.now() - started) };
      } finally {
        deadline.clear();
      }
    },
  };
}

/**
 * An attempt's time limit, DNS included: one timer, whose expiry rejects what `race` waits on (the lookup) or calls
 * `onExpiry` (the post in flight).
 */
class Deadline {
  expired = false;
  onExpiry: (() => void) | undefined;
  private readonly timer: NodeJS.Timeout;
  private rejectWait: ((err: Error) => void) | undefined;

  constructor(ms: number) {
    this.timer = setTimeout(() => {
      this.expired = true;
      this.rejectWait?.(new TimeoutError());
      this.onExpiry?.();
    }, ms);
  }

  race<T>(p: Promise<T>): Promise<T> {
    if (this.expired) return Promise.reject(new TimeoutError());
    return new Promise<T>((resolve, reject) => {
      this.rejectWait = reject;
      p.then(resolve, reject).finally(() => {
        this.rejectWait = undefined;
      });
    });
  }

  clear(): void {
    clearTimeout(this.timer);
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  const deadline = new Deadline(ms);
  return deadline.race(p).finally(() => deadline.clear());
}
