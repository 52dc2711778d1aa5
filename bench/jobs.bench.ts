import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { jobActors } from '../actors/jobs/actor.js';
import {
  JOB_ATTEMPT_EVENT,
  JOB_QUEUE_KIND,
  jobIdFor,
  jobQueueKey,
  type JobAttempt,
  type JobAttemptResult,
  type JobRequest,
  type QueueMessage,
  type QueueView,
} from '../actors/jobs/messages.js';
import { JobDeliveryWorker } from '../http/job-delivery.js';
import { randomId, SystemClock, type PublishedEvent } from '../runtime/index.js';
import { startBenchRuntime, type BenchRuntime } from './support/runtime.js';
import { progress, runScenarios } from './support/scenarios.js';
import type { BenchRow } from './types.js';

/**
 * Issue 12 target: 100,000 scheduled jobs due in the same second all fire
 * within 5 s. Through the in-process runtime on real LMDB (fsync per
 * commit) with the SystemClock: the jobs are scheduled (schedule_many, 1,000
 * per message) into ONE queue, all due at the same whole second T, a few
 * seconds ahead; from T on, the queue's durable tick alarm fires them.
 *
 * Two scenarios:
 * - scheduler: the queue and runtime alone; a stand-in for the worker answers
 *   every `job.attempt` event at once with a 200 result (no HTTP). Measures
 *   due -> every job started (the alarm, the dispatch turns, their commits)
 *   and due -> every job completed (results told back, their commits).
 * - end to end: the node's JobDeliveryWorker signs and POSTs every job to a
 *   receiver in its own process on 127.0.0.1 (HTTP/1.1, no keep-alive, as
 *   deliveries are made), which answers 200. Measures due -> every job
 *   delivered and completed, for BENCH_JOBS_E2E jobs (default 10,000: HTTP
 *   is the bound), and, first, the same transport and receiver with no queue
 *   (the ceiling of that rate on this machine).
 * The queue's concurrency is 10,000 (its maximum); the worker runs
 * BENCH_JOBS_WORKER_CONCURRENCY POSTs at once (default 512).
 */
const AREA = 'jobs';
const JOBS = Number(process.env.BENCH_JOBS ?? 100_000);
/** End to end is bounded by HTTP (one TCP connection per delivery, as the delivery guard connects to the checked address): fewer jobs. */
const E2E_JOBS = Number(process.env.BENCH_JOBS_E2E ?? 10_000);
const BASELINE_POSTS = 3_000;
const WORKER_CONCURRENCY = Number(process.env.BENCH_JOBS_WORKER_CONCURRENCY ?? 512);
const BATCH = 1_000;
const SCHEDULE_IN_FLIGHT = 4;
/** Attempts of the queue in flight at once (its maximum). */
const QUEUE_CONCURRENCY = 10_000;
/** Every wait also stops after this long. */
const WAIT_SECONDS_MAX = 120;
const TARGET_S = 5;
const TENANT = 'bench-tenant';
const SETTINGS = { attempt_timeout_ms: 30_000 };

// ---- the receiver, in its own process ----

if (process.argv[2] === '--receiver' && process.send) {
  let count = 0;
  let last_ms = 0;
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      count++;
      last_ms = Date.now();
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end('ok');
    });
  });
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
  process.on('message', (message: { report?: boolean }) => {
    if (message.report) process.send!({ count, last_ms });
  });
}

interface Receiver {
  child: ChildProcess;
  url: string;
  report(): Promise<{ count: number; last_ms: number }>;
  stop(): void;
}

function startReceiverProcess(): Promise<Receiver> {
  const child = fork(fileURLToPath(import.meta.url), ['--receiver'], { stdio: ['ignore', 2, 2, 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('message', (message: { port: number }) => {
      resolve({
        child,
        url: `http://127.0.0.1:${message.port}/jobs`,
        report: () => new Promise((done) => {
          child.once('message', (answer: { count: number; last_ms: number }) => done(answer));
          child.send({ report: true });
        }),
        stop: () => child.kill('SIGKILL'),
      });
    });
  });
}

// ---- helpers ----

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Schedules JOBS jobs into `queue`, all due at the whole second T (epoch-ms), which is returned. */
async function scheduleBurst(bench: BenchRuntime, queue: string, url: string, count: number): Promise<{ due_ms: number; schedule_s: number }> {
  const key = jobQueueKey(TENANT, queue);
  const ask = <R>(message: QueueMessage) => bench.runtime.ask<R>(JOB_QUEUE_KIND, key, message);
  await ask({ op: 'create', tenant: TENANT, owner_id: 'bench', settings: { concurrency: QUEUE_CONCURRENCY, retry_policy: { max_attempts: 3, backoff_seconds: 1 } }, job_settings: SETTINGS });
  // Scheduling 100,000 jobs takes a few seconds on a loaded machine: T is far enough ahead that none is due before all are scheduled.
  const due_ms = Math.ceil(Date.now() / 1000) * 1000 + Math.max(15_000, Math.ceil(count / 2_500) * 1000);
  const started = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const from = next;
      next += BATCH;
      const jobs: JobRequest[] = [];
      for (let i = from; i < Math.min(count, from + BATCH); i++) {
        jobs.push({ job_id: jobIdFor(queue, randomId()), user_id: 'bench', url, headers: {}, secret: 'whsec_YmVuY2hiZW5jaGJlbmNoYmVuY2hiZW5jaGJlbmNo', events: ['job.due'], payload: { i }, scheduled_at_ms: due_ms, priority: null, retry_policy: null });
      }
      await ask({ op: 'schedule_many', tenant: TENANT, jobs, job_settings: SETTINGS });
    }
  };
  await Promise.all(Array.from({ length: SCHEDULE_IN_FLIGHT }, worker));
  const schedule_s = (performance.now() - started) / 1000;
  if (Date.now() >= due_ms) throw new Error(`scheduling took ${schedule_s.toFixed(1)} s: the jobs fell due before all were scheduled`);
  const view = await ask<QueueView>({ op: 'get' });
  if (view.pending_count !== count) throw new Error(`${view.pending_count} jobs scheduled, expected ${count}`);
  return { due_ms, schedule_s };
}

/** Waits until the queue holds JOBS completed jobs; the time it saw the last one. */
async function untilCompleted(bench: BenchRuntime, queue: string, due_ms: number, count: number): Promise<number> {
  const key = jobQueueKey(TENANT, queue);
  for (;;) {
    const view = await bench.runtime.ask<QueueView>(JOB_QUEUE_KIND, key, { op: 'get' } satisfies QueueMessage);
    if (view.completed_count >= count) return Date.now();
    if (Date.now() > due_ms + WAIT_SECONDS_MAX * 1000) throw new Error(`only ${view.completed_count} of ${count} completed ${WAIT_SECONDS_MAX} s after the due time (failed ${view.failed_count}, processing ${view.processing_count})`);
    await sleep(20);
  }
}

/** Counts attempts started; the time the JOBS-th started. */
function countAttempts(bench: BenchRuntime, count: number, onAttempt?: (attempt: JobAttempt) => void): { all_started_ms: () => number | null; detach: () => void } {
  let started = 0;
  let all_started_ms: number | null = null;
  const listener = (event: PublishedEvent) => {
    if (event.type !== JOB_ATTEMPT_EVENT) return;
    started++;
    if (started === count) all_started_ms = Date.now();
    onAttempt?.(event.data as JobAttempt);
  };
  bench.runtime.events.on('event', listener);
  return { all_started_ms: () => all_started_ms, detach: () => bench.runtime.events.off('event', listener) };
}

const seconds = (ms: number) => ms / 1000;
const loadNote = () => `shared machine: load average ${loadavg()[0].toFixed(1)} on ${cpus().length} cores during the run`;

export async function run(): Promise<BenchRow[]> {
  const only = process.env.BENCH_JOBS_SCENARIO;
  return runScenarios(AREA, [
    {
      name: `scheduler: ${JOBS.toLocaleString('en')} jobs due in one second, results answered at once (no HTTP)`,
      async run() {
        const bench = await startBenchRuntime(jobActors);
        try {
          const key = jobQueueKey(TENANT, 'burst');
          let dropped = 0;
          // The stand-in worker: every attempt succeeds at once; results go back as the worker sends them
          // (those of one event-loop turn in one message).
          let pending: JobAttemptResult[] = [];
          const counter = countAttempts(bench, JOBS, (attempt) => {
            pending.push({ op: 'attempt_result', job_id: attempt.job_id, attempt: attempt.attempt, status_code: 200, error: null, error_kind: null, duration_ms: 0, response_excerpt: null, job_settings: SETTINGS });
            if (pending.length > 1) return;
            setImmediate(() => {
              const results = pending;
              pending = [];
              try {
                bench.runtime.tell(JOB_QUEUE_KIND, key, { op: 'attempt_results', results } satisfies QueueMessage);
              } catch {
                dropped += results.length;
              }
            });
          });
          const { due_ms, schedule_s } = await scheduleBurst(bench, 'burst', 'http://127.0.0.1:9/unused', JOBS);
          progress(`${AREA}: ${JOBS} jobs scheduled in ${schedule_s.toFixed(1)} s; due in ${((due_ms - Date.now()) / 1000).toFixed(1)} s`);
          const completed_ms = await untilCompleted(bench, 'burst', due_ms, JOBS);
          counter.detach();
          const started_ms = counter.all_started_ms()!;
          return [
            { area: AREA, scenario: `scheduler: due -> all ${JOBS.toLocaleString('en')} started`, value: Number(seconds(started_ms - due_ms).toFixed(2)), unit: 's', note: `target: all fire within ${TARGET_S} s; one queue, concurrency ${QUEUE_CONCURRENCY.toLocaleString('en')}, up to 5,000 started per turn; ${loadNote()}` },
            { area: AREA, scenario: `scheduler: due -> all ${JOBS.toLocaleString('en')} completed`, value: Number(seconds(completed_ms - due_ms).toFixed(2)), unit: 's', note: `results told back at once (no HTTP; ${dropped} refused by a full mailbox), those of one event-loop turn in one message, commits fsynced; scheduling took ${schedule_s.toFixed(1)} s (${Math.round(JOBS / schedule_s).toLocaleString('en')} jobs/s)` },
          ];
        } finally {
          await bench.destroy();
        }
      },
    },
    {
      name: `end to end: ${E2E_JOBS.toLocaleString('en')} jobs due in one second, signed and POSTed to a local receiver`,
      async run() {
        const bench = await startBenchRuntime(jobActors);
        const receiver = await startReceiverProcess();
        const worker = new JobDeliveryWorker({
          events: bench.runtime.events,
          actors: bench.runtime,
          clock: new SystemClock(),
          settings: () => SETTINGS,
          allowPrivateTargets: true,
          logger: pino({ level: 'silent' }),
          probeKey: 'bench',
          concurrency_max: WORKER_CONCURRENCY,
          per_host_max: WORKER_CONCURRENCY,
          queue_max: QUEUE_CONCURRENCY + 1_000,
        });
        worker.start();
        try {
          // The baseline, measured in the same run: the same transport POSTing to the same receiver, no queue at all.
          const baseline_started = performance.now();
          let next = 0;
          await Promise.all(Array.from({ length: WORKER_CONCURRENCY }, async () => {
            while (next < BASELINE_POSTS) {
              next++;
              await worker.transport.perform({ webhook_id: 'baseline', event_id: 'baseline', attempt: 1, url: receiver.url, headers: { 'content-type': 'application/json' }, body: '{"job_id":"baseline"}', timeout_ms: 30_000 }, performance.now() + 30_000);
            }
          }));
          const baseline_rate = BASELINE_POSTS / ((performance.now() - baseline_started) / 1000);
          const counter = countAttempts(bench, E2E_JOBS);
          const { due_ms, schedule_s } = await scheduleBurst(bench, 'burst', receiver.url, E2E_JOBS);
          progress(`${AREA}: ${E2E_JOBS} jobs scheduled in ${schedule_s.toFixed(1)} s; due in ${((due_ms - Date.now()) / 1000).toFixed(1)} s`);
          const completed_ms = await untilCompleted(bench, 'burst', due_ms, E2E_JOBS);
          counter.detach();
          const received = await receiver.report();
          const delivered_s = seconds(received.last_ms - due_ms);
          const rate = E2E_JOBS / delivered_s;
          return [
            { area: AREA, scenario: `end to end: due -> all ${E2E_JOBS.toLocaleString('en')} delivered`, value: Number(delivered_s.toFixed(2)), unit: 's', note: `${Math.round(rate).toLocaleString('en')} deliveries/s; ${(received.count - BASELINE_POSTS).toLocaleString('en')} job POSTs received (at least once); worker concurrency ${WORKER_CONCURRENCY}; ${loadNote()}` },
            { area: AREA, scenario: `end to end: due -> all ${E2E_JOBS.toLocaleString('en')} completed`, value: Number(seconds(completed_ms - due_ms).toFixed(2)), unit: 's', note: `last attempt started ${seconds(counter.all_started_ms()! - due_ms).toFixed(2)} s after the due time; at this rate 100,000 would take ${Math.round(JOBS / rate)} s (target ${TARGET_S} s)` },
            { area: AREA, scenario: 'baseline: the same POSTs with no queue (transport + receiver only)', value: Math.round(baseline_rate), unit: 'POST/s', note: `${BASELINE_POSTS.toLocaleString('en')} POSTs, ${WORKER_CONCURRENCY} at once, a new TCP connection each (the delivery guard connects to the checked address): the ceiling of the end-to-end rate here` },
          ];
        } finally {
          worker.stop();
          receiver.stop();
          await bench.destroy();
        }
      },
    },
  ].filter((scenario) => only === undefined || scenario.name.startsWith(only)));
}
