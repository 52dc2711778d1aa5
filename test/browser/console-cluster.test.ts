import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { launchBrowser, newPage, signInToConsole } from '../helpers/browser.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** The console's cluster page, in a real browser against a real embedded node (assets from `npm run build`). */
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

describe('console cluster page', () => {
  it('shows the embedded node, live, with its partitions', async () => {
    const { page, errors } = await newPage(browser);
    await signInToConsole(page, t.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    await page.goto(`${t.url}/console/#/cluster`);
    const nodes = page.getByRole('table', { name: 'Nodes' });
    await nodes.getByRole('cell', { name: 'embedded (this node)' }).waitFor();
    await expect(nodes.getByRole('row').nth(1).textContent()).resolves.toContain('serving');
    await page.getByText('Live').first().waitFor();
    const partitions = page.getByRole('table', { name: 'Partitions' });
    // testConfig: 8 partitions, each led by the one node.
    await expect.poll(() => partitions.getByRole('row').count()).toBe(9);
    await expect(partitions.getByRole('row').nth(1).textContent()).resolves.toContain('embedded');
    // The stream refreshes the view: the update time changes without a reload.
    const first = await page.locator('.live').textContent();
    await expect.poll(() => page.locator('.live').textContent(), { timeout: 10_000 }).not.toBe(first);
    expect(errors).toEqual([]);
  }, 30_000);

  it('drain asks for confirmation: cancel changes nothing, confirm on the embedded node shows the 409', async () => {
    const { page, errors } = await newPage(browser);
    const drains: string[] = [];
    page.on('request', (request) => {
      if (request.url().includes('/drain')) drains.push(request.method());
    });
    await signInToConsole(page, t.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    await page.goto(`${t.url}/console/#/cluster`);
    await page.getByRole('button', { name: 'Drain' }).click();
    const dialog = page.getByRole('alertdialog');
    await dialog.getByText('Drain embedded?').waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect(drains).toEqual([]);
    await expect(page.getByRole('row').nth(1).textContent()).resolves.toContain('serving');

    await page.getByRole('button', { name: 'Drain' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Drain embedded' }).click();
    await page.getByRole('alert').getByText('no_drain_target').waitFor();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('no other node');
    expect(drains).toEqual(['POST']);
    expect((await t.request('GET', '/health/ready')).status).toBe(200);
    expect(errors).toEqual([]);
  }, 30_000);
});
