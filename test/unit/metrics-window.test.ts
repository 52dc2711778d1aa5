import { describe, expect, it } from 'vitest';
import { histogramDelta, histogramQuantile, histogramSum, sampleBetween, type HistogramReading, type Reading } from '../../http/metrics-window.js';

/** The recent-metrics arithmetic (http/metrics-window.ts): rates and quantiles between two registry readings. */
const hist = (pairs: [number, number][]): HistogramReading => ({ buckets: pairs.map(([le, count]) => ({ le, count })), count: pairs[pairs.length - 1][1] });

describe('histogramQuantile', () => {
  it('interpolates inside the bucket holding the rank, as Prometheus does', () => {
    // 10 observations: 4 up to 1, 6 more up to 2.
    const h = hist([[1, 4], [2, 10], [Infinity, 10]]);
    expect(histogramQuantile(0.5, h)).toBeCloseTo(1 + (5 - 4) / 6);
    expect(histogramQuantile(0.2, h)).toBeCloseTo(0.5);
    expect(histogramQuantile(1, h)).toBeCloseTo(2);
  });

  it('gives the highest finite bound for a rank in the +Inf bucket, null when empty', () => {
    expect(histogramQuantile(0.99, hist([[1, 1], [2, 1], [Infinity, 100]]))).toBe(2);
    expect(histogramQuantile(0.5, hist([[1, 0], [Infinity, 0]]))).toBeNull();
  });

  it('skips empty buckets below the rank', () => {
    expect(histogramQuantile(0.5, hist([[1, 0], [2, 0], [4, 2], [Infinity, 2]]))).toBeCloseTo(3);
  });
});

describe('histogramDelta and histogramSum', () => {
  it('subtracts bucket by bucket; an absent earlier reading counts from zero', () => {
    expect(histogramDelta(hist([[1, 2], [Infinity, 3]]), hist([[1, 5], [Infinity, 9]]))).toEqual(hist([[1, 3], [Infinity, 6]]));
    expect(histogramDelta(undefined, hist([[1, 5], [Infinity, 9]]))).toEqual(hist([[1, 5], [Infinity, 9]]));
  });
  it('adds histograms with the same bounds', () => {
    expect(histogramSum([hist([[1, 1], [Infinity, 2]]), hist([[1, 3], [Infinity, 3]])])).toEqual(hist([[1, 4], [Infinity, 5]]));
  });
});

describe('sampleBetween', () => {
  const reading = (mono_ms: number, routes: Reading['routes'], extra: Partial<Reading> = {}): Reading => ({
    at_ms: 1_700_000_000_000 + mono_ms,
    mono_ms,
    routes,
    activations: 0,
    actors_active: null,
    mailbox_messages: null,
    ...extra,
  });

  it('turns counter deltas into rates per second and latency deltas into quantiles, per route and in total', () => {
    const before = reading(0, new Map([['GET /a', { requests: 10, server_errors: 1, client_errors: 0, latency: hist([[0.001, 10], [0.01, 10], [Infinity, 10]]) }]]), {
      activations: 5,
      commit: hist([[0.001, 3], [Infinity, 3]]),
    });
    const after = reading(
      2_000,
      new Map([
        // 20 more requests in 2 s, 2 of them 5xx and 4 of them 4xx, all between 1 and 10 ms.
        ['GET /a', { requests: 30, server_errors: 3, client_errors: 4, latency: hist([[0.001, 10], [0.01, 30], [Infinity, 30]]) }],
        // A route seen for the first time: all of its counts are in the window.
        ['POST /b', { requests: 4, server_errors: 0, client_errors: 0, latency: hist([[0.001, 4], [0.01, 4], [Infinity, 4]]) }],
        ['GET /idle', { requests: 0, server_errors: 0, client_errors: 0 }],
      ]),
      { activations: 9, actors_active: 12, mailbox_messages: 3, commit: hist([[0.001, 5], [Infinity, 7]]) },
    );
    const sample = sampleBetween(before, after);
    expect(sample.window_s).toBe(2);
    expect(sample.at).toBe(new Date(1_700_000_002_000).toISOString());
    expect(sample.requests_per_s).toBe(12);
    expect(sample.server_errors_per_s).toBe(1);
    expect(sample.client_errors_per_s).toBe(2);
    expect(sample.activations_per_s).toBe(2);
    expect(sample.actors_active).toBe(12);
    expect(sample.mailbox_messages).toBe(3);
    expect(sample.routes.map((r) => r.route)).toEqual(['GET /a', 'POST /b']);
    expect(sample.routes[0]).toMatchObject({ requests_per_s: 10, server_errors_per_s: 1, client_errors_per_s: 2 });
    expect(sample.routes[0].p50_ms).toBeCloseTo(5.5);
    expect(sample.routes[1].p50_ms).toBeCloseTo(0.5);
    // 24 requests in total: 4 at up to 1 ms, 20 between 1 and 10 ms.
    expect(sample.p50_ms).toBeCloseTo(1 + (9 * (12 - 4)) / 20);
    // 4 commits: 2 up to 1 ms, 2 beyond the last bound.
    expect(sample.commit_p50_ms).toBeCloseTo(1);
    expect(sample.commit_p99_ms).toBe(1);
    expect(sample.replication_p50_ms).toBeNull();
  });

  it('a window with no request has zero rates and no latency', () => {
    const routes = new Map([['GET /a', { requests: 3, server_errors: 0, client_errors: 0 }]]);
    const sample = sampleBetween(reading(0, routes), reading(1_000, routes));
    expect(sample).toMatchObject({ requests_per_s: 0, p50_ms: null, p99_ms: null, routes: [] });
  });
});
