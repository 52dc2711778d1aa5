import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { launchBrowser, newPage } from '../helpers/browser.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * The interactive API reference at /docs, in a real browser against a real node: a token typed
 * into "Authorize" is sent by "Try it out", and GET /api/v1/auth/me answers with the user.
 */
let t: TestNode;
let browser: Browser;

beforeAll(async () => {
  t = await startTestNode();
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.destroy();
});

describe('/docs', () => {
  it('calls GET /api/v1/auth/me with a token typed into the page', async () => {
    const user = await t.newUser('docsui');
    const { page, errors } = await newPage(browser);
    await page.goto(`${t.url}/docs`);
    await page.getByRole('heading', { name: /Platform service/ }).waitFor();

    // Authorize: the bearerAuth scheme's value box, then close the dialog.
    await page.getByRole('button', { name: 'Authorize' }).first().click();
    await page.locator('.auth-container input').fill(user.token);
    await page.locator('.modal-ux button.modal-btn.authorize').click();
    await page.locator('.modal-ux button.btn-done').click();

    // The auth section, then the operation, its "Try it out" and "Execute".
    await page.locator('#operations-tag-auth').click();
    const operation = page.locator('.opblock-get', { has: page.locator('.opblock-summary-path[data-path="/api/v1/auth/me"]') });
    await operation.locator('.opblock-summary').click();
    // The description from docs/api/accounts.md is on the operation.
    await operation.getByText('From docs/api/accounts.md').waitFor();
    await operation.getByRole('button', { name: 'Try it out' }).click();
    await operation.getByRole('button', { name: 'Execute' }).click();

    const response = operation.locator('.live-responses-table');
    await response.locator('.response-col_status', { hasText: '200' }).waitFor();
    await response.getByText(user.email).first().waitFor();
    // The request the page sent carried the typed token.
    await expect.poll(() => operation.locator('.curl-command').innerText()).toContain(`Bearer ${user.token}`);
    expect(errors).toEqual([]);
  });
});
