/**
 * The arithmetic of the node's recent metrics (GET /admin/metrics/recent):
 * two cumulative readings of the prom-client registry, taken a few seconds
 * apart, become one sample of rates and latency quantiles over that window.
 * Pure: readings in, sample out (http/metrics-history.ts takes the readings).
 */

/** A cumulative histogram: count per upper bound (`le`, ascending, +Infinity last), as Prometheus keeps it. */
export interface HistogramReading {
  buckets: { le: number; count: number }[];
  count: number;
}

/** Per route template (`POST /api/v1/distributed-state/:namespace/:key/lock`): requests so far, by outcome, and their latency. */
export interface RouteReading {
  requests: number;
  /** Answered with a 5xx. */
  server_errors: number;
  /** Answered with a 4xx. */
  client_errors: number;
  latency?: HistogramReading;
}

/** Everything the history keeps, read from the registry at one moment. */
export interface Reading {
  /** Wall-clock time of the reading (the sample's timestamp). */
  at_ms: number;
  /** Monotonic time (the window's length). */
  mono_ms: number;
  routes: Map<string, RouteReading>;
  commit?: HistogramReading;
  replication?: HistogramReading;
  activations: number;
  actors_active: number | null;
  mailbox_messages: number | null;
}

export interface RouteSample {
  /** `METHOD /route/{template}`. */
  route: string;
  requests_per_s: number;
  server_errors_per_s: number;
  client_errors_per_s: number;
  p50_ms: number | null;
  p99_ms: number | null;
}

/** One window: rates per second over it, quantiles of what was observed in it (null: nothing observed). */
export interface Sample {
  at: string;
  at_ms: number;
  window_s: number;
  requests_per_s: number;
  server_errors_per_s: number;
  client_errors_per_s: number;
  p50_ms: number | null;
  p99_ms: number | null;
  commit_p50_ms: number | null;
  commit_p99_ms: number | null;
  replication_p50_ms: number | null;
  replication_p99_ms: number | null;
  activations_per_s: number;
  actors_active: number | null;
  mailbox_messages: number | null;
  /** Routes that received requests in the window, busiest first. */
  routes: RouteSample[];
}

/**
 * The q-quantile of a cumulative histogram, as Prometheus' histogram_quantile:
 * find the bucket holding the rank, interpolate linearly inside it (from 0
 * for the first bucket). A rank in the +Inf bucket gives the highest finite
 * bound (nothing better is known). Null when the histogram is empty.
 */
export function histogramQuantile(q: number, histogram: HistogramReading): number | null {
  if (histogram.count <= 0 || histogram.buckets.length === 0) return null;
  const rank = q * histogram.count;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const { le, count } of histogram.buckets) {
    if (count >= rank && count > lowerCount) {
      if (le === Infinity) return lowerBound;
      return lowerBound + ((le - lowerBound) * (rank - lowerCount)) / (count - lowerCount);
    }
    if (le !== Infinity) lowerBound = le;
    lowerCount = count;
  }
  return lowerBound;
}

/** What was observed between two readings of the same histogram (a histogram absent before counts from zero). */
export function histogramDelta(before: HistogramReading | undefined, after: HistogramReading): HistogramReading {
  const earlier = new Map(before?.buckets.map((b) => [b.le, b.count]) ?? []);
  return {
    buckets: after.buckets.map(({ le, count }) => ({ le, count: Math.max(0, count - (earlier.get(le) ?? 0)) })),
    count: Math.max(0, after.count - (before?.count ?? 0)),
  };
}

/** Adds histograms with the same bounds (every route's latency into the node's). */
export function histogramSum(histograms: HistogramReading[]): HistogramReading {
  const byBound = new Map<number, number>();
  let count = 0;
  for (const h of histograms) {
    count += h.count;
    for (const { le, count: c } of h.buckets) byBound.set(le, (byBound.get(le) ?? 0) + c);
  }
  return { buckets: [...byBound].sort((a, b) => a[0] - b[0]).map(([le, c]) => ({ le, count: c })), count };
}

const toMs = (seconds: number | null) => (seconds === null ? null : Math.round(seconds * 1e6) / 1e3);
const perSecond = (delta: number, window_s: number) => Math.round((Math.max(0, delta) / window_s) * 1000) / 1000;

/** The sample of the window between two readings. */
export function sampleBetween(before: Reading, after: Reading): Sample {
  const window_s = Math.max(0.001, (after.mono_ms - before.mono_ms) / 1000);
  const routes: RouteSample[] = [];
  const latencies: HistogramReading[] = [];
  let requests = 0;
  let serverErrors = 0;
  let clientErrors = 0;
  for (const [route, now] of after.routes) {
    const then = before.routes.get(route);
    const delta = now.requests - (then?.requests ?? 0);
    if (delta <= 0) continue;
    const server = now.server_errors - (then?.server_errors ?? 0);
    const client = now.client_errors - (then?.client_errors ?? 0);
    const latency = now.latency ? histogramDelta(then?.latency, now.latency) : undefined;
    if (latency) latencies.push(latency);
    requests += delta;
    serverErrors += Math.max(0, server);
    clientErrors += Math.max(0, client);
    routes.push({
      route,
      requests_per_s: perSecond(delta, window_s),
      server_errors_per_s: perSecond(server, window_s),
      client_errors_per_s: perSecond(client, window_s),
      p50_ms: latency ? toMs(histogramQuantile(0.5, latency)) : null,
      p99_ms: latency ? toMs(histogramQuantile(0.99, latency)) : null,
    });
  }
  routes.sort((a, b) => b.requests_per_s - a.requests_per_s || (a.route < b.route ? -1 : 1));
  const all = histogramSum(latencies);
  const commit = after.commit ? histogramDelta(before.commit, after.commit) : undefined;
  const replication = after.replication ? histogramDelta(before.replication, after.replication) : undefined;
  return {
    at: new Date(after.at_ms).toISOString(),
    at_ms: after.at_ms,
    window_s: Math.round(window_s * 1000) / 1000,
    requests_per_s: perSecond(requests, window_s),
    server_errors_per_s: perSecond(serverErrors, window_s),
    client_errors_per_s: perSecond(clientErrors, window_s),
    p50_ms: toMs(histogramQuantile(0.5, all)),
    p99_ms: toMs(histogramQuantile(0.99, all)),
    commit_p50_ms: commit ? toMs(histogramQuantile(0.5, commit)) : null,
    commit_p99_ms: commit ? toMs(histogramQuantile(0.99, commit)) : null,
    replication_p50_ms: replication ? toMs(histogramQuantile(0.5, replication)) : null,
    replication_p99_ms: replication ? toMs(histogramQuantile(0.99, replication)) : null,
    activations_per_s: perSecond(after.activations - before.activations, window_s),
    actors_active: after.actors_active,
    mailbox_messages: after.mailbox_messages,
    routes,
  };
}
