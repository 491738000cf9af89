/** `{{name}}` placeholders as the platform reads them (services/campaigns/src/domain/render.ts). */
const PLACEHOLDER = /\{\{\s*([A-Za-z_][\w]*(?:\.[^\s{}]+)?)\s*\}\}/g;

/** The distinct placeholder names a text uses, in order of first use. */
export function placeholdersOf(...texts: (string | null | undefined)[]): string[] {
  const seen = new Set<string>();
  for (const t of texts) for (const m of (t ?? '').matchAll(PLACEHOLDER)) seen.add(m[1]!);
  return [...seen];
}

function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

/**
 * Replaces the placeholders with `values` (escaped in HTML, as the platform does); names without a
 * value are left as they are so the preview shows what still needs one.
 */
export function fillPlaceholders(text: string, values: Readonly<Record<string, string | undefined>>, html: boolean): string {
  return text.replace(PLACEHOLDER, (whole, name: string) => {
    const v = values[name];
    if (v === undefined) return whole;
    return html ? escapeHtml(v) : v;
  });
}

export interface PreviewContact {
  email: string;
  firstName: string | null;
  lastName: string | null;
  properties: Record<string, string>;
}

/** The values a campaign's placeholders take for one contact (missing names and properties become empty, as when sent). */
export function contactValues(c: PreviewContact, names: readonly string[], unsubscribeUrl: string): Record<string, string> {
  const values: Record<string, string> = { firstName: c.firstName ?? '', lastName: c.lastName ?? '', email: c.email, service_unsubscribe_url: unsubscribeUrl };
  for (const n of names) if (n.startsWith('properties.')) values[n] = c.properties[n.slice('properties.'.length)] ?? '';
  return values;
}

/** Plain text shown in the sandboxed frame: escaped and kept as written. */
export function textAsHtml(text: string): string {
  return `<pre style="white-space:pre-wrap;font:14px/1.5 system-ui,sans-serif;margin:1rem">${escapeHtml(text)}</pre>`;
}
