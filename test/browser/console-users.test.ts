import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, signInToConsole } from '../helpers/browser.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * The Users and Organizations pages in a real browser against a real node: search, ban (the
 * session list empties), unban, ending one session, impersonation, an organization's members.
 */
const ADMIN_EMAIL = 'users-admin@example.com';
const ADMIN_PASSWORD = 'users admin password';

let t: TestNode;
let browser: Browser;
let page: Page;
let errors: string[];
let adminToken: string;

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
  browser = await launchBrowser();
  ({ page, errors } = await newPage(browser));
  await signInToConsole(page, t.url, ADMIN_EMAIL, ADMIN_PASSWORD);
  adminToken = await t.loginAdmin();
});
afterAll(async () => {
  await browser?.close();
  await t?.destroy();
});

async function login(user: { email: string; password: string }): Promise<string> {
  const res = await t.request('POST', '/api/v1/auth/login', { body: { login: user.email, password: user.password } });
  expect(res.status).toBe(200);
  return res.body.access_token;
}

/** Finds the user by e-mail with the page's search and opens their detail. */
async function openUser(email: string): Promise<void> {
  await page.goto(`${t.url}/console/#/users`);
  await page.getByLabel('Search').fill(email);
  await page.getByRole('button', { name: 'Search' }).click();
  await page.getByRole('table', { name: 'Users' }).getByRole('link', { name: email }).click();
  await page.getByRole('heading', { name: email }).waitFor();
}

async function confirm(label: string): Promise<void> {
  await page.getByRole('alertdialog').getByRole('button', { name: label }).click();
}

const activeSessionRows = () => page.getByRole('table', { name: 'Sessions' }).getByRole('row').filter({ hasText: 'active' });

describe('console users page', () => {
  it('search finds a user by e-mail, and only them', async () => {
    const target = await t.newUser('findme');
    await t.newUser('other');
    await page.goto(`${t.url}/console/#/users`);
    await page.getByLabel('Search').fill(target.email);
    await page.getByRole('button', { name: 'Search' }).click();
    const table = page.getByRole('table', { name: 'Users' });
    await table.getByRole('link', { name: target.email }).waitFor();
    await expect.poll(() => table.locator('tbody tr').count()).toBe(1);
  });

  it('bans a user: the session list empties and their token is refused; unban lets them sign in again', async () => {
    const target = await t.newUser('banme');
    await login(target);
    await openUser(target.email);
    await expect.poll(() => activeSessionRows().count()).toBe(2);

    await page.getByLabel('Ban reason').fill('spamming the lobby');
    await page.getByRole('button', { name: 'Ban', exact: true }).click();
    await confirm('Ban');
    await page.getByText('No active session.').waitFor();
    expect(await activeSessionRows().count()).toBe(0);
    await page.getByText(/spamming the lobby/).waitFor();
    await expect.poll(() => page.getByTestId('active-session-count').textContent()).toBe('0');
    expect((await t.request('GET', '/api/v1/auth/me', { token: target.token })).status).toBe(401);
    expect((await t.request('POST', '/api/v1/auth/login', { body: { login: target.email, password: target.password } })).status).toBe(403);

    await page.getByRole('button', { name: 'Unban' }).click();
    await confirm('Unban');
    await page.getByRole('button', { name: 'Ban', exact: true }).waitFor();
    expect(await page.getByText(/spamming the lobby/).count()).toBe(0);
    await login(target);
    await page.reload();
    await expect.poll(() => activeSessionRows().count()).toBe(1);
    expect(errors).toEqual([]);
  });

  it('cancelling the confirmation bans nobody', async () => {
    const target = await t.newUser('keepme');
    await openUser(target.email);
    await page.getByLabel('Ban reason').fill('not really');
    await page.getByRole('button', { name: 'Ban', exact: true }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Cancel' }).click();
    expect((await t.request('GET', '/api/v1/auth/me', { token: target.token })).status).toBe(200);
    const detail = await t.request('GET', `/admin/auth/users/${target.user_id}`, { token: adminToken });
    expect(detail.body.ban).toBeNull();
  });

  it('ends one session and leaves the other', async () => {
    const target = await t.newUser('twosessions');
    const second = await login(target);
    await openUser(target.email);
    await expect.poll(() => activeSessionRows().count()).toBe(2);

    // Sessions are listed newest first: the first row is the second login's session.
    const sessions = await t.request('GET', `/admin/auth/sessions?user_id=${target.user_id}`, { token: adminToken });
    const newest = sessions.body.sessions[0].id as string;
    await page.getByRole('row').filter({ hasText: newest }).getByRole('button', { name: 'End' }).click();
    await confirm('End session');
    await expect.poll(() => activeSessionRows().count()).toBe(1);
    expect((await t.request('GET', '/api/v1/auth/me', { token: second })).status).toBe(401);
    expect((await t.request('GET', '/api/v1/auth/me', { token: target.token })).status).toBe(200);
  });

  it('impersonates a user: shows the tokens, and the session is marked', async () => {
    const target = await t.newUser('impersonated');
    await openUser(target.email);
    await page.getByRole('button', { name: 'Impersonate' }).click();
    await confirm('Impersonate');
    const panel = page.getByRole('region', { name: 'Impersonation' });
    await panel.getByText('access_token').waitFor();
    const token = await panel.locator('code.token').first().textContent();
    const me = await t.request('GET', '/api/v1/auth/me', { token: token! });
    expect(me.status).toBe(200);
    expect(me.body.id).toBe(target.user_id);
    const admin = await t.request('GET', '/api/v1/auth/me', { token: adminToken });
    await page.getByRole('table', { name: 'Sessions' }).getByRole('cell', { name: admin.body.id }).waitFor();
  });

  it('shows the API refusing to impersonate an administrator', async () => {
    await openUser(ADMIN_EMAIL);
    await page.getByRole('button', { name: 'Impersonate' }).click();
    await confirm('Impersonate');
    await page.getByRole('alert').getByText(/conflict|forbidden/).waitFor();
  });
});

describe('console organizations page', () => {
  it('finds an organization and lists its members', async () => {
    const owner = await t.newUser('orgowner');
    const created = await t.request('POST', '/admin/auth/orgs', { token: adminToken, body: { name: 'Console Test Guild', owner_user_id: owner.user_id } });
    expect(created.status).toBe(201);
    await page.goto(`${t.url}/console/#/organizations`);
    await page.getByLabel('Search').fill('console test');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('link', { name: 'Console Test Guild' }).click();
    await page.getByRole('heading', { name: 'Console Test Guild' }).waitFor();
    const members = page.getByRole('table', { name: 'Members' });
    await members.getByRole('link', { name: owner.email }).waitFor();
    await members.getByRole('cell', { name: 'owner', exact: true }).waitFor();
    await members.getByRole('link', { name: owner.email }).click();
    await page.getByRole('heading', { name: owner.email }).waitFor();
    expect(errors).toEqual([]);
  });
});
