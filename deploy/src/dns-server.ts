import dgram from 'node:dgram';
import net from 'node:net';
import * as dnsPacket from 'dns-packet';

export type DnsRecordType = 'TXT' | 'MX' | 'A' | 'CNAME';

export interface MxRecord {
  priority: number;
  exchange: string;
}

/**
 * One TXT record: a string (split into 255-byte character-strings when longer,
 * as DKIM keys are) or an explicit list of character-strings (multi-string TXT).
 */
export type TxtRecord = string | string[];

/**
 * A failure the server plays instead of answering: `servfail` answers
 * SERVFAIL (rcode 2), `timeout` does not answer at all.
 */
export type DnsFailureMode = 'servfail' | 'timeout';

export interface DnsQueryLog {
  name: string;
  type: string;
  transport: 'udp' | 'tcp';
}

export interface DnsServer {
  /** `127.0.0.1:PORT`: the same port answers over UDP and TCP. For DNS_SERVERS or Resolver.setServers. */
  readonly address: string;
  readonly port: number;
  setRecords(name: string, type: 'TXT', values: TxtRecord[], ttl?: number): void;
  setRecords(name: string, type: 'MX', values: MxRecord[], ttl?: number): void;
  setRecords(name: string, type: 'A' | 'CNAME', values: string[], ttl?: number): void;
  setRecords(name: string, type: DnsRecordType, values: DnsRecordValues, ttl?: number): void;
  /** Removes one type, or every record of the name. */
  removeRecords(name: string, type?: DnsRecordType): void;
  /**
   * Makes the server fail for a name and every name below it, or for every
   * name with `'*'`; `null` lifts that failure. Records stay as they are and
   * are answered again once the failure is lifted.
   */
  setFailure(name: string, mode: DnsFailureMode | null): void;
  /** Forgets every record and failure (and the query log). */
  clear(): void;
  /** Every question asked so far, oldest first. */
  queries(): DnsQueryLog[];
  close(): Promise<void>;
}

export type DnsRecordValues = TxtRecord[] | MxRecord[] | string[];

interface RecordSet {
  ttl: number;
  values: DnsRecordValues;
}

export interface StartDnsServerOptions {
  /** Default: a port free for both UDP and TCP. */
  port?: number;
}

const NXDOMAIN = 3;
const SERVFAIL = 2;
const FORMERR = 1;
const NOTIMP = 4;
const MAX_CNAME_CHAIN = 8;

/**
 * An authoritative DNS server on loopback for the names its owner sets (the
 * tests, and local mode through `local-dns.ts`): TXT, MX, A and CNAME. Unknown names get NXDOMAIN; a known name without the asked type gets
 * an empty NOERROR answer. UDP answers larger than the client's limit are
 * truncated (TC), so resolvers retry over TCP as real ones do.
 */
export async function startDnsServer(opts: StartDnsServerOptions = {}): Promise<DnsServer> {
  const zone = new Map<string, Map<DnsRecordType, RecordSet>>();
  const failures = new Map<string, DnsFailureMode>();
  const log: DnsQueryLog[] = [];
  /** The failure in force for a name: its own, an ancestor's, or the server-wide one. */
  const failureFor = (qname: string): DnsFailureMode | undefined => {
    if (failures.size === 0) return undefined;
    const labels = normalize(qname).split('.');
    for (let i = 0; i < labels.length; i++) {
      const mode = failures.get(labels.slice(i).join('.'));
      if (mode) return mode;
    }
    return failures.get('*');
  };
  const { udp, tcp, port } = await bindBoth(opts.port);
  const sockets = new Set<net.Socket>();

  /** The encoded answer, or undefined when a `timeout` failure swallows the query. */
  const answerFor = (query: dnsPacket.DecodedPacket, transport: 'udp' | 'tcp'): Buffer | undefined => {
    const questions = query.questions ?? [];
    const flags = dnsPacket.AUTHORITATIVE_ANSWER | (query.flag_rd ? dnsPacket.RECURSION_DESIRED : 0);
    const answers: dnsPacket.Answer[] = [];
    let rcode = 0;
    const failure = questions.length === 1 ? failureFor(questions[0]!.name) : undefined;
    if (questions.length !== 1) {
      rcode = FORMERR;
    } else if (failure) {
      const q = questions[0]!;
      log.push({ name: q.name, type: q.type, transport });
      if (failure === 'timeout') return undefined;
      rcode = SERVFAIL;
    } else {
      const q = questions[0]!;
      log.push({ name: q.name, type: q.type, transport });
      const result = resolve(zone, q.name, q.type);
      if (result === 'notimp') rcode = NOTIMP;
      else if (result === 'nxdomain') rcode = NXDOMAIN;
      else answers.push(...result);
    }
    const response: dnsPacket.Packet = {
      type: 'response',
      id: query.id ?? 0,
      flags: flags | rcode,
      questions,
      answers,
    };
    let encoded = dnsPacket.encode(response);
    if (transport === 'udp') {
      const opt = (query.additionals ?? []).find((a): a is dnsPacket.OptAnswer => a.type === 'OPT');
      const limit = Math.max(512, opt?.udpPayloadSize ?? 512);
      if (encoded.length > limit) {
        encoded = dnsPacket.encode({ ...response, flags: response.flags! | dnsPacket.TRUNCATED_RESPONSE, answers: [] });
      }
    }
    return encoded;
  };

  const errorFor = (message: Buffer): Buffer | undefined => {
    if (message.length < 2) return undefined;
    return dnsPacket.encode({ type: 'response', id: message.readUInt16BE(0), flags: FORMERR, questions: [] });
  };

  udp.on('message', (message, remote) => {
    let reply: Buffer | undefined;
    try {
      reply = answerFor(dnsPacket.decode(message), 'udp');
    } catch {
      reply = errorFor(message);
    }
    if (reply) udp.send(reply, remote.port, remote.address);
  });

  tcp.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      // Each message is preceded by its 2-byte length (RFC 1035 4.2.2); a connection may carry several.
      while (buffered.length >= 2) {
        const length = buffered.readUInt16BE(0);
        if (buffered.length < 2 + length) break;
        const message = buffered.subarray(2, 2 + length);
        buffered = buffered.subarray(2 + length);
        let reply: Buffer | undefined;
        try {
          reply = answerFor(dnsPacket.decode(message), 'tcp');
        } catch {
          reply = errorFor(message);
        }
        if (reply) {
          const framed = Buffer.alloc(2 + reply.length);
          framed.writeUInt16BE(reply.length, 0);
          reply.copy(framed, 2);
          socket.write(framed);
        }
      }
    });
  });

  return {
    address: `127.0.0.1:${port}`,
    port,
    setRecords(name: string, type: DnsRecordType, values: DnsRecordValues, ttl = 60): void {
      const key = normalize(name);
      if (values.length === 0) {
        zone.get(key)?.delete(type);
        return;
      }
      let byType = zone.get(key);
      if (!byType) {
        byType = new Map();
        zone.set(key, byType);
      }
      byType.set(type, { ttl, values: validate(type, values) });
    },
    removeRecords(name, type) {
      const key = normalize(name);
      if (type) zone.get(key)?.delete(type);
      else zone.delete(key);
    },
    setFailure(name, mode) {
      const key = name.trim() === '*' ? '*' : normalize(name);
      if (!key) throw new TypeError('setFailure needs a name or "*"');
      if (mode === null) {
        failures.delete(key);
        return;
      }
      if (mode !== 'servfail' && mode !== 'timeout') throw new TypeError(`failure mode is 'servfail', 'timeout' or null, got ${JSON.stringify(mode)}`);
      failures.set(key, mode);
    },
    clear() {
      zone.clear();
      failures.clear();
      log.length = 0;
    },
    queries: () => [...log],
    close: () =>
      new Promise<void>((done) => {
        for (const socket of sockets) socket.destroy();
        udp.close(() => tcp.close(() => done()));
      }),
  };
}

function normalize(name: string): string {
  return name.trim().toLowerCase().replace(/\.+$/, '');
}

function validate(type: DnsRecordType, values: DnsRecordValues): DnsRecordValues {
  for (const value of values) {
    if (type === 'MX') {
      const mx = value as MxRecord;
      if (typeof mx !== 'object' || typeof mx.exchange !== 'string' || !Number.isInteger(mx.priority)) {
        throw new TypeError(`MX values are {priority, exchange}, got ${JSON.stringify(value)}`);
      }
    } else if (type === 'TXT') {
      if (typeof value !== 'string' && !(Array.isArray(value) && value.every((s) => typeof s === 'string'))) {
        throw new TypeError(`TXT values are strings or string arrays, got ${JSON.stringify(value)}`);
      }
    } else if (typeof value !== 'string') {
      throw new TypeError(`${type} values are strings, got ${JSON.stringify(value)}`);
    } else if (type === 'A' && net.isIPv4(value) === false) {
      throw new TypeError(`A values are IPv4 addresses, got ${value}`);
    }
  }
  return values;
}

/** Splits a long TXT string into 255-byte character-strings (RFC 1035 3.3.14). */
function txtStrings(value: TxtRecord): Buffer[] {
  if (Array.isArray(value)) return value.map((s) => Buffer.from(s, 'utf8'));
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length === 0) return [bytes];
  const parts: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 255) parts.push(bytes.subarray(i, i + 255));
  return parts;
}

function toAnswers(name: string, type: DnsRecordType, set: RecordSet): dnsPacket.Answer[] {
  return set.values.map((value): dnsPacket.Answer => {
    switch (type) {
      case 'TXT':
        return { name, type: 'TXT', ttl: set.ttl, class: 'IN', data: txtStrings(value as TxtRecord) };
      case 'MX': {
        const mx = value as MxRecord;
        return { name, type: 'MX', ttl: set.ttl, class: 'IN', data: { preference: mx.priority, exchange: mx.exchange } };
      }
      case 'A':
      case 'CNAME':
        return { name, type, ttl: set.ttl, class: 'IN', data: value as string };
    }
  });
}

function resolve(
  zone: Map<string, Map<DnsRecordType, RecordSet>>,
  qname: string,
  qtype: string,
): dnsPacket.Answer[] | 'nxdomain' | 'notimp' {
  const answers: dnsPacket.Answer[] = [];
  let name = qname;
  for (let hop = 0; hop <= MAX_CNAME_CHAIN; hop++) {
    const byType = zone.get(normalize(name));
    if (!byType) return hop === 0 ? 'nxdomain' : answers;
    const cname = byType.get('CNAME');
    if (cname && qtype !== 'CNAME') {
      answers.push(...toAnswers(name, 'CNAME', cname));
      name = cname.values[0] as string;
      continue;
    }
    if (qtype === 'ANY') {
      for (const [type, set] of byType) answers.push(...toAnswers(name, type, set));
      return answers;
    }
    const set = byType.get(qtype as DnsRecordType);
    if (set) answers.push(...toAnswers(name, qtype as DnsRecordType, set));
    return answers;
  }
  return answers;
}

async function bindBoth(port?: number): Promise<{ udp: dgram.Socket; tcp: net.Server; port: number }> {
  // The OS picks a free UDP port; TCP must get the same one, which may be taken: try again a few times.
  for (let attempt = 0; attempt < 20; attempt++) {
    const udp = dgram.createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind(port ?? 0, '127.0.0.1', () => {
        udp.off('error', reject);
        resolve();
      });
    });
    const chosen = udp.address().port;
    const tcp = net.createServer();
    const ok = await new Promise<boolean>((resolve) => {
      tcp.once('error', () => resolve(false));
      tcp.listen(chosen, '127.0.0.1', () => resolve(true));
    });
    if (ok) return { udp, tcp, port: chosen };
    await new Promise<void>((resolve) => udp.close(() => resolve()));
    if (port !== undefined) throw new Error(`DNS server: TCP port ${port} is in use`);
  }
  throw new Error('DNS server: no port free for both UDP and TCP');
}
