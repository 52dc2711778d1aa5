import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';
import { settle, untilWithClock } from '../helpers/runtime.js';
import { startReceiver, type ReceivedDelivery, type Receiver } from '../helpers/webhook-receiver.js';

/** The job queue over the real socket, delivering to a local receiver (spec doc 1 §4.5; docs/api/jobs.md). */
let t: TestNode;
let receiver: Receiver;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;
let adminToken: string;
const ADMIN = { email: 'jobs-root@example.com', password: 'admin password 1' };

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestNode({ clock: 'manual', config: { jobTimeoutMs: 400, accessTokenTtlSeconds: 86_400, adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } });
  adminToken = login.body.access_token;
});
afterAll(async () => {
  await t?.destroy();
  await receiver?.close();
});

const clock = () => t.clock as ManualClock;
const nowS = () => Math.floor(clock().now() / 1000);
let counter = 0;
const unique = (name: string) => `${name}-${++counter}`;
const at = (path: string) => receiver.received.filter((d) => d.path === path);

const until = <T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, rounds?: number) =>
  untilWithClock(clock, check, what, rounds);
async function schedule(body: Record<string, unknown>, token = alice.token) {
  const res = await t.request('POST', '/api/v1/jobs/schedule', { token, body });
  expect(res.status, res.text).toBe(201);
  return res.body as { job_id: string; queue: string; scheduled_at: number; status: string };
}
async function job(id: string, token = alice.token) {
  const res = await t.request('GET', `/api/v1/jobs/${id}`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body;
}
async function jobWhere(id: string, status: string) {
  return until(async () => {
    const body = await job(id);
    return body.status === status && body;
  }, `job ${id} ${status}`);
}
const queueId = (name: string) => `jq_${Buffer.from(name).toString('base64url')}`;
/** Signature check without the library's 5-minute timestamp window (deliveries after the manual clock moved). */
function signedWith(secret: string, delivery: ReceivedDelivery): boolean {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key).update(`${delivery.headers['webhook-id']}.${delivery.headers['webhook-timestamp']}.${delivery.body}`).digest('base64');
  return String(delivery.headers['webhook-signature']).split(' ').includes(`v1,${expected}`);
}

describe('health', () => {
  it('reports the scheduler and the processor running, and no redis', async () => {
    const res = await until(async () => {
      const r = await t.request('GET', '/health/job_queue');
      return r.status === 200 && r;
    }, 'a healthy job queue');
    expect(res.body).toMatchObject({ status: 'healthy', scheduler_running: true, processor_running: true, redis: 'not_used' });
    // The probe's alarm keeps firing as time passes.
    clock().advance(60_000);
    const later = await until(async () => {
      const r = await t.request('GET', '/health/job_queue');
      return r.status === 200 && r;
    }, 'healthy after a minute');
    expect(later.body.scheduler_running).toBe(true);
  });
});

describe('schedule and delivery', () => {
  it('delivers a due job signed with its secret, body {job_id, queue, attempt, payload}, and completes it; the queue is auto-created', async () => {
    const queue = unique('emails');
    const path = `/${queue}`;
    const ack = await schedule({ queue, webhook: { url: `${receiver.url}${path}`, headers: { 'X-Team': 'core' } }, payload: { to: 'a@example.com', n: 1 } });
    expect(ack).toMatchObject({ queue, status: 'scheduled', scheduled_at: nowS() });
    expect(ack.job_id).toMatch(/^job_/);
    const [delivery] = await until(() => at(path).length === 1 && at(path), 'the delivery');
    expect(delivery.json).toEqual({ job_id: ack.job_id, queue, attempt: 1, payload: { to: 'a@example.com', n: 1 } });
    expect(delivery.headers['x-team']).toBe('core');
    expect(delivery.headers['webhook-id']).toBe(ack.job_id);
    expect(delivery.headers['service-signature']).toBe(delivery.headers['webhook-signature']);
    const done = await jobWhere(ack.job_id, 'completed');
    // Verified with the Standard Webhooks library, with the job's secret.
    expect(new Webhook(done.webhook_config.secret).verify(delivery.body, delivery.headers as Record<string, string>)).toEqual(delivery.json);
    expect(done).toMatchObject({ attempts: 1, error: null, queue, user_id: alice.user_id, priority: 'normal', webhook_config: { url: `${receiver.url}${path}`, active: false, events: ['job.due'] } });
    expect(done.completed_at).toBe(nowS());
    expect(done.webhook_config.secret).toMatch(/^whsec_/);

    const list = await t.request('GET', `/api/v1/job-queues?search=${queue}`, { token: alice.token });
    expect(list.status, list.text).toBe(200);
    expect(list.body.queues).toHaveLength(1);
    expect(list.body.queues[0]).toMatchObject({ name: queue, id: queueId(queue), auto_created: true, active: true, owner_id: alice.user_id, completed_count: 1, pending_count: 0 });
    expect((await t.request('GET', '/api/v1/queues', { token: alice.token })).body).toContain(queue);
  });

  it('keeps a future job scheduled until its time, then delivers it', async () => {
    const queue = unique('later');
    const ack = await schedule({ queue, webhook: { url: `${receiver.url}/${queue}` }, scheduled_at: nowS() + 120 });
    await settle(5);
    expect(at(`/${queue}`)).toHaveLength(0);
    expect((await job(ack.job_id)).status).toBe('scheduled');
    clock().advance(121_000);
    await until(() => at(`/${queue}`).length === 1, 'the due delivery');
    await jobWhere(ack.job_id, 'completed');
  });

  it('uses a given secret; refuses bad input with 400 before anything is stored', async () => {
    const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    const queue = unique('secret');
    await schedule({ queue, webhook: { url: `${receiver.url}/${queue}`, secret } });
    const [delivery] = await until(() => at(`/${queue}`).length === 1 && at(`/${queue}`), 'the delivery');
    expect(signedWith(secret, delivery)).toBe(true);

    const bad = (body: unknown) => t.request('POST', '/api/v1/jobs/schedule', { token: alice.token, body });
    expectError(await bad({ webhook: { url: 'not a url' } }), 400, 'BAD_REQUEST');
    expectError(await bad({ webhook: { url: 'ftp://x.example/' } }), 400, 'BAD_REQUEST');
    expectError(await bad({ webhook: { url: `${receiver.url}/x`, secret: 'whsec_short' } }), 400, 'BAD_REQUEST');
    expectError(await bad({ webhook: { url: `${receiver.url}/x`, events: ['job.done'] } }), 400, 'BAD_REQUEST');
    expectError(await bad({ webhook: { url: `${receiver.url}/x`, headers: { 'webhook-id': 'x' } } }), 400, 'BAD_REQUEST');
    expectError(await bad({ webhook: { url: `${receiver.url}/x` }, queue: 'bad name!' }), 400, 'BAD_REQUEST');
    expectError(await bad({ webhook: { url: `${receiver.url}/x` }, scheduled_at: nowS() + 400 * 86_400 }), 400, 'BAD_REQUEST');
    expectError(await bad({ webhook: { url: `${receiver.url}/x` }, priority: 'urgent' }), 400, 'BAD_REQUEST');
    expectError(await bad({ webhook: { url: `${receiver.url}/x` }, retry_policy: { max_attempts: 0, backoff_seconds: 1 } }), 400, 'BAD_REQUEST');
    expectError(await bad({ webhook: { url: `${receiver.url}/x` }, payload: 'x'.repeat(70_000) }), 400, 'BAD_REQUEST');
    expectError(await bad({ payload: 1 }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/jobs/schedule', { body: { webhook: { url: `${receiver.url}/x` } } }), 401, 'unauthorized');
  });

  it('retries a failing target under the job\'s policy, then completes on a 2xx', async () => {
    const queue = unique('retry');
    const path = `/${queue}`;
    let calls = 0;
    receiver.respond.set(path, () => ({ status: ++calls < 3 ? 503 : 200 }));
    const ack = await schedule({ queue, webhook: { url: `${receiver.url}${path}` }, retry_policy: { max_attempts: 5, backoff_seconds: 2 } });
    await until(() => at(path).length === 1, 'attempt 1');
    const parked = await until(async () => {
      const body = await job(ack.job_id);
      return body.status === 'scheduled' && body.attempts === 1 && body;
    }, 'parked for its retry');
    expect(parked.error).toMatch(/HTTP 503/);
    // Backoff 2 s * 2^0 with jitter in [0.5, 1): the retry is due 1-2 s later.
    expect(parked.scheduled_at - nowS()).toBeGreaterThanOrEqual(1);
    expect(parked.scheduled_at - nowS()).toBeLessThanOrEqual(2);
    clock().advance(2_000);
    await until(() => at(path).length === 2, 'attempt 2');
    // The receiver sees attempt 2 before the job records its failure: advancing the clock
    // before the retry is parked would leave the retry due after the advanced time.
    await until(async () => {
      const body = await job(ack.job_id);
      return body.status === 'scheduled' && body.attempts === 2;
    }, 'parked for its second retry');
    clock().advance(4_000);
    await until(() => at(path).length === 3, 'attempt 3');
    const done = await jobWhere(ack.job_id, 'completed');
    expect(done.attempts).toBe(3);
    expect(at(path).map((d) => d.json.attempt)).toEqual([1, 2, 3]);
    expect(new Set(at(path).map((d) => d.headers['webhook-id']))).toEqual(new Set([ack.job_id]));
  });

  it('fails a job whose attempts are spent, dead-letters it, and redrives it with skipped_job_ids', async () => {
    const queue = unique('dlq');
    const path = `/${queue}`;
    receiver.respond.set(path, 500);
    const created = await t.request('POST', '/api/v1/job-queues', { token: alice.token, body: { name: queue, retry_policy: { max_attempts: 2, backoff_seconds: 1 } } });
    expect(created.status, created.text).toBe(201);
    const ack = await schedule({ queue, webhook: { url: `${receiver.url}${path}` }, payload: { k: 1 } });
    await until(() => at(path).length === 1, 'attempt 1');
    await until(async () => (await job(ack.job_id)).attempts === 1 && (await job(ack.job_id)).status === 'scheduled', 'parked');
    clock().advance(1_000);
    const failed = await jobWhere(ack.job_id, 'failed');
    expect(failed).toMatchObject({ attempts: 2, error: expect.stringMatching(/HTTP 500/) });

    const dlq = await t.request('GET', `/api/v1/job-queues/${queueId(queue)}/dlq`, { token: alice.token });
    expect(dlq.status, dlq.text).toBe(200);
    expect(dlq.body).toMatchObject({ queue, total: 1 });
    expect(dlq.body.entries[0]).toMatchObject({ job_id: ack.job_id, entry_id: `dlq_${ack.job_id}`, error: expect.stringMatching(/HTTP 500/), job: { id: ack.job_id, status: 'failed' } });
    expect(typeof dlq.body.entries[0].dead_lettered_at).toBe('number');
    expectError(await t.request('GET', `/api/v1/job-queues/${queueId(queue)}/dlq?limit=501`, { token: alice.token }), 400, 'BAD_REQUEST');
    const stats = await t.request('GET', `/api/v1/queues/${queue}/stats`, { token: alice.token });
    expect(stats.body).toMatchObject({ queue, failed_last_hour: 1, completed_last_hour: 0, success_rate: 0 });

    receiver.respond.set(path, 200);
    const redrive = await t.request('POST', `/api/v1/job-queues/${queueId(queue)}/dlq/redrive`, { token: alice.token, body: { job_ids: [ack.job_id, 'job_nope.x'] } });
    expect(redrive.status, redrive.text).toBe(200);
    expect(redrive.body).toEqual({ redriven_count: 1, skipped_job_ids: ['job_nope.x'] });
    await until(() => at(path).length === 3, 'the redriven delivery');
    const done = await jobWhere(ack.job_id, 'completed');
    expect(done.attempts).toBe(1);
    expect(at(path)[2].json).toEqual({ job_id: ack.job_id, queue, attempt: 1, payload: { k: 1 } });
    expect((await t.request('GET', `/api/v1/job-queues/${queueId(queue)}/dlq`, { token: alice.token })).body.total).toBe(0);
    // Redriving again finds nothing: skipped.
    const again = await t.request('POST', `/api/v1/job-queues/${queueId(queue)}/dlq/redrive`, { token: alice.token, body: { job_ids: [ack.job_id] } });
    expect(again.body).toEqual({ redriven_count: 0, skipped_job_ids: [ack.job_id] });
    const all = await t.request('POST', `/api/v1/job-queues/${queueId(queue)}/dlq/redrive`, { token: alice.token });
    expect(all.body).toEqual({ redriven_count: 0, skipped_job_ids: [] });
  });

  it('a paused queue delivers nothing until resumed', async () => {
    const queue = unique('paused');
    const path = `/${queue}`;
    const created = await t.request('POST', '/api/v1/job-queues', { token: alice.token, body: { name: queue } });
    expect(created.status).toBe(201);
    const paused = await t.request('POST', `/api/v1/job-queues/${queueId(queue)}/pause`, { token: alice.token });
    expect(paused.status, paused.text).toBe(200);
    expect(paused.body).toMatchObject({ name: queue, active: false });
    const ack = await schedule({ queue, webhook: { url: `${receiver.url}${path}` } });
    clock().advance(10_000);
    await settle(10);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(at(path)).toHaveLength(0);
    expect((await job(ack.job_id)).status).toBe('scheduled');
    const resumed = await t.request('POST', `/api/v1/job-queues/${queueId(queue)}/resume`, { token: alice.token });
    expect(resumed.body).toMatchObject({ active: true });
    await until(() => at(path).length === 1, 'the delivery after resume');
    await jobWhere(ack.job_id, 'completed');
    const stats = await t.request('GET', `/api/v1/queues/${queue}/stats`, { token: alice.token });
    expect(stats.body).toMatchObject({ queue, completed_last_hour: 1, success_rate: 1, scheduled: 0, processing: 0, oldest_job_age_seconds: 0 });
  });

  it('delivers due jobs by priority (critical first) when a paused queue resumes', async () => {
    const queue = unique('prio');
    const path = `/${queue}`;
    await t.request('POST', '/api/v1/job-queues', { token: alice.token, body: { name: queue, concurrency: 1 } });
    await t.request('POST', `/api/v1/job-queues/${queueId(queue)}/pause`, { token: alice.token });
    await schedule({ queue, webhook: { url: `${receiver.url}${path}` }, payload: 'low', priority: 'low' });
    await schedule({ queue, webhook: { url: `${receiver.url}${path}` }, payload: 'normal' });
    await schedule({ queue, webhook: { url: `${receiver.url}${path}` }, payload: 'critical', priority: 'critical' });
    const stats = await t.request('GET', `/api/v1/queues/${queue}/stats`, { token: alice.token });
    expect(stats.body).toMatchObject({ scheduled: 3, processing: 0 });
    clock().advance(5_000);
    const waiting = await t.request('GET', `/api/v1/queues/${queue}/stats`, { token: alice.token });
    expect(waiting.body.oldest_job_age_seconds).toBe(5);
    await t.request('POST', `/api/v1/job-queues/${queueId(queue)}/resume`, { token: alice.token });
    await until(() => at(path).length === 3, 'three deliveries');
    expect(at(path).map((d) => d.json.payload)).toEqual(['critical', 'normal', 'low']);
  });

  it('refuses a target the delivery guard blocks: failed at once, no retry', async () => {
    const guarded = await startTestNode({ config: { webhookAllowPrivateTargets: false } });
    try {
      const user = await guarded.newUser('guard');
      // The schedule check already refuses a literal private address ...
      const res = await guarded.request('POST', '/api/v1/jobs/schedule', { token: user.token, body: { webhook: { url: 'http://127.0.0.1:9/x' } } });
      expectError(res, 400, 'BAD_REQUEST');
      // ... and the worker refuses a name that resolves to one.
      const ack = await guarded.request('POST', '/api/v1/jobs/schedule', { token: user.token, body: { webhook: { url: 'http://localhost:9/x' }, retry_policy: { max_attempts: 5, backoff_seconds: 1 } } });
      expect(ack.status, ack.text).toBe(201);
      const failed = await (async () => {
        for (let i = 0; i < 500; i++) {
          const body = (await guarded.request('GET', `/api/v1/jobs/${ack.body.job_id}`, { token: user.token })).body;
          if (body.status === 'failed') return body;
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        throw new Error('not failed');
      })();
      expect(failed).toMatchObject({ attempts: 1, error: expect.stringMatching(/target_refused/) });
    } finally {
      await guarded.destroy();
    }
  });
});

describe('queues', () => {
  it('creates, reads, patches, lists with filters and deletes queues', async () => {
    const name = unique('crud');
    const created = await t.request('POST', '/api/v1/job-queues', { token: bob.token, body: { name, description: 'reports', tags: { team: 'core' }, retention_days: 3, dlq_config: { enabled: true, max_entries: 10 }, default_priority: 'high' } });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toEqual({ id: queueId(name), name, created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    expectError(await t.request('POST', '/api/v1/job-queues', { token: bob.token, body: { name } }), 409, 'job_queue_exists');
    expectError(await t.request('POST', '/api/v1/job-queues', { token: bob.token, body: { name: '-bad' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/job-queues', { token: bob.token, body: { name: 'x', retention_days: 0 } }), 400, 'BAD_REQUEST');

    const read = await t.request('GET', `/api/v1/job-queues/${queueId(name)}`, { token: bob.token });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({
      id: queueId(name),
      name,
      owner_id: bob.user_id,
      description: 'reports',
      tags: { team: 'core' },
      active: true,
      auto_created: false,
      retention_days: 3,
      retry_policy: { max_attempts: 3, backoff_seconds: 10 },
      dlq_config: { enabled: true, max_entries: 10 },
      default_priority: 'high',
      pending_count: 0,
      processing_count: 0,
      completed_count: 0,
      failed_count: 0,
    });
    // Another tenant: 404, never visible.
    expectError(await t.request('GET', `/api/v1/job-queues/${queueId(name)}`, { token: alice.token }), 404, 'not_found');
    expectError(await t.request('GET', '/api/v1/job-queues/nope', { token: bob.token }), 404, 'not_found');
    expectError(await t.request('GET', `/api/v1/queues/${name}/stats`, { token: alice.token }), 404, 'not_found');

    const patched = await t.request('PATCH', `/api/v1/job-queues/${queueId(name)}`, { token: bob.token, body: { retry_policy: { max_attempts: 7, backoff_seconds: 1 }, tags: { team: 'ops', tier: 'gold' } } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ retry_policy: { max_attempts: 7, backoff_seconds: 1 }, tags: { team: 'ops', tier: 'gold' }, description: 'reports' });

    const other = unique('crud-auto');
    await schedule({ queue: other, webhook: { url: `${receiver.url}/${other}` }, scheduled_at: nowS() + 3600 }, bob.token);
    const byTag = await t.request('GET', '/api/v1/job-queues?tag=tier', { token: bob.token });
    expect(byTag.body.queues.map((q: { name: string }) => q.name)).toEqual([name]);
    const auto = await t.request('GET', '/api/v1/job-queues?auto_created=true', { token: bob.token });
    expect(auto.body.queues.map((q: { name: string }) => q.name)).toEqual([other]);
    const sorted = await t.request('GET', '/api/v1/job-queues?sort=name&limit=1', { token: bob.token });
    expect(sorted.body.pagination).toEqual({ page: 1, page_size: 1, total: 2, has_more: true });
    expect(sorted.body.queues[0].name).toBe([name, other].sort()[0]);
    expect((await t.request('GET', '/api/v1/job-queues?sort=bogus', { token: bob.token })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/queues', { token: bob.token })).body).toEqual([name, other].sort());

    // Not empty: 409 unless forced.
    expectError(await t.request('DELETE', `/api/v1/job-queues/${queueId(other)}`, { token: bob.token }), 409, 'job_queue_not_empty');
    expect((await t.request('DELETE', `/api/v1/job-queues/${queueId(other)}?force=true`, { token: bob.token })).status).toBe(204);
    expect((await t.request('DELETE', `/api/v1/job-queues/${queueId(name)}`, { token: bob.token })).status).toBe(204);
    expectError(await t.request('GET', `/api/v1/job-queues/${queueId(name)}`, { token: bob.token }), 404, 'not_found');
    expect((await t.request('GET', '/api/v1/queues', { token: bob.token })).body).toEqual([]);
  });

  it('refuses tag keys that are empty or longer than 128 characters, on create and PATCH, naming body.tags', async () => {
    const name = unique('tags');
    for (const tags of [{ ['k'.repeat(129)]: 'v' }, { '': 'v' }, { team: 'core', ['k'.repeat(20_000)]: 'v' }]) {
      const res = await t.request('POST', '/api/v1/job-queues', { token: bob.token, body: { name, tags } });
      expectError(res, 400, 'BAD_REQUEST');
      expect(res.body.details).toEqual([{ field: 'body.tags', message: expect.stringMatching(/must be 1-128 characters$/) }]);
    }
    // As docs/api/jobs.md shows it.
    const long = await t.request('POST', '/api/v1/job-queues', { token: bob.token, body: { name, tags: { ['k'.repeat(129)]: 'v' } } });
    expect(long.body.message).toBe(`body.tags key "${'k'.repeat(32)}"... (129 characters) must be 1-128 characters`);
    expectError(await t.request('GET', `/api/v1/job-queues/${queueId(name)}`, { token: bob.token }), 404, 'not_found');
    const longest = { ['k'.repeat(128)]: 'v'.repeat(128) };
    expect((await t.request('POST', '/api/v1/job-queues', { token: bob.token, body: { name, tags: longest } })).status).toBe(201);
    for (const tags of [{ ['k'.repeat(20_000)]: 'v' }, { '': 'v' }]) {
      const res = await t.request('PATCH', `/api/v1/job-queues/${queueId(name)}`, { token: bob.token, body: { tags } });
      expectError(res, 400, 'BAD_REQUEST');
      expect(res.body.details[0].field).toBe('body.tags');
    }
    expect((await t.request('GET', `/api/v1/job-queues/${queueId(name)}`, { token: bob.token })).body.tags).toEqual(longest);
    expect((await t.request('DELETE', `/api/v1/job-queues/${queueId(name)}`, { token: bob.token })).status).toBe(204);
  });

  it('list numbers: page takes any safe integer (an empty page past the end); limit above 100 is capped', async () => {
    const name = unique('paging');
    expect((await t.request('POST', '/api/v1/job-queues', { token: bob.token, body: { name } })).status).toBe(201);
    for (const page of [1_000_001, Number.MAX_SAFE_INTEGER]) {
      const res = await t.request('GET', `/api/v1/job-queues?page=${page}`, { token: bob.token });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({ pagination: { page, page_size: 20, total: 1, has_more: false }, queues: [] });
    }
    const capped = await t.request('GET', '/api/v1/job-queues?limit=1000001', { token: bob.token });
    expect(capped.status, capped.text).toBe(200);
    expect(capped.body.pagination).toEqual({ page: 1, page_size: 100, total: 1, has_more: false });
    expectError(await t.request('GET', '/api/v1/job-queues?page=9007199254740992', { token: bob.token }), 400, 'BAD_REQUEST');

    for (const limit of [101, 1_000_001, Number.MAX_SAFE_INTEGER]) {
      const jobs = await t.request('GET', `/api/v1/jobs?limit=${limit}`, { token: bob.token });
      expect(jobs.status, jobs.text).toBe(200);
      expect(jobs.body).toMatchObject({ limit: 100, offset: 0 });
    }
    expectError(await t.request('GET', '/api/v1/jobs?limit=9007199254740992', { token: bob.token }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', '/api/v1/jobs?offset=10001', { token: bob.token }), 400, 'BAD_REQUEST');

    const admin = await t.request('GET', `/admin/jobs/queues?limit=1000001&offset=${Number.MAX_SAFE_INTEGER}`, { token: adminToken });
    expect(admin.status, admin.text).toBe(200);
    expect(admin.body).toMatchObject({ queues: [], limit: 100, offset: Number.MAX_SAFE_INTEGER });
    const adminJobs = await t.request('GET', `/admin/jobs/queues/${bob.user_id}/${queueId(name)}/jobs?limit=1000001`, { token: adminToken });
    expect(adminJobs.status, adminJobs.text).toBe(200);
    expect(adminJobs.body).toMatchObject({ jobs: [], limit: 100, offset: 0 });
    expect((await t.request('DELETE', `/api/v1/job-queues/${queueId(name)}`, { token: bob.token })).status).toBe(204);
  });
});

describe('jobs: list, cancel, delete', () => {
  it('lists the tenant\'s jobs with filters and paging; another tenant sees none', async () => {
    const carol = await t.newUser('carol');
    const q1 = unique('list-a');
    const q2 = unique('list-b');
    const base = nowS() + 1000;
    const a = await schedule({ queue: q1, webhook: { url: `${receiver.url}/l` }, scheduled_at: base + 1 }, carol.token);
    const b = await schedule({ queue: q2, webhook: { url: `${receiver.url}/l` }, scheduled_at: base + 2 }, carol.token);
    const c = await schedule({ queue: q1, webhook: { url: `${receiver.url}/l` }, scheduled_at: base + 3 }, carol.token);
    const all = await t.request('GET', '/api/v1/jobs', { token: carol.token });
    expect(all.status, all.text).toBe(200);
    expect(all.body).toMatchObject({ total: 3, limit: 20, offset: 0 });
    expect(all.body.jobs.map((j: { id: string }) => j.id)).toEqual([a.job_id, b.job_id, c.job_id]);
    const page = await t.request('GET', '/api/v1/jobs?limit=1&offset=1', { token: carol.token });
    expect(page.body).toMatchObject({ total: 3, limit: 1, offset: 1 });
    expect(page.body.jobs.map((j: { id: string }) => j.id)).toEqual([b.job_id]);
    const inQueue = await t.request('GET', `/api/v1/jobs?queue=${q1}&scheduled_after=${base + 2}`, { token: carol.token });
    expect(inQueue.body.jobs.map((j: { id: string }) => j.id)).toEqual([c.job_id]);
    const before = await t.request('GET', `/api/v1/jobs?scheduled_before=${base + 2}&status=scheduled`, { token: carol.token });
    expect(before.body.jobs.map((j: { id: string }) => j.id)).toEqual([a.job_id, b.job_id]);
    expect((await t.request('GET', '/api/v1/jobs?status=completed', { token: carol.token })).body.total).toBe(0);
    expect((await t.request('GET', '/api/v1/jobs?status=bogus', { token: carol.token })).status).toBe(400);
    const dave = await t.newUser('dave');
    expect((await t.request('GET', '/api/v1/jobs', { token: dave.token })).body.total).toBe(0);
    expectError(await t.request('GET', `/api/v1/jobs/${a.job_id}`, { token: dave.token }), 404, 'not_found');
    expectError(await t.request('DELETE', `/api/v1/jobs/${a.job_id}`, { token: dave.token }), 404, 'not_found');
    expectError(await t.request('GET', '/api/v1/jobs/job_bogus', { token: carol.token }), 404, 'not_found');
  });

  it('DELETE cancels a scheduled job, then removes it; a job in processing is 409 job_not_cancellable', async () => {
    const queue = unique('del');
    const ack = await schedule({ queue, webhook: { url: `${receiver.url}/${queue}` }, scheduled_at: nowS() + 600 });
    expect((await t.request('DELETE', `/api/v1/jobs/${ack.job_id}`, { token: alice.token })).status).toBe(204);
    expect(await job(ack.job_id)).toMatchObject({ status: 'cancelled', completed_at: nowS() });
    clock().advance(601_000);
    await settle(5);
    expect(at(`/${queue}`)).toHaveLength(0);
    expect((await t.request('DELETE', `/api/v1/jobs/${ack.job_id}`, { token: alice.token })).status).toBe(204);
    expectError(await t.request('GET', `/api/v1/jobs/${ack.job_id}`, { token: alice.token }), 404, 'not_found');

    const hang = unique('hang');
    receiver.respond.set(`/${hang}`, 'hang');
    const busy = await schedule({ queue: hang, webhook: { url: `${receiver.url}/${hang}` }, retry_policy: { max_attempts: 1, backoff_seconds: 0 } });
    await until(() => at(`/${hang}`).length === 1, 'the hanging attempt');
    expect((await job(busy.job_id)).status).toBe('processing');
    expectError(await t.request('DELETE', `/api/v1/jobs/${busy.job_id}`, { token: alice.token }), 409, 'job_not_cancellable');
    // The 400 ms time-out ends the attempt: failed (one attempt allowed).
    const failed = await jobWhere(busy.job_id, 'failed');
    expect(failed.error).toMatch(/timeout/);
  });

  it('cancel-bulk cancels only the caller\'s scheduled jobs matching the filters', async () => {
    const queue = unique('bulk');
    const later = nowS() + 3600;
    const mine1 = await schedule({ queue, webhook: { url: `${receiver.url}/b` }, scheduled_at: later, priority: 'low' });
    const mine2 = await schedule({ queue, webhook: { url: `${receiver.url}/b` }, scheduled_at: later + 10 });
    const other = unique('bulk-other');
    const mine3 = await schedule({ queue: other, webhook: { url: `${receiver.url}/b` }, scheduled_at: later });
    const bobs = await schedule({ queue, webhook: { url: `${receiver.url}/b` }, scheduled_at: later }, bob.token);

    const byPriority = await t.request('POST', '/api/v1/jobs/cancel-bulk', { token: alice.token, body: { queue, priority: 'low' } });
    expect(byPriority.status, byPriority.text).toBe(200);
    expect(byPriority.body).toEqual({ cancelled_count: 1 });
    expect((await job(mine1.job_id)).status).toBe('cancelled');
    const byIds = await t.request('POST', '/api/v1/jobs/cancel-bulk', { token: alice.token, body: { job_ids: [mine3.job_id, bobs.job_id] } });
    expect(byIds.body).toEqual({ cancelled_count: 1 });
    const byTime = await t.request('POST', '/api/v1/jobs/cancel-bulk', { token: alice.token, body: { scheduled_after: later + 5, scheduled_before: later + 20 } });
    expect(byTime.body).toEqual({ cancelled_count: 1 });
    expect((await job(mine2.job_id)).status).toBe('cancelled');
    expect((await job(bobs.job_id, bob.token)).status).toBe('scheduled');
    expectError(await t.request('POST', '/api/v1/jobs/cancel-bulk', { token: alice.token, body: { priority: 'nope' } }), 400, 'BAD_REQUEST');
  });
});

describe('schedule-batch', () => {
  it('schedules each item on its own, with per-item failures', async () => {
    const q1 = unique('batch-a');
    const q2 = unique('batch-b');
    const res = await t.request('POST', '/api/v1/jobs/schedule-batch', {
      token: alice.token,
      body: {
        jobs: [
          { queue: q1, webhook: { url: `${receiver.url}/${q1}` }, payload: 0 },
          { queue: q2, webhook: { url: 'nope' } },
          { queue: q2, webhook: { url: `${receiver.url}/${q2}` }, payload: 2 },
          { queue: q1, webhook: { url: `${receiver.url}/${q1}` }, payload: 3, scheduled_at: nowS() + 60 },
        ],
      },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ total: 4, success_count: 3, failure_count: 1, failed: [{ index: 1, code: 'BAD_REQUEST', error: expect.stringMatching(/url/) }] });
    expect(res.body.successful.map((a: { queue: string }) => a.queue)).toEqual([q1, q2, q1]);
    await until(() => at(`/${q1}`).length === 1 && at(`/${q2}`).length === 1, 'the due deliveries');
    expect(at(`/${q2}`)[0].json.payload).toBe(2);
    expectError(await t.request('POST', '/api/v1/jobs/schedule-batch', { token: alice.token, body: { jobs: [] } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/jobs/schedule-batch', { token: alice.token, body: {} }), 400, 'BAD_REQUEST');
  });

  it('an item that is not a valid schedule body fails alone, with its index, code and field; the others are scheduled', async () => {
    const queue = unique('batch-shape');
    const good = { queue, webhook: { url: `${receiver.url}/${queue}` }, scheduled_at: nowS() + 3600 };
    const res = await t.request('POST', '/api/v1/jobs/schedule-batch', {
      token: alice.token,
      body: {
        jobs: [
          good,
          { webhook: { url: `${receiver.url}/x` }, priority: 'urgent' },
          { queue: 'bad name', webhook: { url: `${receiver.url}/x` } },
          { payload: 1 },
          { webhook: { url: `${receiver.url}/x` }, scheduled_at: 'soon' },
          { ...good, payload: 'last' },
        ],
      },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ total: 6, success_count: 2, failure_count: 4 });
    expect(res.body.successful.map((ack: { queue: string }) => ack.queue)).toEqual([queue, queue]);
    expect(res.body.failed).toEqual([
      { index: 1, code: 'BAD_REQUEST', error: expect.stringMatching(/^body\.jobs\.1\.priority must be one of: "critical", "high", "normal", "low"$/) },
      { index: 2, code: 'BAD_REQUEST', error: expect.stringMatching(/^body\.jobs\.2\.queue must match pattern/) },
      { index: 3, code: 'BAD_REQUEST', error: expect.stringMatching(/^body\.jobs\.3\.webhook is required$/) },
      { index: 4, code: 'BAD_REQUEST', error: expect.stringMatching(/^body\.jobs\.4\.scheduled_at must be integer$/) },
    ]);
    const listed = await t.request('GET', `/api/v1/jobs?queue=${queue}`, { token: alice.token });
    expect(listed.body.total).toBe(2);
    // Only the envelope can fail the whole request: not an array of objects, or too many items.
    for (const body of [{ jobs: [good, 1] }, { jobs: [good, null] }, { jobs: 'x' }, { jobs: Array.from({ length: 1001 }, () => good) }]) {
      expectError(await t.request('POST', '/api/v1/jobs/schedule-batch', { token: alice.token, body }), 400, 'BAD_REQUEST');
    }
    // The reference still documents the items as schedule bodies.
    const openapi = (await t.request('GET', '/openapi.json')).body;
    const items = openapi.paths['/api/v1/jobs/schedule-batch'].post.requestBody.content['application/json'].schema.properties.jobs.items;
    expect(Object.keys(items.properties).sort()).toEqual(['payload', 'priority', 'queue', 'retry_policy', 'scheduled_at', 'webhook']);
    expect(items.required).toEqual(['webhook']);
  });
});

describe('administration', () => {
  it('admin cancel-bulk and cleanup need the admin role and reach every tenant', async () => {
    expectError(await t.request('POST', '/admin/jobs/cancel-bulk', { token: alice.token, body: {} }), 403, 'forbidden');
    expectError(await t.request('POST', '/admin/jobs/cleanup', { token: alice.token, body: {} }), 403, 'forbidden');
    const erin = await t.newUser('erin');
    const queue = unique('admin');
    const later = nowS() + 3600;
    const e1 = await schedule({ queue, webhook: { url: `${receiver.url}/a` }, scheduled_at: later }, erin.token);
    const e2 = await schedule({ queue: unique('admin2'), webhook: { url: `${receiver.url}/a` }, scheduled_at: later }, erin.token);
    const b1 = await schedule({ queue, webhook: { url: `${receiver.url}/a` }, scheduled_at: later }, bob.token);
    const one = await t.request('POST', '/admin/jobs/cancel-bulk', { token: adminToken, body: { user_id: erin.user_id } });
    expect(one.status, one.text).toBe(200);
    expect(one.body).toEqual({ cancelled_count: 2 });
    expect((await job(e1.job_id, erin.token)).status).toBe('cancelled');
    expect((await job(e2.job_id, erin.token)).status).toBe('cancelled');
    expect((await job(b1.job_id, bob.token)).status).toBe('scheduled');

    // Retention: finished jobs older than retention_days go; with 0 days every finished job goes.
    const cleanup = await t.request('POST', '/admin/jobs/cleanup', { token: adminToken, body: { retention_days: 0 } });
    expect(cleanup.status, cleanup.text).toBe(200);
    expect(cleanup.body.retention_days).toBe(0);
    expect(cleanup.body.deleted_count).toBeGreaterThanOrEqual(2);
    expectError(await t.request('GET', `/api/v1/jobs/${e1.job_id}`, { token: erin.token }), 404, 'not_found');
    expect((await job(b1.job_id, bob.token)).status).toBe('scheduled');
    const defaults = await t.request('POST', '/admin/jobs/cleanup', { token: adminToken });
    expect(defaults.body).toEqual({ deleted_count: 0, retention_days: 7 });

    const all = await t.request('POST', '/admin/jobs/cancel-bulk', { token: adminToken });
    expect(all.body.cancelled_count).toBeGreaterThanOrEqual(1);
    expect((await job(b1.job_id, bob.token)).status).toBe('cancelled');
  });
});
