import { isIPv4, isIPv6 } from 'node:net';

/**
 * Classification of resolved addresses for the SSRF guard: a webhook may only
 * reach public unicast addresses unless private networks are allowed. Pure:
 * no DNS here; the sender resolves and asks.
 */
export type AddressKind =
  | 'public' | 'unspecified' | 'loopback' | 'private' | 'shared' | 'link-local' | 'metadata' | 'multicast' | 'reserved'
  | 'documentation' | 'benchmark' | 'unique-local' | 'site-local' | 'invalid';

interface V4Range { readonly base: number; readonly bits: number; readonly kind: AddressKind }

function v4(text: string): number | undefined {
  if (!isIPv4(text)) return undefined;
  const parts = text.split('.').map(Number);
  return (((parts[0]! << 24) >>> 0) + (parts[1]! << 16) + (parts[2]! << 8) + parts[3]!) >>> 0;
}

function range(cidr: string, kind: AddressKind): V4Range {
  const [addr, bits] = cidr.split('/');
  return { base: v4(addr!)!, bits: Number(bits), kind };
}

// Most specific first: 169.254.169.254 is named before the rest of 169.254/16.
const V4_RANGES: readonly V4Range[] = [
  range('169.254.169.254/32', 'metadata'),
  range('0.0.0.0/8', 'unspecified'),
  range('10.0.0.0/8', 'private'),
  range('100.64.0.0/10', 'shared'),
  range('127.0.0.0/8', 'loopback'),
  range('169.254.0.0/16', 'link-local'),
  range('172.16.0.0/12', 'private'),
  range('192.0.0.0/24', 'reserved'),
  range('192.0.2.0/24', 'documentation'),
  range('192.88.99.0/24', 'reserved'),
  range('192.168.0.0/16', 'private'),
  range('198.18.0.0/15', 'benchmark'),
  range('198.51.100.0/24', 'documentation'),
  range('203.0.113.0/24', 'documentation'),
  range('224.0.0.0/4', 'multicast'),
  range('240.0.0.0/4', 'reserved'),
];

function inV4(addr: number, r: V4Range): boolean {
  if (r.bits === 0) return true;
  const mask = r.bits === 32 ? 0xffffffff : (~((1 << (32 - r.bits)) - 1)) >>> 0;
  return ((addr & mask) >>> 0) === ((r.base & mask) >>> 0);
}

function classifyV4Number(addr: number): AddressKind {
  for (const r of V4_RANGES) if (inV4(addr, r)) return r.kind;
  return 'public';
}

/** Eight 16-bit groups of an IPv6 address (zone id dropped, embedded dotted IPv4 expanded). */
function v6Groups(text: string): number[] | undefined {
  const bare = text.replace(/%.*$/, '');
  if (!isIPv6(bare)) return undefined;
  let s = bare.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const n = v4(dotted[1]!);
    if (n === undefined) return undefined;
    s = `${s.slice(0, -dotted[1]!.length)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = s.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail === undefined ? [] : tail ? tail.split(':') : [];
  const fill = tail === undefined ? 0 : 8 - h.length - t.length;
  const groups = [...h, ...Array<string>(fill).fill('0'), ...t].map((g) => parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}

const embeddedV4 = (hi: number, lo: number): number => ((hi << 16) >>> 0) + lo;

function classifyV6(g: number[]): AddressKind {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = g as [number, number, number, number, number, number, number, number];
  const zeroTo = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (zeroTo(8)) return 'unspecified';
  if (zeroTo(7) && g7 === 1) return 'loopback';
  // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d): judged by the IPv4 address inside.
  if (zeroTo(5) && g5 === 0xffff) return classifyV4Number(embeddedV4(g6, g7));
  if (zeroTo(6)) return classifyV4Number(embeddedV4(g6, g7));
  // NAT64 well-known prefix 64:ff9b::/96 reaches the IPv4 address inside; 64:ff9b:1::/48 is local use.
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return classifyV4Number(embeddedV4(g6, g7));
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return 'private';
  // 6to4 2002:AABB:CCDD::/48 reaches AA.BB.CC.DD.
  if (g0 === 0x2002) return classifyV4Number(embeddedV4(g1, g2));
  if (g0 === 0x100 && g1 === 0 && g2 === 0 && g3 === 0) return 'reserved';
  // 2001::/23 IETF protocol assignments (Teredo, ORCHID, benchmarking...).
  if (g0 === 0x2001 && g1 < 0x200) return 'reserved';
  if (g0 === 0x2001 && g1 === 0xdb8) return 'documentation';
  // fc00::/7, where AWS also keeps its IPv6 metadata endpoint fd00:ec2::254.
  if ((g0 & 0xfe00) === 0xfc00) {
    return g0 === 0xfd00 && g1 === 0xec2 && g.slice(2, 7).every((x) => x === 0) && g7 === 0x254 ? 'metadata' : 'unique-local';
  }
  if ((g0 & 0xffc0) === 0xfe80) return 'link-local';
  if ((g0 & 0xffc0) === 0xfec0) return 'site-local';
  if ((g0 & 0xff00) === 0xff00) return 'multicast';
  // Only global unicast (2000::/3) is public.
  if ((g0 & 0xe000) !== 0x2000) return 'reserved';
  return 'public';
}

/** What kind of address this is; only `public` may be reached when private networks are not allowed. */
export function classifyAddress(address: string): AddressKind {
  const n = v4(address);
  if (n !== undefined) return classifyV4Number(n);
  const g = v6Groups(address);
  return g ? classifyV6(g) : 'invalid';
}

export function isPublicAddress(address: string): boolean {
  return classifyAddress(address) === 'public';
}
