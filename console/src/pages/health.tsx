import { useMemo, useState } from 'preact/hooks';
import { seriesColor, TimeChart, type ChartSeries } from '../components/time-chart.js';
import { routeTotals, RoutesTable } from './health/routes-table.js';
import type { Sample } from './health/types.js';
import { useRecentMetrics } from './health/use-recent-metrics.js';

const line = (i: number, label: string, samples: Sample[], pick: (s: Sample) => number | null): ChartSeries => ({
  label,
  color: seriesColor(i),
  values: samples.map(pick),
});

/**
 * Health and throughput of the node serving the console, from its own metrics
 * (GET /admin/metrics/recent, polled every sample interval): request and error rates, latency
 * overall and per route, commit and replication latency, activations and mailbox depth.
 */
export function HealthPage() {
  const { samples, intervalMs, error } = useRecentMetrics();
  const [chosen, setChosen] = useState<string | undefined>(undefined);
  const times = useMemo(() => samples.map((s) => s.at_ms / 1000), [samples]);
  const busiest = useMemo(() => routeTotals(samples)[0]?.route, [samples]);
  const route = chosen ?? busiest;
  const replicated = samples.some((s) => s.replication_p50_ms !== null);

  const charts = useMemo(() => {
    const ofRoute = (s: Sample) => s.routes.find((r) => r.route === route);
    return {
      requests: [
        line(0, 'requests/s', samples, (s) => s.requests_per_s),
        line(1, '5xx/s', samples, (s) => s.server_errors_per_s),
        line(2, '4xx/s', samples, (s) => s.client_errors_per_s),
      ],
      latency: [line(0, 'p50', samples, (s) => s.p50_ms), line(1, 'p99', samples, (s) => s.p99_ms)],
      route: [line(0, 'p50', samples, (s) => ofRoute(s)?.p50_ms ?? null), line(1, 'p99', samples, (s) => ofRoute(s)?.p99_ms ?? null)],
      commit: [
        line(0, 'commit p50', samples, (s) => s.commit_p50_ms),
        line(1, 'commit p99', samples, (s) => s.commit_p99_ms),
        ...(replicated ? [line(2, 'replication p50', samples, (s) => s.replication_p50_ms), line(3, 'replication p99', samples, (s) => s.replication_p99_ms)] : []),
      ],
      actors: [line(0, 'actors in memory', samples, (s) => s.actors_active), line(3, 'activations/s', samples, (s) => s.activations_per_s)],
      mailbox: [line(1, 'queued messages', samples, (s) => s.mailbox_messages)],
    };
  }, [samples, route, replicated]);

  return (
    <div class="health">
      <h1>Health and throughput</h1>
      <p>
        This node's own metrics, sampled every {intervalMs ? `${intervalMs / 1000} s` : '...'}; {samples.length} sample{samples.length === 1 ? '' : 's'} shown.
        {replicated ? '' : ' No replication latency: this node has no followers (embedded, or it leads no replicated partition).'}
      </p>
      {error ? (
        <p role="alert" class="error">
          {error.message}
        </p>
      ) : null}
      <div class="charts">
        <TimeChart title="Requests and errors" unit="per second" times={times} series={charts.requests} />
        <TimeChart title="Latency, every route" unit="ms" times={times} series={charts.latency} />
        <TimeChart title={`Latency of ${route ?? 'the busiest route'}`} unit="ms" times={times} series={charts.route} />
        <TimeChart title={replicated ? 'Commit and replication latency' : 'Commit latency'} unit="ms" times={times} series={charts.commit} />
        <TimeChart title="Actors and activations" unit="count, per second" times={times} series={charts.actors} />
        <TimeChart title="Mailbox depth" unit="messages" times={times} series={charts.mailbox} />
      </div>
      <h2>Routes</h2>
      <RoutesTable samples={samples} selected={route} onSelect={setChosen} />
    </div>
  );
}
