import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, signInToConsole } from '../helpers/browser.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * The console's job queue and message queue pages in a real browser against a real node: a user's
 * job dead-letters against a local receiver answering 500, the administrator redrives it from the
 * page once the receiver answers 200 and sees it complete; pause and resume; an mq DLQ redriven
 * to its source, then purged.
 */
const ADMIN_EMAIL = 'queues-admin@example.com';
const ADMIN_PASSWORD = 'queues admin password';

let t: TestNode;
let browser: Browser;
let receiver: Receiver;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let adminToken: string;

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD, jobTimeoutMs: 2_000 } });
  alice = await t.newUser('alice');
  adminToken = await t.loginAdmin();
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.destroy();
  await receiver?.close();
});

const queueId = (name: string) => `jq_${Buffer.from(name).toString('base64url')}`;

async function confirm(page: Page): Promise<void> {
  await page.getByRole('alertdialog').getByRole('button').last().click();
  await page.getByRole('alertdialog').waitFor({ state: 'detached' });
}

async function aliceJob(jobId: string) {
  const res = await t.request('GET', `/api/v1/jobs/${jobId}`, { token: alice.token });
  expect(res.status, res.text).toBe(200);
  return res.body as { status: string; attempts: number };
}

describe('job queues page', () => {
  it('redrives a dead-lettered job and sees it complete; pauses and resumes the queue', async () => {
    const queue = 'console-emails';
    const path = `/${queue}`;
    receiver.respond.set(path, 500);
    const created = await t.request('POST', '/api/v1/job-queues', { token: alice.token, body: { name: queue, retry_policy: { max_attempts: 2, backoff_seconds: 0 } } });
    expect(created.status, created.text).toBe(201);
    const scheduled = await t.request('POST', '/api/v1/jobs/schedule', { token: alice.token, body: { queue, webhook: { url: `${receiver.url}${path}` }, payload: { to: 'a@example.com' } } });
    expect(scheduled.status, scheduled.text).toBe(201);
    const jobId = scheduled.body.job_id as string;
    await expect.poll(async () => (await aliceJob(jobId)).status, { timeout: 10_000 }).toBe('failed');

    const { page, errors } = await newPage(browser);
    await signInToConsole(page, t.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    await page.getByRole('link', { name: 'Job queues' }).click();
    const row = page.getByRole('table', { name: 'Job queues' }).getByRole('row').filter({ hasText: queue });
    await row.filter({ hasText: alice.user_id }).waitFor();
    await row.getByRole('link', { name: queue }).click();
    await page.getByRole('heading', { name: `Job queue ${queue}` }).waitFor();

    // The dead-lettered job, with its attempts and the receiver's answer.
    const dlq = page.getByRole('table', { name: 'Dead-lettered jobs' });
    const entry = dlq.getByRole('row').filter({ hasText: jobId });
    await entry.getByText('HTTP 500').waitFor();
    await entry.getByRole('button', { name: jobId }).click();
    await page.getByRole('region', { name: `Job ${jobId}` }).getByText('2 of 2').waitFor();

    // Cancel leaves it dead-lettered; Confirm redrives it, and the receiver now answers 200.
    receiver.respond.set(path, 200);
    await entry.getByRole('button', { name: 'Redrive' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Cancel' }).click();
    expect((await aliceJob(jobId)).status).toBe('failed');
    await entry.getByRole('button', { name: 'Redrive' }).click();
    await confirm(page);
    await page.getByTestId('job-state').getByText('completed').waitFor({ timeout: 10_000 });
    await dlq.getByRole('row').filter({ hasText: jobId }).waitFor({ state: 'detached' });
    expect(await aliceJob(jobId)).toMatchObject({ status: 'completed', attempts: 1 });
    expect(receiver.received.filter((d) => d.path === path).length).toBe(3);

    // Pause (confirmed) and resume, seen by the queue's owner.
    await page.getByRole('button', { name: 'Pause' }).click();
    await confirm(page);
    await page.getByRole('button', { name: 'Resume' }).waitFor();
    expect((await t.request('GET', `/api/v1/job-queues/${queueId(queue)}`, { token: alice.token })).body.active).toBe(false);
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByRole('button', { name: 'Pause' }).waitFor();
    expect((await t.request('GET', `/api/v1/job-queues/${queueId(queue)}`, { token: alice.token })).body.active).toBe(true);
    expect(errors).toEqual([]);
  });
});

describe('message queues page', () => {
  const mq = (method: string, path: string, body?: unknown) => t.request(method, `/api/v1/mq${path}`, { token: adminToken, body });
  const visible = async (queue: string) => (await mq('GET', `/queues/${queue}`)).body.statistics.approximate_message_count as number;
  /** Receives everything twice with visibility 0: the second receive moves each message to the DLQ. */
  async function deadLetterAll(dlqCount: number) {
    for (let i = 0; i < 2; i++) await mq('POST', '/queues/console-orders/receive', { max_messages: 10, visibility_timeout_seconds: 0 });
    await expect.poll(() => visible('console-orders-dlq'), { timeout: 10_000 }).toBe(dlqCount);
  }

  it('shows counts (visible, in flight, delayed), redrives a DLQ to its source and purges it', async () => {
    expect((await mq('POST', '/queues', { name: 'console-orders-dlq' })).status).toBe(201);
    expect((await mq('POST', '/queues', { name: 'console-orders', max_receive_count: 1, dead_letter_queue: 'console-orders-dlq' })).status).toBe(201);
    for (const body of ['one', 'two', 'three']) expect((await mq('POST', '/queues/console-orders/messages', { body })).status).toBe(201);
    await deadLetterAll(3);
    expect((await mq('POST', '/queues/console-orders/messages', { body: 'later', delay_seconds: 600 })).status).toBe(201);

    const { page, errors } = await newPage(browser);
    await signInToConsole(page, t.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    await page.getByRole('link', { name: 'Message queues' }).click();
    const table = page.getByRole('table', { name: 'Message queues' });
    const dlqRow = table.getByRole('row').filter({ hasText: 'dead-letter queue of console-orders' });
    const sourceRow = table.getByRole('row').filter({ hasText: /^console-ordersstandard/ });
    // Queue, type, visible, in flight, delayed.
    await dlqRow.getByRole('cell').nth(2).getByText('3', { exact: true }).waitFor();
    await sourceRow.getByRole('cell').nth(4).getByText('1', { exact: true }).waitFor();

    await dlqRow.getByRole('button', { name: 'Redrive' }).click();
    await confirm(page);
    await dlqRow.getByText('3 moved, 0 left').waitFor();
    await sourceRow.getByRole('cell').nth(2).getByText('3', { exact: true }).waitFor();
    expect(await visible('console-orders')).toBe(3);

    // Dead-lettered again; purge asks first.
    await deadLetterAll(3);
    await dlqRow.getByRole('cell').nth(2).getByText('3', { exact: true }).waitFor();
    await dlqRow.getByRole('button', { name: 'Purge' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Cancel' }).click();
    expect(await visible('console-orders-dlq')).toBe(3);
    await dlqRow.getByRole('button', { name: 'Purge' }).click();
    await confirm(page);
    await dlqRow.getByText('3 purged').waitFor();
    expect(await visible('console-orders-dlq')).toBe(0);
    expect(errors).toEqual([]);
  });
});
