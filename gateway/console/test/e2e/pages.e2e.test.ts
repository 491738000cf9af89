// The console's Contacts, Templates, Campaigns, Suppressions and Webhooks pages in a real browser
// (Debian's chromium via playwright-core) against the whole platform, served by the gateway.
import { randomBytes } from 'node:crypto';
import { AxeBuilder } from '@axe-core/playwright';
import { loadTestCa, startHttpsReceiver, type HttpsReceiver } from '@mailfleet/testkit';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { addVerifiedDomain, apiAt, createTeam, gatewayUrl, GENEROUS_LIMITS, mailfleet, until } from '../../../test/e2e/helpers.js';
import { DESKTOP, expectAccessible, launchBrowser, newContext, openPage, PHONE, screenshot, signIn } from './browser.js';

const api = apiAt(gatewayUrl());
let browser: Browser;
let context: BrowserContext;
let page: Page;
let receiver: HttpsReceiver;
/** The team's API key: the test checks through the API what the pages did. */
let token: string;
let domain: string;

/**
 * `expectAccessible` for the pages with a mail preview: the preview is left out (its HTML is the
 * author's, and axe cannot run in a frame whose sandbox forbids scripts: it would wait forever).
 */
async function expectAccessibleWithPreview(p: Page, what: string): Promise<void> {
  const result = await new AxeBuilder({ page: p }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).exclude('iframe.mail-frame').analyze();
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad.map((v) => `${v.id} (${v.impact}): ${v.help}\n  ${v.nodes.map((n) => n.target.join(' ')).slice(0, 5).join('\n  ')}`), `accessibility of ${what}`).toEqual([]);
}

/**
 * At 390 px wide the page's content stays inside main (tables scroll in their own box), then axe
 * again; back to the desktop size after. (The evaluated code is a string: the tests are type-checked
 * without the DOM library.)
 */
async function expectFitsPhone(p: Page, what: string): Promise<void> {
  await p.setViewportSize(PHONE);
  try {
    const wide = await p.evaluate<string[]>(
      `(() => { const edge = document.querySelector('main').getBoundingClientRect().right; return [...document.querySelectorAll('main *')]` +
        `.filter((e) => e.getBoundingClientRect().right > edge + 1 && !(e.parentElement && e.parentElement.closest('.table-wrap')) && !e.closest('.sr-only'))` +
        `.map((e) => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right)).slice(0, 8); })()`,
    );
    expect(wide, `${what} at ${PHONE.width} px`).toEqual([]);
    await expectAccessibleWithPreview(p, `${what} at ${PHONE.width} px`);
  } finally {
    await p.setViewportSize(DESKTOP);
  }
}

const tag = () => randomBytes(3).toString('hex');
const inbox = (local: string) => `${local}@inbox.mailfleet-e2e.test`;

beforeAll(async () => {
  const root = await fetch(`${gatewayUrl()}/`);
  expect(root.status, 'the gateway serves the console (npm run console:build)').toBe(200);
  const team = await createTeam(`Console pages ${tag()}`);
  token = team.token;
  const limits = await mailfleet(['team', 'update', '--team', team.teamId, ...GENEROUS_LIMITS]);
  expect(limits.code, limits.stderr).toBe(0);
  const email = `pages-${tag()}@example.test`;
  const user = await mailfleet(['user', 'create', '--email', email, '--team', team.teamId, '--json']);
  expect(user.code, user.stderr).toBe(0);
  const { password } = JSON.parse(user.stdout) as { password: string };
  ({ domain } = await addVerifiedDomain(token, 'pages'));
  receiver = await startHttpsReceiver({ ca: await loadTestCa(inject('testCaDir')) });

  browser = await launchBrowser();
  context = await newContext(browser);
  page = await context.newPage();
  // A missing element fails its step soon, with its name, rather than the whole test's time-out.
  page.setDefaultTimeout(20_000);
  page.on('dialog', (d) => void d.accept());
  await signIn(page, { email, password });
});
afterAll(async () => {
  await browser?.close();
  await receiver?.close();
});

async function createBook(name: string): Promise<string> {
  await openPage(page, '/contacts', 'Contacts');
  await page.getByLabel('Book name').fill(name);
  await page.getByRole('button', { name: 'Create book' }).click();
  await page.getByRole('heading', { level: 1, name }).waitFor();
  return decodeURIComponent(new URL(page.url()).pathname.split('/').pop() ?? '');
}

describe('console-pages in a browser', () => {
  it('imports a 1,000-row CSV in chunks: the bar finishes, the bad row is named by its line, the contacts are stored', async () => {
    await openPage(page, '/contacts', 'Contacts');
    await expectAccessible(page, 'contacts (books)');
    const bookId = await createBook(`Import ${tag()}`);
    await page.getByText('This book has no contact yet').waitFor();
    await expectAccessible(page, 'contact book (empty)');

    const t = tag();
    const lines = ['email,first_name,Last Name,subscribed,plan'];
    for (let i = 0; i < 1000; i++) lines.push(`${inbox(`imp-${t}-${i}`)},First${i},"Last, ${i}",${i % 10 === 0 ? 'no' : 'yes'},${i % 2 ? 'pro' : 'free'}`);
    lines.push('not-an-address,Bad,Row,yes,free'); // line 1002
    await page.getByLabel('CSV file to import').setInputFiles({ name: 'contacts.csv', mimeType: 'text/csv', buffer: Buffer.from(lines.join('\n')) });

    const bar = page.getByRole('progressbar', { name: /Importing contacts\.csv/ });
    await bar.waitFor();
    expect(await bar.getAttribute('aria-valuemax')).toBe('1001');
    await page.getByText('Import finished: 1000 created, 0 updated, 1 rows refused.').waitFor({ timeout: 60_000 });
    expect(await bar.getAttribute('aria-valuenow')).toBe('1001');
    const refused = page.getByRole('region', { name: 'CSV import' }).getByRole('row').filter({ hasText: 'not-an-address' });
    await expect.poll(() => refused.textContent(), { timeout: 10_000 }).toMatch(/^1002/);
    await expectAccessible(page, 'contact book (after import)');

    const book = (await api('GET', `/v1/contactBooks/${bookId}`, { token })).body as { details: { totalContacts: number; unsubscribedContacts: number } };
    expect(book.details).toMatchObject({ totalContacts: 1000, unsubscribedContacts: 100 });
    const [c7] = (await api('GET', `/v1/contactBooks/${bookId}/contacts?emails=${encodeURIComponent(inbox(`imp-${t}-7`))}`, { token })).body as {
      firstName: string; lastName: string; subscribed: boolean; properties: Record<string, string>;
    }[];
    expect(c7).toMatchObject({ firstName: 'First7', lastName: 'Last, 7', subscribed: true, properties: { plan: 'pro' } });

    // Search, then the subscribed toggle, through the page.
    await page.getByRole('searchbox', { name: 'Search' }).fill(`imp-${t}-7@`);
    await page.getByRole('row').filter({ hasText: inbox(`imp-${t}-7`) }).waitFor();
    expect(await page.getByRole('row').filter({ hasText: `imp-${t}-` }).count()).toBe(1);
    // The toggle follows the API (no optimistic state): click, then the stored value and the box change.
    const toggle = page.getByLabel(`Subscribed: ${inbox(`imp-${t}-7`)}`);
    await toggle.click();
    await until(async () => {
      const [c] = (await api('GET', `/v1/contactBooks/${bookId}/contacts?emails=${encodeURIComponent(inbox(`imp-${t}-7`))}`, { token })).body as { subscribed: boolean }[];
      return c?.subscribed === false;
    }, 10_000, 'contact unsubscribed by the toggle');
    await expect.poll(() => toggle.isChecked(), { timeout: 10_000 }).toBe(false);

    // A whole address is found in the whole book, not only the page shown (500 contacts a page).
    await page.getByRole('searchbox', { name: 'Search' }).fill(inbox(`imp-${t}-900`));
    await page.getByRole('row').filter({ hasText: inbox(`imp-${t}-900`) }).waitFor();
    await page.getByRole('searchbox', { name: 'Search' }).fill('');

    // Export: the download holds every contact.
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export CSV' }).click();
    const file = await (await download).path();
    const { readFile } = await import('node:fs/promises');
    const csv = (await readFile(file, 'utf8')).trim().split(/\r?\n/);
    expect(csv[0]).toBe('email,firstName,lastName,subscribed,plan');
    expect(csv.length).toBe(1001);

    await expectFitsPhone(page, 'contact book');
  }, 150_000);

  it('creates a template with a live preview of its variables', async () => {
    await openPage(page, '/templates', 'Templates');
    await page.getByText('No template yet').waitFor();
    await expectAccessible(page, 'templates (empty)');
    await page.getByRole('link', { name: 'New template' }).click();
    await page.getByRole('heading', { level: 1, name: 'New template' }).waitFor();
    const name = `Welcome ${tag()}`;
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByLabel('Subject').fill('Welcome, {{name}}');
    await page.getByLabel('HTML').fill('<h1>Hi {{name}}</h1><p>Your plan: {{plan}}</p><script>document.title="ran"</script>');
    await page.getByLabel('{{plan}}', { exact: true }).fill('Pro & more');
    await page.getByLabel('{{name}}', { exact: true }).fill('Ada');
    // The preview is a sandboxed srcdoc frame (no scripts: a browser driver cannot run in it either): read what it renders.
    const frame = page.locator('iframe[title="Template preview"]');
    expect(await frame.getAttribute('sandbox')).toBe('');
    await expect.poll(() => frame.getAttribute('srcdoc'), { timeout: 10_000 }).toContain('<h1>Hi Ada</h1><p>Your plan: Pro &amp; more</p>');
    await page.getByText('Subject: Welcome, Ada').waitFor();
    await expectAccessibleWithPreview(page, 'template editor');
    await expectFitsPhone(page, 'template editor');
    await page.getByRole('button', { name: 'Create template' }).click();
    await page.getByRole('heading', { level: 1, name: `Template: ${name}` }).waitFor();
    const list = (await api('GET', '/v1/templates', { token })).body as { name: string; subject: string }[];
    expect(list.find((x) => x.name === name)?.subject).toBe('Welcome, {{name}}');
  });

  it('composes, previews, sends a campaign and watches it complete, with pause and resume', async () => {
    const t = tag();
    const bookName = `Audience ${t}`;
    const bookId = await createBook(bookName);
    const rows = Array.from({ length: 40 }, (_, i) => ({ email: inbox(`camp-${t}-${i}`), firstName: `Reader${i}` }));
    expect((await api('POST', `/v1/contactBooks/${bookId}/contacts/bulk`, { token, body: rows })).status).toBe(200);

    await openPage(page, '/campaigns', 'Campaigns');
    await page.getByText('No campaign yet').waitFor();
    await expectAccessible(page, 'campaigns (empty)');
    await page.getByRole('link', { name: 'New campaign' }).click();
    await page.getByRole('heading', { level: 1, name: 'New campaign' }).waitFor();
    const name = `Launch ${t}`;
    await page.getByLabel('Campaign name').fill(name);
    await page.getByLabel('Contact book').selectOption(bookId);
    await page.getByLabel('From', { exact: true }).fill(`News <news@${domain}>`);
    await page.getByLabel('Subject', { exact: true }).fill('Hello {{firstName}}');

    // The preview as a chosen contact gets it.
    const receiverSelect = page.getByLabel('As received by');
    await expect.poll(() => receiverSelect.locator('option').count(), { timeout: 10_000 }).toBe(40);
    await receiverSelect.selectOption({ label: inbox(`camp-${t}-3`) });
    await expect.poll(() => page.getByTestId('preview-subject').textContent(), { timeout: 10_000 }).toBe('Hello Reader3');
    await expect.poll(() => page.locator('iframe[title="Campaign preview"]').getAttribute('srcdoc'), { timeout: 10_000 }).toContain('<p>Hello Reader3,</p>');

    // Natural language shows the time it resolves to.
    await page.getByLabel('Schedule', { exact: true }).check();
    await page.getByLabel(/^Send at/).fill('in 2 hours');
    const resolvedText = await page.locator('#resolved-time').textContent();
    const iso = /\((\d{4}-\d{2}-\d{2}T[\d:.]+Z),/.exec(resolvedText ?? '')?.[1];
    expect(iso, resolvedText ?? '').toBeTruthy();
    expect(Math.abs(new Date(iso!).getTime() - (Date.now() + 2 * 3600_000))).toBeLessThan(120_000);
    await page.getByLabel(/^Send at/).fill('when pigs fly');
    await page.getByText('Not a date or time the platform understands').waitFor();
    await expectAccessibleWithPreview(page, 'campaign compose');
    await expectFitsPhone(page, 'campaign compose');

    // The API's own message when it refuses: a body without the unsubscribe link.
    await page.getByLabel('Save as a draft').check();
    await page.getByLabel('Body', { exact: true }).fill('<p>Hello {{firstName}}, no link</p>');
    await page.getByRole('button', { name: 'Save draft' }).click();
    await expect.poll(() => page.getByRole('alert').textContent(), { timeout: 15_000 }).toContain('{{service_unsubscribe_url}}');
    await page.getByLabel('Body', { exact: true }).fill('<p>Hello {{firstName}},</p><p><a href="{{service_unsubscribe_url}}">Unsubscribe</a></p>');

    // Send now, in batches of 20, 30 minutes apart (the e2e platform's batch "minute" is a second):
    // the first batch goes at once, the second after the window.
    await page.getByLabel('Send now').check();
    await page.getByLabel(/^Batch size/).fill('20');
    await page.getByLabel(/^Batch window/).fill('30');
    await page.getByRole('button', { name: 'Send campaign' }).click();
    await page.getByRole('heading', { level: 1, name }).waitFor();
    const campaignId = decodeURIComponent(new URL(page.url()).pathname.split('/').pop() ?? '');

    const bar = page.getByRole('progressbar', { name: 'Sending progress' });
    await expect.poll(async () => Number(await bar.getAttribute('aria-valuenow')), { timeout: 30_000 }).toBe(20);
    expect(await bar.getAttribute('aria-valuemax')).toBe('40');
    await page.getByRole('status').filter({ hasText: 'SENDING' }).first().waitFor();
    await expectAccessibleWithPreview(page, 'campaign detail (sending)');
    await screenshot(page, 'campaign');

    // Pause and resume while it waits for its next batch.
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByRole('button', { name: 'Resume' }).waitFor();
    expect(((await api('GET', `/v1/campaigns/${campaignId}`, { token })).body as { status: string }).status).toBe('PAUSED');
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByRole('button', { name: 'Pause' }).waitFor();

    // The bar finishes and the page says COMPLETED, as the API does.
    await page.getByRole('status').filter({ hasText: 'COMPLETED' }).first().waitFor({ timeout: 90_000 });
    await expect.poll(() => bar.getAttribute('aria-valuenow'), { timeout: 30_000 }).toBe('40');
    const done = (await api('GET', `/v1/campaigns/${campaignId}`, { token })).body as { status: string; total: number; sent: number };
    expect(done).toMatchObject({ status: 'COMPLETED', total: 40, sent: 40 });
  }, 180_000);

  it('suppresses an address, finds it by search and reason, removes it', async () => {
    await openPage(page, '/suppressions', 'Suppressions');
    await expectAccessible(page, 'suppressions');
    const address = `blocked-${tag()}@example.org`;
    await page.getByLabel('Address to suppress').fill(address);
    await page.getByRole('button', { name: 'Suppress' }).click();
    await page.getByRole('row').filter({ hasText: address }).waitFor();
    await page.getByRole('searchbox', { name: 'Search' }).fill(address.slice(0, 12));
    await page.getByRole('combobox', { name: 'Reason' }).last().selectOption('COMPLAINT');
    await page.getByText('No suppression matches these filters').waitFor();
    await page.getByRole('combobox', { name: 'Reason' }).last().selectOption('MANUAL');
    await page.getByRole('row').filter({ hasText: address }).waitFor();
    await expectAccessible(page, 'suppressions (filtered)');
    await expectFitsPhone(page, 'suppressions');
    await page.getByRole('button', { name: `Remove ${address}` }).click();
    await page.getByText('No suppression matches these filters').waitFor();
    const left = (await api('GET', `/v1/suppressions?search=${encodeURIComponent(address)}`, { token })).body as { total: number };
    expect(left.total).toBe(0);
  });

  it('creates a webhook to a real HTTPS receiver, shows its secret once, tests it and rotates the secret', async () => {
    await openPage(page, '/webhooks', 'Webhooks');
    await page.getByText('No webhook yet').waitFor();
    await expectAccessible(page, 'webhooks (empty)');
    await expectFitsPhone(page, 'webhooks');
    const path = `/console-${tag()}`;
    await page.getByLabel('Endpoint URL (HTTPS)').fill(`${receiver.url}${path}`);
    await page.getByLabel('All domain events').check();
    await page.getByLabel('email.bounced').uncheck();
    await page.getByRole('button', { name: 'Create webhook' }).click();
    const secret = (await page.getByTestId('webhook-secret').textContent()) ?? '';
    expect(secret.length).toBeGreaterThanOrEqual(16);
    await expectAccessible(page, 'webhooks (secret shown)');
    const [hook] = (await api('GET', '/v1/webhooks', { token })).body as { id: string; eventTypes: string[]; secret: string }[];
    expect(new Set(hook!.eventTypes)).toEqual(new Set(['email.delivered', 'email.complained', 'domain.created', 'domain.verified', 'domain.updated', 'domain.deleted']));
    expect(hook!.secret).not.toBe(secret); // masked from now on

    await page.getByRole('link', { name: 'Open the new webhook to send a test event' }).click();
    await page.getByRole('heading', { level: 1, name: 'Webhook' }).waitFor();
    await page.getByRole('button', { name: 'Send test event' }).click();
    const record = page.getByRole('region', { name: 'Test delivery' });
    await record.getByText('SUCCESS').first().waitFor({ timeout: 30_000 });
    await expect.poll(() => receiver.requests().filter((r) => r.path === path).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
    await page.getByRole('cell', { name: 'webhook.test' }).first().waitFor();
    await expectAccessible(page, 'webhook detail');
    await expectFitsPhone(page, 'webhook detail');

    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByRole('button', { name: 'Activate' }).waitFor();
    expect(((await api('GET', `/v1/webhooks/${hook!.id}`, { token })).body as { status: string }).status).toBe('PAUSED');
    await page.getByRole('button', { name: 'Activate' }).click();
    await page.getByRole('button', { name: 'Pause' }).waitFor();

    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const rotated = (await page.getByTestId('webhook-secret').textContent()) ?? '';
    expect(rotated.length).toBeGreaterThanOrEqual(16);
    expect(rotated).not.toBe(secret);
  });

  it('is usable by keyboard: the import and compose controls are reached with Tab', async () => {
    await openPage(page, '/campaigns/new', 'New campaign');
    const seen = new Set<string>();
    for (let i = 0; i < 40 && !seen.has('Campaign name'); i++) {
      await page.keyboard.press('Tab');
      const label = await page.evaluate<string>("(() => { const el = document.activeElement; return (el && el.labels && el.labels[0] ? el.labels[0].textContent : el ? el.textContent : '').trim(); })()");
      seen.add(label);
    }
    expect(seen.has('Campaign name')).toBe(true);
  });
});
