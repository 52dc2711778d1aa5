import client from 'prom-client';
import type { FastifyInstance } from 'fastify';
import type { RuntimeObserver } from '../../runtime/index.js';
import { MetricsHistory, type MetricsHistoryOptions } from '../metrics-history.js';

/**
 * Prometheus metrics: HTTP requests by route and status, and the runtime's
 * own (turns, commits, activations, overloads), in one registry per node.
 */
export class Metrics implements RuntimeObserver {
  readonly registry = new client.Registry();
  private readonly httpRequests = new client.Counter({
    name: 'http_requests_total',
    help: 'HTTP requests by method, route template and status code.',
    labelNames: ['method', 'route', 'status_code'],
    registers: [this.registry],
  });
  private readonly httpDuration = new client.Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency by route template.',
    labelNames: ['method', 'route'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  private readonly activations = new client.Counter({
    name: 'actor_activations_total',
    help: 'Actors loaded into memory, by kind.',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  private readonly passivations = new client.Counter({
    name: 'actor_passivations_total',
    help: 'Idle actors dropped from memory, by kind.',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  private readonly turnMessages = new client.Counter({
    name: 'actor_messages_total',
    help: 'Messages processed by actors, by kind.',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  private readonly batchDuration = new client.Histogram({
    name: 'actor_batch_duration_seconds',
    help: 'Time to run one batch of turns (before its commit), by kind.',
    labelNames: ['kind'],
    buckets: [0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05],
    registers: [this.registry],
  });
  private readonly commitDuration = new client.Histogram({
    name: 'storage_commit_duration_seconds',
    help: 'Time from a batch commit request to durable (LMDB commit and sync).',
    buckets: [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
    registers: [this.registry],
  });
  private readonly commitOps = new client.Counter({
    name: 'storage_commit_ops_total',
    help: 'Record writes committed.',
    registers: [this.registry],
  });
  private readonly overloads = new client.Counter({
    name: 'actor_mailbox_overflow_total',
    help: 'Messages refused because the actor mailbox was full, by kind.',
    labelNames: ['kind'],
    registers: [this.registry],
  });

  /** The recent samples of this registry (GET /admin/metrics/recent); node.ts starts and stops its sampling. */
  readonly history: MetricsHistory;

  constructor(
    options: { activeActors?: () => number; pendingAlarms?: () => number; queuedMessages?: () => number; history?: MetricsHistoryOptions } = {},
  ) {
    client.collectDefaultMetrics({ register: this.registry });
    this.history = new MetricsHistory(this.registry, options.history ?? { intervalMs: 5_000, historySamples: 180, routesPerSample: 50 });
    if (options.queuedMessages) {
      const read = options.queuedMessages;
      new client.Gauge({ name: 'actor_mailbox_messages', help: 'Messages waiting in the mailboxes of the actors in memory (not yet taken into a turn).', registers: [this.registry], collect() { this.set(read()); } });
    }
    if (options.activeActors) {
      const read = options.activeActors;
      new client.Gauge({ name: 'actor_active', help: 'Actors in memory.', registers: [this.registry], collect() { this.set(read()); } });
    }
    if (options.pendingAlarms) {
      const read = options.pendingAlarms;
      new client.Gauge({ name: 'actor_alarms_pending', help: 'Durable alarms scheduled.', registers: [this.registry], collect() { this.set(read()); } });
    }
  }

  activated(kind: string): void {
    this.activations.inc({ kind });
  }
  passivated(kind: string): void {
    this.passivations.inc({ kind });
  }
  batch(kind: string, messages: number, turn_ms: number): void {
    this.turnMessages.inc({ kind }, messages);
    this.batchDuration.observe({ kind }, turn_ms / 1000);
  }
  commit(ops: number, commit_ms: number): void {
    this.commitOps.inc(ops);
    this.commitDuration.observe(commit_ms / 1000);
  }
  overloaded(kind: string): void {
    this.overloads.inc({ kind });
  }

  /** Records each response against its route template (not the raw URL: bounded labels). */
  register(app: FastifyInstance): void {
    app.addHook('onResponse', (request, reply, done) => {
      const route = request.routeOptions.url ?? 'unmatched';
      this.httpRequests.inc({ method: request.method, route, status_code: reply.statusCode });
      this.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
      done();
    });
  }
}
