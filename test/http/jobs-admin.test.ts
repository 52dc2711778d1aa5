import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * The platform admin's routes on any tenant's job queues (/admin/jobs/queues...: the operator
 * console's job queues page), over the real socket, delivering to a local receiver.
 */
let t: TestNode;
let receiver: Receiver;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let adminToken: string;
const ADMIN = { email: 'jobs-admin-root@example.com', password: 'admin password 1' };

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestNode({ config: { jobTimeoutMs: 2_000, adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  alice = await t.newUser('alice');
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } });
  adminToken = login.body.access_token;
});
afterAll(async () => {
  await t?.destroy();
  await receiver?.close();
});

const queueId = (name: string) => `jq_${Buffer.from(name).toString('base64url')}`;

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code });
}

async function until<T>(check: () => Promise<T | undefined | false>, what: string): Promise<T> {
  for (let i = 0; i < 500; i++) {
    const value = await check();
    if (value) return value;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('admin job queues', () => {
  it("lists every tenant's queues, pauses and resumes one, reads its jobs and DLQ and redrives it", async () => {
    const queue = 'admin-dlq';
    const path = `/${queue}`;
    receiver.respond.set(path, 500);
    const created = await t.request('POST', '/api/v1/job-queues', { token: alice.token, body: { name: queue, retry_policy: { max_attempts: 1, backoff_seconds: 0 } } });
    expect(created.status, created.text).toBe(201);
    const scheduled = await t.request('POST', '/api/v1/jobs/schedule', { token: alice.token, body: { queue, webhook: { url: `${receiver.url}${path}` }, payload: { n: 1 } } });
    expect(scheduled.status, scheduled.text).toBe(201);
    const jobId = scheduled.body.job_id as string;
    const base = `/admin/jobs/queues/${alice.user_id}/${queueId(queue)}`;

    // The registry learns of the queue through the outbox: a moment after the create.
    const listed = await until(async () => {
      const res = await t.request('GET', '/admin/jobs/queues?limit=100', { token: adminToken });
      expect(res.status, res.text).toBe(200);
      return res.body.queues.find((q: { name: string; tenant: string }) => q.name === queue && q.tenant === alice.user_id);
    }, 'the queue in the admin list');
    expect(listed).toMatchObject({ id: queueId(queue), owner_id: alice.user_id, active: true });
    const one = await t.request('GET', base, { token: adminToken });
    expect(one.status, one.text).toBe(200);
    expect(one.body).toEqual(listed);

    const dlq = await until(async () => {
      const res = await t.request('GET', `${base}/dlq`, { token: adminToken });
      expect(res.status, res.text).toBe(200);
      return res.body.total === 1 && res.body;
    }, 'the dead-lettered job');
    expect(dlq.entries[0]).toMatchObject({ job_id: jobId, error: expect.stringMatching(/HTTP 500/), job: { id: jobId, status: 'failed', attempts: 1 } });

    const failed = await t.request('GET', `${base}/jobs?status=failed`, { token: adminToken });
    expect(failed.status, failed.text).toBe(200);
    expect(failed.body).toMatchObject({ total: 1, limit: 20, offset: 0, jobs: [{ id: jobId, status: 'failed' }] });
    expect((await t.request('GET', `${base}/jobs?status=completed`, { token: adminToken })).body.total).toBe(0);

    const paused = await t.request('POST', `${base}/pause`, { token: adminToken });
    expect(paused.status, paused.text).toBe(200);
    expect(paused.body).toMatchObject({ tenant: alice.user_id, name: queue, active: false });
    expect((await t.request('GET', `/api/v1/job-queues/${queueId(queue)}`, { token: alice.token })).body.active).toBe(false);
    const resumed = await t.request('POST', `${base}/resume`, { token: adminToken });
    expect(resumed.body).toMatchObject({ active: true });

    receiver.respond.set(path, 200);
    const redrive = await t.request('POST', `${base}/dlq/redrive`, { token: adminToken, body: { job_ids: [jobId] } });
    expect(redrive.status, redrive.text).toBe(200);
    expect(redrive.body).toEqual({ redriven_count: 1, skipped_job_ids: [] });
    await until(async () => (await t.request('GET', `/api/v1/jobs/${jobId}`, { token: alice.token })).body.status === 'completed', 'the redriven job completed');
    expect((await t.request('GET', `${base}/dlq`, { token: adminToken })).body.total).toBe(0);
  });

  it('refuses a non-admin (403) and answers 404 for an unknown tenant, queue id or queue', async () => {
    expectError(await t.request('GET', '/admin/jobs/queues', { token: alice.token }), 403, 'forbidden');
    expectError(await t.request('GET', `/admin/jobs/queues/${alice.user_id}/${queueId('admin-dlq')}`, { token: alice.token }), 403, 'forbidden');
    expectError(await t.request('POST', `/admin/jobs/queues/${alice.user_id}/${queueId('admin-dlq')}/pause`, { token: alice.token }), 403, 'forbidden');
    expectError(await t.request('POST', `/admin/jobs/queues/${alice.user_id}/${queueId('admin-dlq')}/dlq/redrive`, { token: alice.token }), 403, 'forbidden');
    expectError(await t.request('GET', '/admin/jobs/queues', {}), 401, 'unauthorized');
    expectError(await t.request('GET', `/admin/jobs/queues/usr_nobody/${queueId('admin-dlq')}/dlq`, { token: adminToken }), 404, 'not_found');
    expectError(await t.request('POST', `/admin/jobs/queues/${alice.user_id}/nonsense/pause`, { token: adminToken }), 404, 'not_found');
    expectError(await t.request('GET', `/admin/jobs/queues/${alice.user_id}/${queueId('never-made')}/jobs`, { token: adminToken }), 404, 'not_found');
    expectError(await t.request('GET', `/admin/jobs/queues/${alice.user_id}/${queueId('never-made')}`, { token: adminToken }), 404, 'not_found');
    expectError(await t.request('GET', '/admin/jobs/queues?limit=-1', { token: adminToken }), 400, 'BAD_REQUEST');
  });
});
