/** What a placeholder can be replaced with for one contact. */
export interface RenderContact {
  readonly email: string;
  readonly firstName?: string | undefined;
  readonly lastName?: string | undefined;
  readonly properties: Readonly<Record<string, string>>;
}

const PLACEHOLDER = /\{\{\s*([A-Za-z_][\w]*(?:\.[^\s{}]+)?)\s*\}\}/g;

export function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

/**
 * Replaces `{{firstName}}`, `{{lastName}}`, `{{email}}`, `{{properties.KEY}}`
 * (missing -> empty) and `{{service_unsubscribe_url}}` in a campaign body.
 * In HTML the values are escaped. Unknown placeholders are left as they are.
 */
export function renderCampaignText(text: string, contact: RenderContact, unsubscribeUrl: string, html: boolean): string {
  const esc = html ? escapeHtml : (s: string) => s;
  return text.replace(PLACEHOLDER, (whole, name: string) => {
    if (name === 'service_unsubscribe_url') return esc(unsubscribeUrl);
    if (name === 'firstName') return esc(contact.firstName ?? '');
    if (name === 'lastName') return esc(contact.lastName ?? '');
    if (name === 'email') return esc(contact.email);
    if (name.startsWith('properties.')) return esc(contact.properties[name.slice('properties.'.length)] ?? '');
    return whole;
  });
}
