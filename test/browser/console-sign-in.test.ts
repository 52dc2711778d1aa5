import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { launchBrowser, newPage, signInToConsole } from '../helpers/browser.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** The console's sign-in, in a real browser against a real node (assets from `npm run build`). */
const ADMIN_EMAIL = 'console-admin@example.com';
const ADMIN_PASSWORD = 'console admin password';

let t: TestNode;
let browser: Browser;

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.destroy();
});

describe('console sign-in', () => {
  it('signs an administrator in and out', async () => {
    const { page, errors } = await newPage(browser);
    await signInToConsole(page, t.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    await expect(page.getByText(`Signed in as ${ADMIN_EMAIL}`)).toBeDefined();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    expect(errors).toEqual([]);
  });

  it('refuses a user who is not an administrator, and a wrong password', async () => {
    const user = await t.newUser('notadmin');
    const { page } = await newPage(browser);
    await page.goto(`${t.url}/console/`);
    await page.getByLabel('E-mail or username').fill(user.email);
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').getByText('not a platform administrator').waitFor();

    await page.getByLabel('Password').fill('wrong password here');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').getByText('invalid_credentials').waitFor();
  });

  it('redirects /console to /console/ and is not in /openapi.json', async () => {
    const bare = await fetch(`${t.url}/console`, { redirect: 'manual' });
    expect(bare.status).toBe(302);
    expect(bare.headers.get('location')).toBe('/console/');
    const spec = await t.request('GET', '/openapi.json');
    expect(Object.keys(spec.body.paths).filter((p) => p.startsWith('/console'))).toEqual([]);
  });
});
