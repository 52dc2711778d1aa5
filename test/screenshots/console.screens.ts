import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { launchBrowser, newPage, signInToConsole } from '../helpers/browser.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * Screenshots of every page of the console (`npm run console:screenshots`): a node with some
 * data made through the public API, an administrator signed in, every link of the navigation
 * visited (pages added later are covered without editing this file), one PNG per page in
 * docs/console/<path>.png at 1280x800, and the index between the markers of docs/console.md.
 */
const ADMIN_EMAIL = 'admin@example.com';
const ADMIN_PASSWORD = 'console admin password';
const root = new URL('../../', import.meta.url);
const imagesDir = new URL('docs/console/', root);
const indexFile = new URL('docs/console.md', root);
const START = '<!-- screenshots:start (npm run console:screenshots rewrites this list) -->';
const END = '<!-- screenshots:end -->';

let t: TestNode;
let browser: Browser;
let adminToken: string;
let traffic: Promise<void> | undefined;
let stopTraffic = false;

/** Some data for the pages to show, made as any client would. A failure here only means an emptier page. */
async function seed(): Promise<void> {
  const as = (method: string, path: string, body?: unknown) => t.request(method, path, { token: adminToken, body });
  for (let i = 1; i <= 4; i++) await t.newUser(`player${i}`);
  await as('POST', '/api/v1/orgs', { name: 'Example Studio' });
  for (let i = 0; i < 3; i++) await as('POST', `/api/v1/distributed-state/matchmaking/region-${i}/lock`, { owner_id: `worker-${i}`, ttl_seconds: 3600 });
}

/** Steady requests (and a few refused ones) so that the health page has something to draw. */
async function makeTraffic(): Promise<void> {
  for (let i = 0; !stopTraffic; i++) {
    await t.request('POST', `/api/v1/distributed-state/screenshots/k${i % 50}/lock`, { token: adminToken, body: { owner_id: `o${i % 3}`, ttl_seconds: 5 } });
    await t.request('GET', '/api/v1/auth/me', { token: adminToken });
    await new Promise((resolve) => setTimeout(resolve, 40));
  }
}

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD, metricsSampleIntervalMs: 1_000, partitions: 16 } });
  adminToken = await t.loginAdmin();
  await seed();
  traffic = makeTraffic();
  browser = await launchBrowser();
});
afterAll(async () => {
  stopTraffic = true;
  await traffic;
  await browser?.close();
  await t?.destroy();
});

it('writes one screenshot per page of the navigation and the index in docs/console.md', async () => {
  // Let the node collect some history for the charts (one sample a second).
  await expect
    .poll(async () => (await t.request('GET', '/admin/metrics/recent', { token: adminToken })).body.samples.length, { timeout: 60_000, interval: 1_000 })
    .toBeGreaterThanOrEqual(20);
  const { page, errors } = await newPage(browser);
  await signInToConsole(page, t.url, ADMIN_EMAIL, ADMIN_PASSWORD);
  const links = await page.locator('nav a').evaluateAll((anchors) => anchors.map((a) => ({ href: a.getAttribute('href') ?? '', title: a.textContent ?? '' })));
  expect(links.length).toBeGreaterThan(0);
  mkdirSync(imagesDir, { recursive: true });
  const shots: { title: string; file: string; href: string }[] = [];
  for (const link of links) {
    await page.goto(`${t.url}/console/${link.href}`);
    await page.locator('main h1').first().waitFor();
    // Pages load their data after they show: wait for the requests of the first second to settle.
    await page.waitForTimeout(1_500);
    const file = `${link.href.replace(/^#\//, '').replace(/[^a-z0-9-]+/gi, '-') || 'home'}.png`;
    await page.screenshot({ path: new URL(file, imagesDir).pathname });
    shots.push({ title: link.title, file, href: link.href });
  }
  const index = shots.map((s) => `**${s.title}** (\`${s.href}\`)\n\n![${s.title}](console/${s.file})`).join('\n\n');
  const doc = readFileSync(indexFile, 'utf8');
  const start = doc.indexOf(START);
  const end = doc.indexOf(END);
  const block = `${START}\n\n${index}\n\n${END}`;
  writeFileSync(indexFile, start >= 0 && end > start ? doc.slice(0, start) + block + doc.slice(end + END.length) : `${doc.trimEnd()}\n\n## Screenshots\n\n${block}\n`);
  expect(errors).toEqual([]);
});
