import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, signInToConsole } from '../helpers/browser.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * The Coordination page in a real browser against a real node: a tenant's locks (holder, fence
 * token), waiting rooms (length), presence contexts and liveness entities with their anomalies,
 * all made through the public API first.
 */
const ADMIN_EMAIL = 'coordination-admin@example.com';
const ADMIN_PASSWORD = 'coordination admin password';

let t: TestNode;
let browser: Browser;
let page: Page;
let errors: string[];
let adminToken: string;
let alice: Awaited<ReturnType<TestNode['newUser']>>;

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
  browser = await launchBrowser();
  ({ page, errors } = await newPage(browser));
  await signInToConsole(page, t.url, ADMIN_EMAIL, ADMIN_PASSWORD);
  adminToken = await t.loginAdmin();
  alice = await t.newUser('alice');
});
afterAll(async () => {
  await browser?.close();
  await t?.destroy();
});

const as = (method: string, path: string, body?: unknown) => t.request(method, path, { token: alice.token, body });
const admin = (path: string) => t.request('GET', path, { token: adminToken });

describe('console coordination page', () => {
  it("shows a tenant's lock with its holder and fence token, and a waiting room's length", async () => {
    // Fence token 2: the key's second acquisition.
    const lockPath = '/api/v1/distributed-state/jobs/nightly-report/lock';
    const first = await as('POST', lockPath, { owner_id: 'worker-1', ttl_seconds: 600 });
    await as('DELETE', lockPath, { lock_id: first.body.lock_id, owner_id: 'worker-1' });
    const held = await as('POST', lockPath, { owner_id: 'worker-7', ttl_seconds: 600 });
    expect(held.body.fence_token).toBe(2);

    const room = await as('POST', '/api/v1/waiting-rooms', { room_id: 'launch', capacity: 5, admission_rate: { batch_size: 1, interval_seconds: 3600 }, auto_admit: false });
    expect(room.status).toBe(201);
    for (const member_id of ['m1', 'm2', 'm3']) expect((await as('POST', '/api/v1/waiting-rooms/launch/join', { member_id })).status).toBe(200);

    // The directories learn through the outbox: wait until the admin API lists both.
    await expect.poll(async () => (await admin(`/admin/locks/namespaces?tenant=${alice.user_id}`)).body.namespaces?.length).toBe(1);
    await expect.poll(async () => (await admin(`/admin/waiting-rooms?tenant=${alice.user_id}`)).body.rooms?.length).toBe(1);

    // From the user's page, as an operator would get there.
    await page.goto(`${t.url}/console/#/users/${alice.user_id}`);
    await page.getByRole('link', { name: /Locks, waiting rooms, presence and liveness/ }).click();
    await page.getByRole('heading', { name: 'Coordination' }).waitFor();
    const lockRow = page.getByRole('table', { name: 'Locks in jobs' }).getByRole('row').filter({ hasText: 'nightly-report' });
    await lockRow.getByRole('cell', { name: 'worker-7', exact: true }).waitFor();
    await lockRow.getByRole('cell', { name: '2', exact: true }).waitFor();
    await lockRow.getByText('held').waitFor();
    await page.getByRole('tab', { name: 'jobs (1)' }).waitFor();

    await expect.poll(() => page.getByTestId('waiting-launch').textContent()).toBe('3');
    expect(errors).toEqual([]);
  });

  it('shows presence contexts and liveness entities with their anomalies', async () => {
    expect((await as('POST', '/api/v1/presence/contexts', { id: 'lobby', kind: 'room' })).status).toBe(201);
    expect((await as('POST', '/api/v1/presence/lobby/heartbeat', { subject: { id: 'u1', kind: 'user' } })).status).toBe(200);
    // A steady second of latency, then one heartbeat five seconds late: one anomaly.
    for (let i = 0; i < 25; i++) await as('POST', '/api/v1/liveness', { entity_id: 'sensor-1', client_timestamp_ms: Date.now() - 1000 });
    await as('POST', '/api/v1/liveness', { entity_id: 'sensor-1', client_timestamp_ms: Date.now() - 5000 });
    await expect.poll(async () => (await admin(`/admin/presence/contexts?tenant=${alice.user_id}`)).body.contexts?.length).toBe(1);
    await expect.poll(async () => (await admin(`/admin/liveness?tenant=${alice.user_id}`)).body.entities?.length).toBe(1);

    await page.goto(`${t.url}/console/#/coordination/${alice.user_id}`);
    await page.reload();
    const lobby = page.getByRole('table', { name: 'Presence contexts' }).getByRole('row').filter({ hasText: 'lobby' });
    await lobby.getByRole('cell', { name: 'room', exact: true }).waitFor();
    const sensor = page.getByRole('table', { name: 'Liveness entities' }).getByRole('row').filter({ hasText: 'sensor-1' });
    await sensor.getByText('alive').waitFor();
    await sensor.getByRole('button', { name: /1 \(show\)/ }).click();
    await page.getByRole('table', { name: 'Anomalies of sensor-1' }).getByRole('cell', { name: 'high', exact: true }).waitFor();
    expect(errors).toEqual([]);
  });
});
