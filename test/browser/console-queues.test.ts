import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, signInToConsole } from '../helpers/browser.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * The console's job queue and message queue pages in a real browser against a real node: a user's
 * job dead-letters against a local receiver answering 500, the administrator redrives it from the
 * page once the receiver answers 200 and sees it complete; pause and resume; an mq DLQ purged.
 */
const ADMIN_EMAIL = 'queues-admin@example.com';
const ADMIN_PASSWORD = 'queues admin password';

let t: TestNode;
let browser: Browser;
let receiver: Receiver;
let alice: Awaited<ReturnType<TestNode['newUser']>>;

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD, jobTimeoutMs: 2_000 } });
  alice = await t.newUser('alice');
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
