import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, signInToConsole } from '../helpers/browser.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * The console's webhooks page in a real browser against a real node delivering to a local
 * receiver: send a test event and see its delivery with the request and response; a user's
 * webhook opened by id, its dead-lettered event redriven, then its DLQ purged.
 */
const ADMIN_EMAIL = 'webhooks-admin@example.com';
const ADMIN_PASSWORD = 'webhooks admin password';

let t: TestNode;
let browser: Browser;
let receiver: Receiver;
let adminToken: string;

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD, webhookTimeoutMs: 2_000 } });
  adminToken = await t.loginAdmin();
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.destroy();
  await receiver?.close();
});

async function confirm(page: Page): Promise<void> {
  await page.getByRole('alertdialog').getByRole('button').last().click();
  await page.getByRole('alertdialog').waitFor({ state: 'detached' });
}

async function createWebhook(token: string, path: string): Promise<string> {
  const res = await t.request('POST', '/api/v1/webhooks', { token, body: { url: `${receiver.url}${path}`, events: ['test.webhook'], headers: { 'X-Console': 'yes' } } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id as string;
}

describe('webhooks page', () => {
  it("sends a test event and shows its delivery's request and response", async () => {
    const path = '/console-hook';
    receiver.respond.set(path, () => ({ status: 200, headers: { 'x-receiver': 'console-test' } }));
    const id = await createWebhook(adminToken, path);

    const { page, errors } = await newPage(browser);
    await signInToConsole(page, t.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('table', { name: 'Webhooks' }).getByRole('link', { name: `${receiver.url}${path}` }).click();
    await page.getByRole('heading', { name: `Webhook ${id}` }).waitFor();
    await page.getByText('0 attempts kept').waitFor();

    await page.getByRole('button', { name: 'Send test event' }).click();
    const log = page.getByRole('table', { name: 'Deliveries' });
    const row = log.getByRole('row').filter({ hasText: 'test.webhook' });
    await row.waitFor({ timeout: 10_000 });
    expect(receiver.received.filter((d) => d.path === path)).toHaveLength(1);
    const eventId = receiver.received.find((d) => d.path === path)!.headers['webhook-id'] as string;
    await row.getByRole('button', { name: eventId }).click();
    const attempt = page.getByRole('group', { name: `Attempt 1 of ${eventId}` });
    await attempt.getByText(`POST ${receiver.url}${path}`).waitFor();
    await attempt.getByText('"X-Console": "yes"').waitFor();
    await attempt.getByText('"type":"test.webhook"').waitFor();
    await attempt.getByText('HTTP 200').waitFor();
    await attempt.getByText('"x-receiver": "console-test"').waitFor();
    expect(errors).toEqual([]);
  });

  it("opens another user's webhook by id, redrives its dead-lettered event and purges its DLQ", async () => {
    const bob = await t.newUser('bob');
    const path = '/console-bob';
    receiver.respond.set(path, 410);
    const id = await createWebhook(bob.token, path);
    // A 4xx dead-letters at once: two events in the DLQ.
    for (let i = 0; i < 2; i++) expect((await t.request('POST', `/api/v1/webhooks/${id}/test`, { token: bob.token })).status).toBe(200);
    await expect
      .poll(async () => (await t.request('GET', `/api/v1/webhooks/${id}/dlq`, { token: bob.token })).body.total, { timeout: 10_000 })
      .toBe(2);

    const { page, errors } = await newPage(browser);
    await signInToConsole(page, t.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByLabel('Webhook id').fill(id);
    await page.getByRole('button', { name: 'Open' }).click();
    await page.getByRole('heading', { name: `Webhook ${id}` }).waitFor();
    const dlq = page.getByRole('table', { name: 'Dead-lettered events' });
    await dlq.getByRole('row').filter({ hasText: 'HTTP 410' }).first().waitFor();
    await page.getByText('2 dead-lettered events').waitFor();

    // Redrive one: the receiver now answers 200, and the redriven event's delivery is logged.
    receiver.respond.set(path, 200);
    await dlq.getByRole('button', { name: 'Redrive' }).first().click();
    await confirm(page);
    await page.getByRole('table', { name: 'Deliveries' }).getByRole('row').filter({ hasText: 'redrive_' }).filter({ hasText: '200' }).waitFor({ timeout: 10_000 });
    await page.getByText('1 dead-lettered event.').waitFor();

    // Purge asks first; Cancel keeps the entry.
    await page.getByRole('button', { name: 'Purge' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Cancel' }).click();
    expect((await t.request('GET', `/api/v1/webhooks/${id}/dlq`, { token: bob.token })).body.total).toBe(1);
    await page.getByRole('button', { name: 'Purge' }).click();
    await confirm(page);
    await page.getByText('1 purged').waitFor();
    await page.getByText('0 dead-lettered events').waitFor();
    expect((await t.request('GET', `/api/v1/webhooks/${id}/dlq`, { token: bob.token })).body.total).toBe(0);
    expect(errors).toEqual([]);
  });
});
