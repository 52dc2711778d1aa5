import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllServerProcesses, startServerProcess, type ServerProcess, callServer as call, untilReal as until } from '../helpers/process.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * The job queue across process deaths (docs/api/jobs.md, "Delivery"): a job
 * that falls due while the node is down fires after the restart, and a
 * SIGKILL in the middle of deliveries loses no job: every job completes,
 * the interrupted attempts are retried under the same webhook-id.
 */
const dirs: string[] = [];
let receiver: Receiver | undefined;
afterAll(async () => {
  await killAllServerProcesses();
  await receiver?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * A short attempt time-out makes the in-flight deadline (2 x time-out + 1 s) short for the SIGKILL test;
 * the first test keeps a longer one, so a start-up that stalls the event loop on a loaded machine cannot
 * pass an attempt's deadline before its answer is read.
 */
const env = { WEBHOOK_ALLOW_PRIVATE_TARGETS: '1', JOB_TIMEOUT_MS: '1000' };
const patientEnv = { ...env, JOB_TIMEOUT_MS: '10000' };

async function newServer(env: Record<string, string>): Promise<{ server: ServerProcess; token: string; dataDir: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'platform-jobs-'));
  dirs.push(dataDir);
  const server = await startServerProcess({ dataDir, env });
  const registered = await call(server, 'POST', '/api/v1/auth/register', { body: { email: `jobs${dirs.length}@example.com`, username: `jobs${dirs.length}`, password: 'correct horse battery' } });
  expect(registered.status).toBe(201);
  return { server, token: registered.body.access_token as string, dataDir };
}

describe('jobs across a process death', () => {
  it('a job that falls due while the node is down fires after the restart', async () => {
    receiver ??= await startReceiver();
    let { server, token, dataDir } = await newServer(patientEnv);
    const due = Math.floor(Date.now() / 1000) + 3;
    const ack = await call(server, 'POST', '/api/v1/jobs/schedule', { token, body: { queue: 'nightly', webhook: { url: `${receiver.url}/down` }, payload: { n: 1 }, scheduled_at: due } });
    expect(ack.status).toBe(201);
    const exit = await server.stop('SIGKILL');
    expect(exit.signal).toBe('SIGKILL');
    // Down past the due time.
    await until(() => Date.now() > due * 1000 + 1_000, 'the due time to pass');
    expect(receiver.received.filter((d) => d.path === '/down')).toHaveLength(0);

    server = await startServerProcess({ dataDir, env: patientEnv, port: server.port });
    const [delivery] = await until(() => {
      const got = receiver!.received.filter((d) => d.path === '/down');
      return got.length > 0 && got;
    }, 'the delivery after the restart');
    expect(delivery.json).toEqual({ job_id: ack.body.job_id, queue: 'nightly', attempt: 1, payload: { n: 1 } });
    const job = await until(async () => {
      const res = await call(server, 'GET', `/api/v1/jobs/${ack.body.job_id}`, { token });
      return res.body.status === 'completed' && res.body;
    }, 'the job completed');
    expect(job.attempts).toBe(1);
    const health = await call(server, 'GET', '/health/job_queue');
    expect(health.body).toMatchObject({ status: 'healthy', scheduler_running: true, processor_running: true });
    await server.stop('SIGTERM');
  }, 90_000);

  it('a SIGKILL mid-delivery loses no job: the interrupted attempts are retried under the same webhook-id', async () => {
    receiver ??= await startReceiver();
    let { server, token, dataDir } = await newServer(env);
    // The target answers nothing until the node has died: every first attempt hangs.
    let killed = false;
    receiver.respond.set('/kill', () => (killed ? { status: 200 } : 'hang'));
    const jobs = Array.from({ length: 40 }, (_, i) => ({ queue: 'work', webhook: { url: `${receiver!.url}/kill` }, payload: { i }, retry_policy: { max_attempts: 5, backoff_seconds: 0 } }));
    const batch = await call(server, 'POST', '/api/v1/jobs/schedule-batch', { token, body: { jobs } });
    expect(batch.status).toBe(200);
    expect(batch.body.success_count).toBe(40);
    const ids = new Set<string>(batch.body.successful.map((a: { job_id: string }) => a.job_id));
    await until(() => receiver!.received.filter((d) => d.path === '/kill').length >= 10, 'attempts in flight');
    const exit = await server.stop('SIGKILL');
    expect(exit.signal).toBe('SIGKILL');
    killed = true;

    server = await startServerProcess({ dataDir, env, port: server.port });
    const done = await until(async () => {
      const res = await call(server, 'GET', '/api/v1/jobs?queue=work&status=completed&limit=100', { token });
      return res.body.total === 40 && res.body;
    }, 'every job completed', 60_000);
    expect(new Set(done.jobs.map((j: { id: string }) => j.id))).toEqual(ids);
    const deliveries = receiver.received.filter((d) => d.path === '/kill');
    // Every delivery carries its job's id as webhook-id and in the body; no job is delivered under another id.
    for (const d of deliveries) {
      expect(ids.has(String(d.headers['webhook-id']))).toBe(true);
      expect(d.json.job_id).toBe(d.headers['webhook-id']);
    }
    // The interrupted ones came again with a later attempt number.
    const retried = deliveries.filter((d) => d.json.attempt > 1);
    expect(retried.length).toBeGreaterThan(0);
    const stats = await call(server, 'GET', '/api/v1/queues/work/stats', { token });
    expect(stats.body).toMatchObject({ scheduled: 0, processing: 0 });
    await server.stop('SIGTERM');
  }, 120_000);
});
