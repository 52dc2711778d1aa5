import type { Sample } from './types.js';

export interface RouteTotal {
  route: string;
  requests: number;
  server_errors: number;
  client_errors: number;
}

/** Requests per route over the samples shown, busiest first. */
export function routeTotals(samples: Sample[]): RouteTotal[] {
  const totals = new Map<string, RouteTotal>();
  for (const sample of samples) {
    for (const r of sample.routes) {
      const t = totals.get(r.route) ?? { route: r.route, requests: 0, server_errors: 0, client_errors: 0 };
      t.requests += r.requests_per_s * sample.window_s;
      t.server_errors += r.server_errors_per_s * sample.window_s;
      t.client_errors += r.client_errors_per_s * sample.window_s;
      totals.set(r.route, t);
    }
  }
  return [...totals.values()].sort((a, b) => b.requests - a.requests);
}

/** The routes of the window with their counts and their latest p50/p99. */
export function RoutesTable({ samples, selected, onSelect }: { samples: Sample[]; selected: string | undefined; onSelect: (route: string) => void }) {
  const totals = routeTotals(samples);
  const latest = new Map<string, { p50_ms: number | null; p99_ms: number | null }>();
  for (const sample of samples) for (const r of sample.routes) latest.set(r.route, r);
  if (totals.length === 0) return <p>No request in this window yet.</p>;
  return (
    <table aria-label="Routes">
      <thead>
        <tr>
          <th>Route</th>
          <th>Requests</th>
          <th>5xx</th>
          <th>4xx</th>
          <th>Last p50 (ms)</th>
          <th>Last p99 (ms)</th>
        </tr>
      </thead>
      <tbody>
        {totals.slice(0, 15).map((t) => (
          <tr key={t.route} class={t.route === selected ? 'selected' : ''}>
            <td>
              <a href="#/health" onClick={(event) => (event.preventDefault(), onSelect(t.route))}>
                {t.route}
              </a>
            </td>
            <td>{Math.round(t.requests)}</td>
            <td>{Math.round(t.server_errors)}</td>
            <td>{Math.round(t.client_errors)}</td>
            <td>{latest.get(t.route)?.p50_ms ?? '-'}</td>
            <td>{latest.get(t.route)?.p99_ms ?? '-'}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
