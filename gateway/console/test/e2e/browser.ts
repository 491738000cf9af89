// Shared browser helpers of the console's e2e tests (console-ui's and console-pages' pages):
// Debian's chromium driven by playwright-core, the console served by the e2e platform's gateway.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { GENEROUS_LIMITS, gatewayUrl, mailfleet } from '../../../test/e2e/helpers.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/**
 * Where screenshots go: the README's own under gateway/console/docs/ with CONSOLE_SCREENSHOTS=docs (how they
 * are refreshed), else a temporary directory, so an ordinary test run leaves the work tree clean.
 */
export const DOCS_DIR = process.env['CONSOLE_SCREENSHOTS'] === 'docs'
  ? new URL('../../docs/', import.meta.url)
  : new URL(`file://${path.join(os.tmpdir(), 'mailfleet-console-screenshots')}/`);

export const DESKTOP = { width: 1280, height: 800 } as const;
export const PHONE = { width: 390, height: 844 } as const;

export async function launchBrowser(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (see .ci/run)`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
}

/** A fresh cookie jar on the gateway's origin; clipboard allowed so copy buttons can be checked. */
export async function newContext(browser: Browser, viewport: { width: number; height: number } = DESKTOP): Promise<BrowserContext> {
  const context = await browser.newContext({ baseURL: gatewayUrl(), viewport });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: gatewayUrl() });
  return context;
}

export interface ConsoleUser {
  email: string;
  password: string;
  teamId: string;
  /** The team's first API key (FULL), for setting things up or checking them over the API. */
  token: string;
}

/** A team and a person who can sign in to it (operator CLI, as a user would do). */
export async function createConsoleUser(label: string): Promise<ConsoleUser> {
  const suffix = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const team = await mailfleet(['team', 'create', '--name', `${label} ${suffix}`, '--json']);
  if (team.code !== 0) throw new Error(`team create failed: ${team.stderr}`);
  const { teamId, token } = JSON.parse(team.stdout) as { teamId: string; token: string };
  const limits = await mailfleet(['team', 'update', '--team', teamId, ...GENEROUS_LIMITS]);
  if (limits.code !== 0) throw new Error(`team update failed: ${limits.stderr}`);
  const email = `${label.toLowerCase().replace(/[^a-z0-9]/g, '')}-${suffix}@example.test`;
  const user = await mailfleet(['user', 'create', '--email', email, '--team', teamId, '--json']);
  if (user.code !== 0) throw new Error(`user create failed: ${user.stderr}`);
  const { password } = JSON.parse(user.stdout) as { password: string };
  return { email, password, teamId, token };
}

/** Signs in through the sign-in page (the one already open, keeping its `next`) and waits for the shell. */
export async function signIn(page: Page, user: Pick<ConsoleUser, 'email' | 'password'>): Promise<void> {
  if (!page.url().includes('/sign-in')) await page.goto('/sign-in');
  await page.getByLabel('Email').fill(user.email);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Console' }).waitFor();
}

/** Opens a console path and waits for its page heading. */
export async function openPage(page: Page, path: string, heading: string | RegExp): Promise<void> {
  await page.goto(path);
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
}

/**
 * axe-core on the current page: no serious or critical violation (WCAG 2 A/AA rules). Mail previews
 * are left out: their HTML is the sender's, not the console's, and axe cannot run inside them (the
 * sandbox forbids scripts, so axe would wait for the frame forever).
 */
export async function expectAccessible(page: Page, what: string): Promise<void> {
  const result = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).exclude('iframe.mail-frame').analyze();
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  const described = bad.map((v) => `${v.id} (${v.impact}): ${v.help}\n  ${v.nodes.map((n) => n.target.join(' ')).slice(0, 5).join('\n  ')}`);
  expect(described, `accessibility of ${what}`).toEqual([]);
}

/** Writes <name>.png into DOCS_DIR (gateway/console/docs/ when refreshing the README's screenshots). */
export async function screenshot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(DOCS_DIR, { recursive: true });
  await page.screenshot({ path: new URL(`${name}.png`, DOCS_DIR).pathname, fullPage: true });
}
