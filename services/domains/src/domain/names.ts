import { domainToASCII } from 'node:url';
import { InvalidArgumentError } from '@mailfleet/kit';
import { parse } from 'tldts';

/** The only sending region (SPEC 2.8). */
export const SUPPORTED_REGIONS: readonly string[] = ['us-east-1'];

export interface DomainName {
  /** Lower-case ASCII (punycode for internationalised names), no trailing dot. */
  readonly name: string;
  /** Labels left of the registrable domain (`mail` of `mail.example.co.uk`); null for a registrable domain. */
  readonly subdomain: string | null;
}

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const TLD = /^(?:[a-z]{2,63}|xn--[a-z0-9-]{1,59})$/;

/**
 * Validates and normalises a domain name as a client types it: trimmed,
 * lower-cased, a trailing dot dropped, Unicode turned into punycode. Refuses
 * addresses, URLs, IPs, single labels and bare public suffixes (`co.uk`)
 * with a message saying what is wrong.
 */
export function parseDomainName(input: string): DomainName {
  const raw = input.trim();
  if (!raw) throw new InvalidArgumentError('Domain name is required');
  if (raw.length > 300) throw new InvalidArgumentError('Domain name must be at most 253 characters');
  if (/[\s/@:?#]/.test(raw)) {
    throw new InvalidArgumentError(`"${raw}" is not a domain name: give only the host name, for example example.com (no scheme, path, port or address)`);
  }
  const lowered = raw.toLowerCase().replace(/\.$/, '');
  const ascii = domainToASCII(lowered);
  if (!ascii) {
    if (/^[\d.]+$/.test(lowered)) throw new InvalidArgumentError(`"${raw}" is an IP address, not a domain name`);
    const last = lowered.split('.').pop() ?? '';
    if (/^\d+$/.test(last)) throw new InvalidArgumentError(`"${raw}" is not a valid domain name: "${last}" is not a top-level domain`);
    throw new InvalidArgumentError(`"${raw}" is not a valid domain name`);
  }
  if (ascii.length > 253) throw new InvalidArgumentError('Domain name must be at most 253 characters');
  const labels = ascii.split('.');
  if (labels.length < 2) throw new InvalidArgumentError(`"${raw}" is not a valid domain name: it needs at least two labels, for example example.com`);
  for (const l of labels) {
    if (!LABEL.test(l)) {
      throw new InvalidArgumentError(
        `"${raw}" is not a valid domain name: each label must be 1-63 letters, digits or hyphens, not starting or ending with a hyphen`,
      );
    }
  }
  const tld = labels[labels.length - 1]!;
  if (!TLD.test(tld)) throw new InvalidArgumentError(`"${raw}" is not a valid domain name: "${tld}" is not a top-level domain`);
  const info = parse(ascii);
  if (info.isIp) throw new InvalidArgumentError(`"${raw}" is an IP address, not a domain name`);
  if (!info.domain) throw new InvalidArgumentError(`"${raw}" is a public suffix; register a domain under it, for example example.${ascii}`);
  return { name: ascii, subdomain: info.subdomain ? info.subdomain : null };
}

/** The domain part of a From address or a bare domain, normalised as names are stored; undefined when unusable. */
export function domainOfAddress(fromOrDomain: string): string | undefined {
  let s = fromOrDomain.trim();
  const angle = /<([^>]*)>\s*$/.exec(s);
  if (angle) s = angle[1]!.trim();
  const at = s.lastIndexOf('@');
  if (at >= 0) s = s.slice(at + 1);
  s = s.trim().toLowerCase().replace(/\.$/, '');
  if (!s) return undefined;
  const ascii = domainToASCII(s);
  return ascii || undefined;
}

export function requireRegion(region: string): string {
  const r = region.trim();
  if (!r) throw new InvalidArgumentError(`region is required; supported: ${SUPPORTED_REGIONS.join(', ')}`);
  if (!SUPPORTED_REGIONS.includes(r)) throw new InvalidArgumentError(`Region ${r} is not supported; supported: ${SUPPORTED_REGIONS.join(', ')}`);
  return r;
}
