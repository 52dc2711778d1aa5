import type { Registry } from 'prom-client';
import { sampleBetween, type HistogramReading, type Reading, type RouteReading, type Sample } from './metrics-window.js';

/**
 * The node's own recent metrics, for the console's health page
 * (GET /admin/metrics/recent): every `intervalMs` it reads its prom-client
 * registry and keeps the sample of the window since the previous reading in a
 * ring of `historySamples`. No Prometheus server is needed; /metrics still
 * serves the same counters to one.
 */
export interface MetricsHistoryOptions {
  intervalMs: number;
  historySamples: number;
  /** Busiest routes kept per sample (the rest are still in the node's totals). */
  routesPerSample: number;
}

/** prom-client's view of one metric (`metric.get()`). */
interface MetricValues {
  values: { value: number; labels: Record<string, string | number>; metricName?: string }[];
}

export class MetricsHistory {
  private readonly samples: Sample[] = [];
  private previous?: Reading;
  private timer?: ReturnType<typeof setInterval>;
  private reading?: Promise<void>;

  constructor(
    private readonly registry: Registry,
    readonly options: MetricsHistoryOptions,
  ) {}

  start(): void {
    if (this.timer) return;
    void this.sampleNow();
    this.timer = setInterval(() => void this.sampleNow(), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Samples taken after `since_ms` (epoch ms), oldest first. */
  since(since_ms: number): Sample[] {
    return this.samples.filter((sample) => sample.at_ms > since_ms);
  }

  /** Takes a reading now; from the second one on, keeps the sample of the window since the previous. */
  sampleNow(): Promise<void> {
    // One reading at a time: a slow collect must not interleave two windows.
    this.reading ??= this.read()
      .then((reading) => {
        if (this.previous) {
          const sample = sampleBetween(this.previous, reading);
          if (sample.routes.length > this.options.routesPerSample) sample.routes.length = this.options.routesPerSample;
          this.samples.push(sample);
          if (this.samples.length > this.options.historySamples) this.samples.splice(0, this.samples.length - this.options.historySamples);
        }
        this.previous = reading;
      })
      // A failed reading (a gauge's collect threw) is skipped: the next window spans both intervals.
      .catch(() => undefined)
      .finally(() => {
        this.reading = undefined;
      });
    return this.reading;
  }

  private async values(name: string): Promise<MetricValues | undefined> {
    const metric = this.registry.getSingleMetric(name);
    return metric ? ((await metric.get()) as MetricValues) : undefined;
  }

  private async read(): Promise<Reading> {
    const at_ms = Date.now();
    const mono_ms = performance.now();
    const routes = new Map<string, RouteReading>();
    const route = (labels: Record<string, string | number>) => {
      const key = `${labels.method} ${labels.route}`;
      let entry = routes.get(key);
      if (!entry) routes.set(key, (entry = { requests: 0, server_errors: 0, client_errors: 0 }));
      return entry;
    };
    for (const { value, labels } of (await this.values('http_requests_total'))?.values ?? []) {
      const entry = route(labels);
      const status = Number(labels.status_code);
      entry.requests += value;
      if (status >= 500) entry.server_errors += value;
      else if (status >= 400) entry.client_errors += value;
    }
    const latencies = histograms(await this.values('http_request_duration_seconds'), (labels) => `${labels.method} ${labels.route}`);
    for (const [key, histogram] of latencies) {
      const entry = routes.get(key);
      if (entry) entry.latency = histogram;
    }
    const sum = (metric: MetricValues | undefined) => (metric ? metric.values.reduce((total, v) => total + v.value, 0) : null);
    return {
      at_ms,
      mono_ms,
      routes,
      commit: histograms(await this.values('storage_commit_duration_seconds'), () => '').get(''),
      replication: histograms(await this.values('cluster_replication_ack_duration_seconds'), () => '').get(''),
      activations: sum(await this.values('actor_activations_total')) ?? 0,
      actors_active: sum(await this.values('actor_active')),
      mailbox_messages: sum(await this.values('actor_mailbox_messages')),
    };
  }
}

/** A prom-client histogram's values, grouped by `keyOf(labels)` (summed over the other labels). */
function histograms(metric: MetricValues | undefined, keyOf: (labels: Record<string, string | number>) => string): Map<string, HistogramReading> {
  const out = new Map<string, { buckets: Map<number, number>; count: number }>();
  for (const { value, labels, metricName } of metric?.values ?? []) {
    const key = keyOf(labels);
    let entry = out.get(key);
    if (!entry) out.set(key, (entry = { buckets: new Map(), count: 0 }));
    if (metricName?.endsWith('_bucket')) {
      const le = labels.le === '+Inf' ? Infinity : Number(labels.le);
      entry.buckets.set(le, (entry.buckets.get(le) ?? 0) + value);
    } else if (metricName?.endsWith('_count')) entry.count += value;
  }
  return new Map([...out].map(([key, { buckets, count }]) => [key, { buckets: [...buckets].sort((a, b) => a[0] - b[0]).map(([le, c]) => ({ le, count: c })), count }]));
}
