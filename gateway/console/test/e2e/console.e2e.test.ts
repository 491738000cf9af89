// The web console in a real browser (Debian's chromium via playwright-core) against the whole
// platform, served by the gateway as in production: issue 21's flows of console-ui's pages.
import { randomBytes } from 'node:crypto';
import { setDnsRecords } from '@mailfleet/testkit';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { apiAt, gatewayUrl, until } from '../../../test/e2e/helpers.js';
import { createConsoleUser, expectAccessible, launchBrowser, newContext, openPage, PHONE, screenshot, signIn, type ConsoleUser } from './browser.js';

let browser: Browser;
let context: BrowserContext;
let page: Page;
let user: ConsoleUser;
/** The domain the second test adds and verifies; the third sends from it. */
let domainName = '';
const cspViolations: string[] = [];

beforeAll(async () => {
  const root = await fetch(`${gatewayUrl()}/`);
  expect(root.status, 'the gateway serves the console (npm run console:build)').toBe(200);
  user = await createConsoleUser('Console UI');
  browser = await launchBrowser();
  context = await newContext(browser);
  page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
  });
  page.on('dialog', (d) => void d.accept());
});
// A failed step leaves a picture of the page behind (the assertion alone rarely says why).
afterEach(async (ctx) => {
  if (ctx.task.result?.state !== 'fail' || !page || page.isClosed()) return;
  const file = path.join(os.tmpdir(), `console-e2e-${ctx.task.name.replace(/\W+/g, '-').slice(0, 60)}.png`);
  await page.screenshot({ path: file, fullPage: true }).catch(() => undefined);
  console.error(`console e2e: screenshot of the failed step in ${file}`);
});
afterAll(async () => {
  await browser?.close();
});

describe('console-ui pages in a browser', () => {
  it('refuses a wrong password with the API message, then signs in', async () => {
    await page.goto('/emails');
    await page.waitForURL(/\/sign-in\?next=%2Femails/);
    await expectAccessible(page, 'sign-in');
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Invalid email or password');
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    // Back where the user was going.
    await page.getByRole('heading', { level: 1, name: 'Emails' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/emails');
    await expectAccessible(page, 'emails (empty)');
  });

  it('adds a domain, copies a DNS record, verifies it with live status', async () => {
    await openPage(page, '/domains', 'Domains');
    await expectAccessible(page, 'domains (empty)');
    const name = `console-${randomBytes(4).toString('hex')}.mailfleet-e2e.test`;
    domainName = name;
    await page.getByLabel('Domain name').fill(name);
    await page.getByRole('button', { name: 'Add domain' }).click();
    await page.getByRole('heading', { level: 1, name }).waitFor();
    const domainId = decodeURIComponent(new URL(page.url()).pathname.split('/').pop() ?? '');

    // The records the page shows are the API's; the copy button puts the value on the clipboard.
    const api = apiAt(gatewayUrl());
    const d = (await api('GET', `/v1/domains/${domainId}`, { token: user.token })).body as { dnsRecords: { type: string; name: string; value: string; priority: string | null }[] };
    expect(d.dnsRecords.length).toBeGreaterThan(0);
    const first = d.dnsRecords[0]!;
    await page.getByRole('button', { name: `Copy value: ${first.value.slice(0, 40)}` }).first().click();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(first.value);
    await expectAccessible(page, 'domain detail');

    // Publish them (what the user does at their DNS provider), verify, and watch the status change.
    for (const r of d.dnsRecords) {
      if (r.type === 'MX') await setDnsRecords(r.name, 'MX', [{ priority: Number(r.priority), exchange: r.value }]);
      else await setDnsRecords(r.name, 'TXT', [r.value]);
    }
    await page.getByRole('button', { name: 'Verify DNS records' }).click();
    await page.getByRole('status').filter({ hasText: 'SUCCESS' }).waitFor({ timeout: 30_000 });
    await page.getByLabel(/Open tracking/).check();
    await expect.poll(async () => ((await api('GET', `/v1/domains/${domainId}`, { token: user.token })).body as { openTracking: boolean }).openTracking).toBe(true);
    await screenshot(page, 'domain');
  });

  it('sends a test email and follows it to DELIVERED on its timeline', async () => {
    await openPage(page, '/dev/inbox', 'Dev inbox');
    const subject = `Console test ${randomBytes(3).toString('hex')}`;
    await page.getByLabel('To').fill('someone@example.org');
    await page.getByLabel('Subject').fill(subject);
    await page.getByRole('button', { name: 'Send test email' }).click();
    await page.getByRole('link', { name: 'see its timeline' }).click();
    await page.getByRole('heading', { level: 1, name: subject }).waitFor();
    await page.getByRole('list', { name: 'Events' }).getByText('DELIVERED', { exact: true }).waitFor({ timeout: 30_000 });
    // The HTML part is in a sandboxed iframe: no scripts, no same-origin access.
    const frame = page.locator('iframe.mail-frame');
    expect(await frame.getAttribute('sandbox')).toBe('');
    expect(await frame.getAttribute('srcdoc')).toContain(subject);
    await expectAccessible(page, 'email detail');
    await screenshot(page, 'email');

    // What the recipient got: the sink's copy, DKIM-signed by the verified domain, with the sink's verdict shown.
    await openPage(page, '/dev/inbox', 'Dev inbox');
    await page.getByRole('link', { name: subject }).click();
    await page.getByRole('heading', { level: 2, name: subject }).waitFor();
    await page.locator('dl.props').getByText(/^(pass|fail|none|neutral|temperror|permerror)$/).waitFor();
    expect(await page.locator('iframe.mail-frame').getAttribute('srcdoc')).toContain(subject);
    await page.getByRole('rowheader', { name: 'DKIM-Signature' }).waitFor();
    expect(await page.getByRole('row', { name: /^DKIM-Signature/ }).textContent()).toContain(`d=${domainName}`);
    await expectAccessible(page, 'dev inbox message');
    await screenshot(page, 'dev-inbox');

    await openPage(page, '/emails', 'Emails');
    await page.getByRole('link', { name: subject }).waitFor();
    expect(await page.getByRole('alert').count()).toBe(0);
    await page.getByLabel('Status').selectOption('BOUNCED');
    await expect.poll(() => page.getByRole('link', { name: subject }).count()).toBe(0);
    await page.getByLabel('Status').selectOption('');
    await expectAccessible(page, 'emails');
  });

  it('creates a key shown once, which works, and revokes it', async () => {
    await openPage(page, '/api-keys', 'API keys');
    await page.getByLabel('Name').fill('console key');
    await page.getByLabel('Permission').selectOption('FULL');
    await page.getByRole('button', { name: 'Create key' }).click();
    const token = (await page.getByTestId('new-token').textContent())?.trim() ?? '';
    expect(token).toMatch(/^\S{20,}$/);
    await page.getByRole('button', { name: /^Copy key/ }).click();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(token);
    await expectAccessible(page, 'API keys');
    const api = apiAt(gatewayUrl());
    expect((await api('GET', '/v1/domains', { token })).status).toBe(200);
    await page.getByRole('button', { name: 'Done' }).click();
    expect(await page.getByTestId('new-token').count()).toBe(0);

    await page.getByRole('button', { name: 'Revoke console key' }).click();
    await expect.poll(() => page.getByRole('button', { name: 'Revoke console key' }).count()).toBe(0);
    await until(async () => (await api('GET', '/v1/domains', { token })).status === 401, 10_000, 'revoked key refused');
  });

  it('shows the overview and settings; every page is accessible, on a phone too', async () => {
    await openPage(page, '/', 'Overview');
    await page.getByText('Sent today (UTC)').waitFor();
    await page.locator('.chart canvas').first().waitFor({ timeout: 30_000 });
    // The one email this team sent, counted in the period's totals (the chart's numbers as a table).
    await expect.poll(async () => (await page.getByRole('table', { name: /^Totals of the last/ }).locator('tbody td').first().textContent({ timeout: 1000 }))?.trim(), { timeout: 30_000 }).toBe('1');
    await expectAccessible(page, 'overview');
    await screenshot(page, 'overview');
    await openPage(page, '/settings', 'Settings');
    await page.getByText(user.teamId).waitFor();
    await expectAccessible(page, 'settings');
    await openPage(page, '/dev/inbox', 'Dev inbox');
    await expectAccessible(page, 'dev inbox');

    const phone = await context.newPage();
    await phone.setViewportSize(PHONE);
    await openPage(phone, '/', 'Overview');
    // The nav is behind the menu button on a phone.
    await expect.poll(() => phone.getByRole('link', { name: 'Domains' }).isVisible()).toBe(false);
    await phone.getByRole('button', { name: 'Menu' }).click();
    await phone.getByRole('link', { name: 'Domains' }).click();
    await phone.getByRole('heading', { level: 1, name: 'Domains' }).waitFor();
    await openPage(phone, '/', 'Overview');
    await phone.locator('.chart canvas').first().waitFor();
    // Nothing wider than the phone: wide tables scroll inside their own box.
    expect(await phone.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(PHONE.width);
    await expectAccessible(phone, 'overview (390 px)');
    await screenshot(phone, 'overview-phone');
    await phone.close();
  });

  it('invites a person, who joins through the link and is listed', async () => {
    await openPage(page, '/settings', 'Settings');
    const email = `invited-${randomBytes(3).toString('hex')}@example.test`;
    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Invite' }).click();
    const url = (await page.locator('.secret .mono').textContent())?.trim() ?? '';
    expect(url).toMatch(/\/invite#token=mfi_/);
    await expectAccessible(page, 'settings with an invite');

    const fresh = await newContext(browser);
    const other = await fresh.newPage();
    await other.goto(url.replace(/^https?:\/\/[^/]+/, ''));
    await other.getByLabel('Password').fill('a long enough password');
    await other.getByRole('button', { name: 'Accept invite' }).click();
    await other.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await fresh.close();

    await page.reload();
    await page.getByRole('cell', { name: email, exact: true }).waitFor();
    expect(await page.getByRole('button', { name: `Remove ${email}` }).count()).toBe(1);
  });

  it('an invite link without a token says so', async () => {
    const fresh = await newContext(browser);
    const other = await fresh.newPage();
    await other.goto('/invite');
    await other.getByRole('heading', { level: 1, name: 'Join a team on mailfleet' }).waitFor();
    await other.getByRole('alert').getByText('Invalid invite link').waitFor();
    await expectAccessible(other, 'invite acceptance');
    await fresh.close();
  });

  it('a session ended elsewhere sends the open console to the sign-in page', async () => {
    await openPage(page, '/api-keys', 'API keys');
    // Signed out from another tab: the cookie is gone and the session revoked.
    const ended = await page.request.delete('/v1/session', { headers: { origin: gatewayUrl() } });
    expect(ended.status()).toBe(204);
    await page.getByRole('link', { name: 'Domains' }).click();
    await page.waitForURL(/\/sign-in\?next=%2Fdomains/);
    await signIn(page, user);
    await page.getByRole('heading', { level: 1, name: 'Domains' }).waitFor();
  });

  it('signs out: the session is refused afterwards', async () => {
    const cookie = (await context.cookies()).find((c) => c.name === 'mf_session');
    expect(cookie?.httpOnly).toBe(true);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/sign-in/);
    // The old cookie value no longer works, even replayed by hand.
    const replay = await fetch(`${gatewayUrl()}/v1/domains`, { headers: { cookie: `mf_session=${cookie?.value}` } });
    expect(replay.status).toBe(401);
    await page.goto('/api-keys');
    await page.waitForURL(/\/sign-in\?next=%2Fapi-keys/);
    expect(cspViolations).toEqual([]);
  });

  it('serves the console with a strict Content-Security-Policy', async () => {
    const res = await fetch(`${gatewayUrl()}/domains/anything`);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toMatch(/script-src[^;]*unsafe-inline/);
  });
});
