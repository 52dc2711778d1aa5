import { createHmac } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { ActorClient, Clock, PublishedEvent } from '../runtime/index.js';
import {
  JOB_ATTEMPT_EVENT,
  JOB_PROBE_EVENT,
  JOB_PROBE_KIND,
  JOB_QUEUE_KIND,
  jobPolicy,
  type JobAttempt,
  type JobAttemptResult,
  type JobSettings,
  type ProbeMessage,
  type QueueMessage,
} from '../actors/jobs/messages.js';
import type { NodeConfig } from './config.js';
import { WebhookDeliveryWorker, type WebhookNetwork } from './webhook-delivery.js';

/**
 * The node's job delivery worker. A job queue emits a `job.attempt` event
 * (after its commit) when a due job's attempt starts; this worker signs the
 * body with the job's secret (Standard Webhooks, the conventions' "Signed
 * deliveries"), POSTs it and tells the `attempt_result` back to the queue,
 * which decides (completed, retry, failed + DLQ). A lost attempt (queue
 * full, node stopped) is not answered: the queue's in-flight deadline
 * retries it.
 *
 * The POST itself goes through the webhooks area's transport
 * (WebhookDeliveryWorker.perform, never started as a worker here): the same
 * delivery guard (resolve once, check every address, connect to the checked
 * address, redirects checked hop by hop), so WEBHOOK_ALLOW_PRIVATE_TARGETS
 * governs job targets too.
 *
 * Health (GET /health/job_queue): the processor runs when this worker is
 * started, listening on the runtime's event bus, and not wedged (attempts
 * waiting means some are in flight); the scheduler runs when the node's
 * scheduler probe actor (a durable alarm every probe_interval_ms, the same
 * machinery that fires due jobs; started by the first health check) ticked
 * recently.
 */
export interface JobDeliveryOptions {
  events: EventEmitter;
  actors: ActorClient;
  clock: Clock;
  settings: () => JobSettings;
  allowPrivateTargets: boolean;
  logger: Logger;
  /** The scheduler probe's key (the node id). */
  probeKey: string;
  network?: WebhookNetwork;
  concurrency_max?: number;
  per_host_max?: number;
  queue_max?: number;
}

export interface JobQueueHealth {
  processor_running: boolean;
  scheduler_running: boolean;
  /** How many attempts are running and waiting on this node. */
  in_flight: number;
  waiting: number;
}

/** Results told to a queue in one message at most. */
const RESULTS_PER_MESSAGE_MAX = 1_000;
const PROBE_FIRST_WAIT_MS = 2_000;
const PROBE_STALE_MS = 3 * jobPolicy.probe_interval_ms;

/** `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` keyed with the base64-decoded part of the secret after whsec_. */
export function signJob(secret: string, job_id: string, timestamp_s: number, body: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${job_id}.${timestamp_s}.${body}`).digest('base64')}`;
}

/** The node's job settings, passed to the queues with every message that can start an attempt. */
export function jobSettings(config: NodeConfig): JobSettings {
  return { attempt_timeout_ms: config.jobTimeoutMs };
}

export class JobDeliveryWorker {
  /** The transport: the webhook worker's guarded POST (its `network` is replaceable in tests). */
  readonly transport: WebhookDeliveryWorker;
  private readonly queue: JobAttempt[] = [];
  /** Results waiting for the next flush, per queue actor key. */
  private readonly results = new Map<string, JobAttemptResult[]>();
  private flushing = false;
  private readonly perHost = new Map<string, number>();
  private inFlight = 0;
  private started = false;
  private stopped = false;
  private probeStarted = false;
  private readonly probeWaiters: (() => void)[] = [];
  private lastProbeMs: number | null = null;
  private readonly concurrency_max: number;
  private readonly per_host_max: number;
  private readonly queue_max: number;
  private readonly listener = (event: PublishedEvent) => {
    if (event.type === JOB_ATTEMPT_EVENT) this.enqueue(event.data as JobAttempt);
    else if (event.type === JOB_PROBE_EVENT) {
      const tick = event.data as { node: string; at_ms: number };
      if (tick.node === this.options.probeKey) {
        this.lastProbeMs = tick.at_ms;
        for (const waiter of this.probeWaiters.splice(0)) waiter();
      }
    }
  };

  constructor(private readonly options: JobDeliveryOptions) {
    this.transport = new WebhookDeliveryWorker({
      events: options.events,
      actors: options.actors,
      settings: () => ({ attempt_timeout_ms: options.settings().attempt_timeout_ms, disable_after_failures: 1, retry_base_ms: 1 }),
      allowPrivateTargets: options.allowPrivateTargets,
      logger: options.logger,
      network: options.network,
    });
    this.concurrency_max = options.concurrency_max ?? 256;
    this.per_host_max = options.per_host_max ?? Math.max(1, Math.floor(this.concurrency_max / 2));
    this.queue_max = options.queue_max ?? 20_000;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.options.events.on('event', this.listener);
  }

  /** Stops taking attempts and aborts those in flight (unanswered: their deadlines retry them). */
  stop(): void {
    this.stopped = true;
    this.options.events.off('event', this.listener);
    this.queue.length = 0;
    this.transport.stop();
    for (const waiter of this.probeWaiters.splice(0)) waiter();
  }

  /**
   * The health check's view. The scheduler probe is started by the first
   * check (not at boot: an idle node keeps no alarm of its own), which then
   * waits up to probe_first_wait_ms for its first tick.
   */
  async health(): Promise<JobQueueHealth> {
    if (!this.probeStarted && this.started && !this.stopped) {
      this.probeStarted = true;
      const ticked = new Promise<void>((resolve) => {
        this.probeWaiters.push(resolve);
        setTimeout(resolve, PROBE_FIRST_WAIT_MS).unref();
      });
      try {
        this.options.actors.tell(JOB_PROBE_KIND, this.options.probeKey, { op: 'start' } satisfies ProbeMessage);
        await ticked;
      } catch (error) {
        this.probeStarted = false;
        this.options.logger.warn({ err: error }, 'job scheduler probe not started');
      }
    }
    const now = this.options.clock.now();
    // Running: attached to the runtime's event bus, and not wedged (attempts waiting means some are in flight).
    const processor_running = this.started && !this.stopped && this.options.events.listeners('event').includes(this.listener) && (this.queue.length === 0 || this.inFlight > 0);
    const scheduler_running = !this.stopped && this.lastProbeMs !== null && now - this.lastProbeMs <= PROBE_STALE_MS;
    return { processor_running, scheduler_running, in_flight: this.inFlight, waiting: this.queue.length };
  }

  private enqueue(attempt: JobAttempt): void {
    if (this.stopped) return;
    if (this.queue.length >= this.queue_max) {
      this.options.logger.warn({ job_id: attempt.job_id }, 'job delivery queue full; the attempt is retried at its deadline');
      return;
    }
    this.queue.push(attempt);
    this.pump();
  }

  private pump(): void {
    for (let i = 0; i < this.queue.length && this.inFlight < this.concurrency_max; ) {
      const attempt = this.queue[i];
      const host = hostOf(attempt.url);
      const busy = this.perHost.get(host) ?? 0;
      if (busy >= this.per_host_max) {
        i++;
        continue;
      }
      this.queue.splice(i, 1);
      this.inFlight++;
      this.perHost.set(host, busy + 1);
      void this.run(attempt).finally(() => {
        this.inFlight--;
        const left = (this.perHost.get(host) ?? 1) - 1;
        if (left <= 0) this.perHost.delete(host);
        else this.perHost.set(host, left);
        this.pump();
      });
    }
  }

  private async run(attempt: JobAttempt): Promise<void> {
    const started = performance.now();
    const timestamp_s = Math.floor(this.options.clock.now() / 1000);
    const signed = signJob(attempt.secret, attempt.job_id, timestamp_s, attempt.body);
    // The webhook transport also returns the answer for the webhooks' delivery log; a job keeps only the excerpt.
    const { response: _logged, ...outcome } = await this.transport.perform(
      {
        webhook_id: attempt.queue,
        event_id: attempt.job_id,
        attempt: attempt.attempt,
        url: attempt.url,
        headers: {
          ...attempt.headers,
          'content-type': 'application/json',
          'webhook-id': attempt.job_id,
          'webhook-timestamp': String(timestamp_s),
          'webhook-signature': signed,
          'Service-Signature': signed,
        },
        body: attempt.body,
        timeout_ms: attempt.timeout_ms,
      },
      started + attempt.timeout_ms,
    );
    if (this.stopped) return;
    const result: JobAttemptResult = {
      op: 'attempt_result',
      job_id: attempt.job_id,
      attempt: attempt.attempt,
      duration_ms: Math.round(performance.now() - started),
      job_settings: this.options.settings(),
      ...outcome,
    };
    this.report(attempt.queue_key, result);
  }

  /**
   * Results are told back per queue, those that ended in the same turn of the
   * event loop together (flushed on setImmediate): one queue turn and one
   * commit for many results instead of one each. It adds no wait.
   */
  private report(queue_key: string, result: JobAttemptResult): void {
    const pending = this.results.get(queue_key);
    if (pending) pending.push(result);
    else this.results.set(queue_key, [result]);
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.flushing = false;
    const all = [...this.results];
    this.results.clear();
    for (const [queue_key, results] of all) {
      for (let i = 0; i < results.length; i += RESULTS_PER_MESSAGE_MAX) {
        const chunk = results.slice(i, i + RESULTS_PER_MESSAGE_MAX);
        const message: QueueMessage = chunk.length === 1 ? chunk[0] : { op: 'attempt_results', results: chunk };
        try {
          this.options.actors.tell(JOB_QUEUE_KIND, queue_key, message);
        } catch (error) {
          this.options.logger.warn({ err: error, results: chunk.length }, 'job attempt results not delivered; the attempts are retried at their deadline');
        }
      }
    }
  }
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '';
  }
}

/** The worker of each running node, found by its services (GET /health/job_queue reads it). */
const workers = new WeakMap<object, JobDeliveryWorker>();

export function registerJobWorker(services: object, worker: JobDeliveryWorker): void {
  workers.set(services, worker);
}

export function jobWorkerOf(services: object): JobDeliveryWorker | undefined {
  return workers.get(services);
}
