import client from 'prom-client';
import type { FastifyInstance } from 'fastify';
import type { RuntimeObserver } from '../../runtime/index.js';
import { FastCounter, FastHistogram, type CounterSeries, type HistogramSeries } from '../fast-metrics.js';
import { MetricsHistory, type MetricsHistoryOptions } from '../metrics-history.js';
import { routeConfigOf, type RouteConfig } from '../route-config.js';

/**
 * Prometheus metrics: HTTP requests by route and status, and the runtime's
 * own (turns, commits, activations, overloads), in one registry per node.
 */
export class Metrics implements RuntimeObserver {
  readonly registry = new client.Registry();
  // Written on every request and every actor batch: counted without prom-client's per-call label hashing (http/fast-metrics.ts).
  private readonly httpRequests = new FastCounter('http_requests_total', 'HTTP requests by method, route template and status code.', this.registry);
  private readonly httpDuration = new FastHistogram(
    'http_request_duration_seconds',
    'HTTP request latency by route template.',
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    this.registry,
  );
  private readonly activations = new FastCounter('actor_activations_total', 'Actors loaded into memory, by kind.', this.registry);
  private readonly passivations = new FastCounter('actor_passivations_total', 'Idle actors dropped from memory, by kind.', this.registry);
  private readonly turnMessages = new FastCounter('actor_messages_total', 'Messages processed by actors, by kind.', this.registry);
  private readonly batchDuration = new FastHistogram(
    'actor_batch_duration_seconds',
    'Time to run one batch of turns (before its commit), by kind.',
    [0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05],
    this.registry,
  );
  private readonly commitDuration = new FastHistogram(
    'storage_commit_duration_seconds',
    'Time from a batch commit request to durable (LMDB commit and sync).',
    [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
    this.registry,
  );
  private readonly commitOps = new FastCounter('storage_commit_ops_total', 'Record writes committed.', this.registry);
  /** Each route's HTTP series, by its config object (routeSeriesOf). */
  private readonly routeSeries = new WeakMap<RouteConfig, RouteSeries>();
  private readonly commits = this.commitDuration.seriesOf('', () => ({}));
  private readonly committedOps = this.commitOps.seriesOf('', () => ({}));
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
    this.activations.seriesOf(kind, () => ({ kind })).value++;
  }
  passivated(kind: string): void {
    this.passivations.seriesOf(kind, () => ({ kind })).value++;
  }
  batch(kind: string, messages: number, turn_ms: number): void {
    this.turnMessages.seriesOf(kind, () => ({ kind })).value += messages;
    this.batchDuration.observe(this.batchDuration.seriesOf(kind, () => ({ kind })), turn_ms / 1000);
  }
  commit(ops: number, commit_ms: number): void {
    this.committedOps.value += ops;
    this.commitDuration.observe(this.commits, commit_ms / 1000);
  }
  overloaded(kind: string): void {
    this.overloads.inc({ kind });
  }

  /** Records each response against its route template (not the raw URL: bounded labels). */
  register(app: FastifyInstance): void {
    app.addHook('onResponse', (request, reply, done) => {
      const series = this.routeSeriesOf(routeConfigOf(request), request.method);
      const status_code = reply.statusCode;
      let requests = series.byStatus.get(status_code);
      if (requests === undefined) {
        const { method, route } = series;
        requests = this.httpRequests.seriesOf(`${method} ${route} ${status_code}`, () => ({ method, route, status_code }));
        series.byStatus.set(status_code, requests);
      }
      requests.value++;
      this.httpDuration.observe(series.duration, reply.elapsedTime / 1000);
      done();
    });
  }

  /**
   * The series of a route and method, found by their label strings once per
   * route: a response then builds and hashes no string (two per response
   * were most of this hook's cost). Found again after a reset of either
   * metric; a request no route matched is counted under `unmatched`.
   */
  private routeSeriesOf(config: RouteConfig | undefined, method: string): RouteSeries {
    const held = config === undefined ? undefined : this.routeSeries.get(config);
    const generation = this.httpRequests.generation + this.httpDuration.generation;
    if (held !== undefined && held.method === method && held.generation === generation) return held;
    const route = config?.url ?? 'unmatched';
    const series: RouteSeries = {
      method,
      route,
      generation,
      duration: this.httpDuration.seriesOf(`${method} ${route}`, () => ({ method, route })),
      byStatus: new Map(),
    };
    // A route of several methods keeps the one seen last; the others find theirs by their strings.
    if (config !== undefined) this.routeSeries.set(config, series);
    return series;
  }
}

/** What the response hook keeps per route (Metrics.routeSeriesOf). */
interface RouteSeries {
  readonly method: string;
  readonly route: string;
  readonly generation: number;
  readonly duration: HistogramSeries;
  readonly byStatus: Map<number, CounterSeries>;
}
