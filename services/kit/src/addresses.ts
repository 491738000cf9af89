/**
 * Address syntax shared by services that take addresses they hand on to the
 * emails service later (campaigns' replyTo, cc, bcc): refusing at accept what
 * the emails service would refuse at send time. The rules of one address are
 * those of the emails service's `isValidAddress` (RFC 5321, ASCII dot-atom
 * local part, a domain of at least two labels).
 */

const LOCAL = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+$/;
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const CONTROL = /[\u0000-\u001f\u007f]/;

/** A plain RFC 5321 address (ASCII, dot-atom local part, a domain with at least two labels). */
export function isValidAddress(address: string): boolean {
  if (address.length > 254) return false;
  const at = address.lastIndexOf('@');
  if (at <= 0 || at === address.length - 1) return false;
  const local = address.slice(0, at);
  const domain = address.slice(at + 1);
  if (local.length > 64 || !LOCAL.test(local) || local.startsWith('.') || local.endsWith('.') || local.includes('..')) return false;
  const labels = domain.split('.');
  return labels.length >= 2 && labels.every((l) => LABEL.test(l)) && !/^\d+$/.test(labels[labels.length - 1] ?? '');
}

/** Splits a header-style list on the commas outside quotes and angle brackets. */
function splitList(value: string): string[] | undefined {
  const parts: string[] = [];
  let current = '';
  let quoted = false;
  let angle = false;
  for (let i = 0; i < value.length; i++) {
    const ch = value[i] as string;
    if (quoted) {
      current += ch;
      if (ch === '\\' && i + 1 < value.length) current += value[++i] as string;
      else if (ch === '"') quoted = false;
    } else if (ch === '"') {
      quoted = true;
      current += ch;
    } else if (ch === '<') {
      if (angle) return undefined;
      angle = true;
      current += ch;
    } else if (ch === '>') {
      if (!angle) return undefined;
      angle = false;
      current += ch;
    } else if (ch === ',' && !angle) {
      parts.push(current);
      current = '';
    } else {
      current += ch;
    }
  }
  if (quoted || angle) return undefined;
  parts.push(current);
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

/** The bare address of one mailbox (`a@x.com`, `Name <a@x.com>`, `"Last, First" <a@x.com>`), or undefined. */
function mailboxAddress(part: string): string | undefined {
  const m = /^(.*)<([^<>]*)>$/.exec(part);
  if (!m) return part;
  const name = (m[1] as string).trim();
  // A group (`team: a@x.com;`) or a second address in the display name is not one mailbox.
  const unquoted = name.replace(/"(?:[^"\\]|\\.)*"/g, '');
  if (/[:;@<>]/.test(unquoted)) return undefined;
  return (m[2] as string).trim();
}

/**
 * Why one address field entry (`a@x.com`, `Name <a@x.com>` or a comma list
 * of those) would be refused, or undefined when every address in it is valid.
 */
export function addressEntryProblem(value: string): string | undefined {
  if (CONTROL.test(value)) return 'must not contain line breaks or control characters';
  const trimmed = value.trim();
  if (trimmed === '') return 'must not be empty';
  const parts = splitList(trimmed);
  if (!parts || parts.length === 0) return `${JSON.stringify(trimmed)} is not a valid email address`;
  for (const part of parts) {
    const address = mailboxAddress(part);
    if (address === undefined || !isValidAddress(address)) return `${JSON.stringify(address || part)} is not a valid email address`;
  }
  return undefined;
}
