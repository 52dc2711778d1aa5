import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { launchBrowser, newPage, signInToConsole } from '../helpers/browser.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** The console's health page: charts fed by GET /admin/metrics/recent, in a real browser against a real node. */
const ADMIN_EMAIL = 'console-admin@example.com';
const ADMIN_PASSWORD = 'console admin password';

let t: TestNode;
let browser: Browser;

beforeAll(async () => {
  // Samples every 500 ms, so the charts grow within the test.
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD, metricsSampleIntervalMs: 500 } });
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.destroy();
});

describe('console health page', () => {
  it('charts receive points as requests are made, and the route shows in the table', async () => {
    const { page, errors } = await newPage(browser);
    await signInToConsole(page, t.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    await page.goto(`${t.url}/console/#/health`);
    const chart = page.getByRole('figure', { name: 'Requests and errors' });
    await chart.waitFor();
    const points = async () => Number(await chart.getAttribute('data-points'));
    await expect.poll(points, { timeout: 10_000 }).toBeGreaterThan(0);
    const before = await points();

    const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    for (let i = 0; i < 10; i++) {
      const res = await t.request('POST', `/api/v1/distributed-state/health-test/k${i}/lock`, { token: login.body.access_token, body: { owner_id: 'console-test' } });
      expect(res.status, res.text).toBe(200);
    }
    await expect.poll(points, { timeout: 10_000 }).toBeGreaterThan(before + 1);
    const routes = page.getByRole('table', { name: 'Routes' });
    await routes.getByText('POST /api/v1/distributed-state/:namespace/:key/lock').waitFor({ timeout: 10_000 });
    const row = routes.getByRole('row').filter({ hasText: ':namespace/:key/lock' });
    await expect.poll(async () => Number((await row.getByRole('cell').nth(1).textContent()) ?? 0), { timeout: 10_000 }).toBe(10);
    // uPlot drew the lines into its canvas.
    expect(await chart.locator('canvas').count()).toBe(1);
    expect(errors).toEqual([]);
  }, 40_000);
});
