/**
 * `{{name}}` placeholders (SPEC 2.11): replaced by `variables` at send time,
 * HTML-escaped in the HTML body, as given in the text body and the subject.
 * A placeholder is `{{` optional spaces, a name (letters, digits, `_`, `.`,
 * `-`, starting with a letter or `_`), optional spaces, `}}`; any other use of
 * braces is left alone, so CSS or code samples survive.
 */
const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}/g;

export type Variables = Readonly<Record<string, unknown>>;

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}

function valueText(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return JSON.stringify(v);
}

/** Names of the placeholders a text uses, in order of first use. */
export function placeholdersOf(text: string): string[] {
  const names = new Set<string>();
  for (const m of text.matchAll(PLACEHOLDER)) names.add(m[1] as string);
  return [...names];
}

function lookup(vars: Variables, name: string): { found: boolean; value: unknown } {
  if (Object.prototype.hasOwnProperty.call(vars, name)) return { found: true, value: vars[name] };
  // `a.b` also reaches into nested objects when no flat key `a.b` exists.
  let cur: unknown = vars;
  for (const part of name.split('.')) {
    if (cur === null || typeof cur !== 'object' || !Object.prototype.hasOwnProperty.call(cur, part)) return { found: false, value: undefined };
    cur = (cur as Record<string, unknown>)[part];
  }
  return { found: true, value: cur };
}

export interface RenderResult {
  readonly output: string;
  /** Placeholders without a value (left in the output as written). */
  readonly missing: readonly string[];
}

export function renderTemplate(text: string, vars: Variables, mode: 'html' | 'text'): RenderResult {
  const missing = new Set<string>();
  const output = text.replace(PLACEHOLDER, (whole, name: string) => {
    const { found, value } = lookup(vars, name);
    if (!found) {
      missing.add(name);
      return whole;
    }
    const s = valueText(value);
    return mode === 'html' ? escapeHtml(s) : s;
  });
  return { output, missing: [...missing] };
}

export interface RenderInput {
  readonly subject: string;
  readonly html?: string | undefined;
  readonly text?: string | undefined;
}

export type RenderOutcome =
  | { readonly ok: true; readonly subject: string; readonly html?: string | undefined; readonly text?: string | undefined }
  | { readonly ok: false; readonly error: string; readonly missing: readonly string[] };

/**
 * Renders subject and bodies. Substitution happens when the email uses a
 * template or gives `variables`; then every placeholder must have a value,
 * otherwise the email is a rendering failure (a half-rendered "Hello {{name}}"
 * must not go out). Without either, content is sent exactly as given. A
 * subject never keeps line breaks (it is a header).
 */
export function renderEmail(input: RenderInput, opts: { variables?: Variables | undefined; usesTemplate: boolean }): RenderOutcome {
  const substitute = opts.usesTemplate || opts.variables !== undefined;
  const vars = opts.variables ?? {};
  let subject = input.subject;
  let html = input.html;
  let text = input.text;
  if (substitute) {
    const s = renderTemplate(subject, vars, 'text');
    const h = html === undefined ? undefined : renderTemplate(html, vars, 'html');
    const t = text === undefined ? undefined : renderTemplate(text, vars, 'text');
    const missing = [...new Set([...s.missing, ...(h?.missing ?? []), ...(t?.missing ?? [])])];
    if (missing.length > 0) {
      return { ok: false, missing, error: `No value for placeholder${missing.length > 1 ? 's' : ''} ${missing.map((m) => `{{${m}}}`).join(', ')}: add ${missing.length > 1 ? 'them' : 'it'} to variables` };
    }
    subject = s.output;
    html = h?.output;
    text = t?.output;
  }
  subject = subject.replace(/\s*[\r\n]+\s*/g, ' ').trim();
  if (subject === '') return { ok: false, missing: [], error: 'The subject is empty after rendering' };
  return { ok: true, subject, html, text };
}
