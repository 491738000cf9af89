import Papa from 'papaparse';

/** What the bulk endpoint takes for one contact. */
export interface ContactRow {
  email: string;
  firstName?: string;
  lastName?: string;
  subscribed?: boolean;
  properties?: Record<string, string>;
}

export interface ParsedCsv {
  rows: ContactRow[];
  /** Rows refused before sending (no email column value, bad CSV): `line` is the file's line number. */
  problems: { line: number; message: string }[];
}

const norm = (h: string) => h.trim().toLowerCase().replace(/[\s_-]/g, '');
const EMAIL = new Set(['email', 'emailaddress', 'e-mail', 'mail']);
const FIRST = new Set(['firstname', 'first', 'givenname']);
const LAST = new Set(['lastname', 'last', 'surname', 'familyname']);
const SUBSCRIBED = new Set(['subscribed']);

function parseBool(v: string): boolean | undefined {
  const s = v.trim().toLowerCase();
  if (['true', 'yes', '1', 'y'].includes(s)) return true;
  if (['false', 'no', '0', 'n'].includes(s)) return false;
  return undefined;
}

/**
 * A CSV with a header line: `email` (or "Email address"…), first/last name, `subscribed`; every
 * other column becomes a property of that name. Parsed by papaparse (quotes, commas, BOM).
 */
export function parseContactsCsv(text: string): ParsedCsv {
  const result = Papa.parse<Record<string, string>>(text, { header: true, skipEmptyLines: 'greedy', transformHeader: (h) => h.trim() });
  const problems: ParsedCsv['problems'] = [];
  const headers = result.meta.fields ?? [];
  const emailCol = headers.find((h) => EMAIL.has(norm(h)));
  if (!emailCol) return { rows: [], problems: [{ line: 1, message: 'The header line has no "email" column' }] };
  const firstCol = headers.find((h) => FIRST.has(norm(h)));
  const lastCol = headers.find((h) => LAST.has(norm(h)));
  const subCol = headers.find((h) => SUBSCRIBED.has(norm(h)));
  const propCols = headers.filter((h) => h !== emailCol && h !== firstCol && h !== lastCol && h !== subCol && h !== '');
  for (const e of result.errors) {
    if (e.type !== 'FieldMismatch') problems.push({ line: (e.row ?? 0) + 2, message: e.message });
  }
  const rows: ContactRow[] = [];
  result.data.forEach((r) => {
    const row: ContactRow = { email: (r[emailCol] ?? '').trim() };
    const first = firstCol ? r[firstCol]?.trim() : undefined;
    const last = lastCol ? r[lastCol]?.trim() : undefined;
    if (first) row.firstName = first;
    if (last) row.lastName = last;
    if (subCol && r[subCol] !== undefined) {
      const b = parseBool(r[subCol]);
      if (b !== undefined) row.subscribed = b;
    }
    const props: Record<string, string> = {};
    for (const c of propCols) if (r[c] !== undefined && r[c] !== '') props[c] = r[c];
    if (Object.keys(props).length > 0) row.properties = props;
    rows.push(row);
  });
  return { rows, problems };
}

/** Contacts as CSV: the same columns an import reads, properties as their own columns. */
export function contactsToCsv(contacts: readonly { email: string; firstName: string | null; lastName: string | null; subscribed: boolean; properties: Record<string, string> }[]): string {
  const propNames = [...new Set(contacts.flatMap((c) => Object.keys(c.properties)))].sort();
  return Papa.unparse({
    fields: ['email', 'firstName', 'lastName', 'subscribed', ...propNames],
    data: contacts.map((c) => [c.email, c.firstName ?? '', c.lastName ?? '', String(c.subscribed), ...propNames.map((p) => c.properties[p] ?? '')]),
  });
}

/** Splits rows into the requests of an import (the bulk endpoint takes at most 1000 per call). */
export function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
