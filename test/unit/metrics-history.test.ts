import client from 'prom-client';
import { describe, expect, it } from 'vitest';
import { MetricsHistory } from '../../http/metrics-history.js';

/** http/metrics-history.ts: readings of a real prom-client registry become samples, in a bounded ring. */
function registry() {
  const r = new client.Registry();
  const requests = new client.Counter({ name: 'http_requests_total', help: 'h', labelNames: ['method', 'route', 'status_code'], registers: [r] });
  const latency = new client.Histogram({ name: 'http_request_duration_seconds', help: 'h', labelNames: ['method', 'route'], buckets: [0.001, 0.01], registers: [r] });
  const activations = new client.Counter({ name: 'actor_activations_total', help: 'h', labelNames: ['kind'], registers: [r] });
  return { r, requests, latency, activations };
}

describe('MetricsHistory', () => {
  it('samples the window between readings, per route, with rates and quantiles', async () => {
    const { r, requests, latency, activations } = registry();
    const history = new MetricsHistory(r, { intervalMs: 1_000, historySamples: 10, routesPerSample: 10 });
    await history.sampleNow();
    expect(history.since(0)).toEqual([]);
    requests.inc({ method: 'GET', route: '/a', status_code: 200 }, 3);
    requests.inc({ method: 'GET', route: '/a', status_code: 503 }, 1);
    requests.inc({ method: 'POST', route: '/b', status_code: 404 }, 2);
    for (let i = 0; i < 4; i++) latency.observe({ method: 'GET', route: '/a' }, 0.005);
    activations.inc({ kind: 'lock' }, 2);
    activations.inc({ kind: 'user' }, 1);
    await history.sampleNow();
    const [sample] = history.since(0);
    // The window is a few ms here: compare the rates with each other (6 requests, 1 5xx, 2 4xx, 3 activations).
    const relative = (rate: number) => rate / sample.server_errors_per_s;
    expect(sample.server_errors_per_s).toBeGreaterThan(0);
    expect(relative(sample.requests_per_s)).toBeCloseTo(6, 2);
    expect(relative(sample.client_errors_per_s)).toBeCloseTo(2, 2);
    expect(relative(sample.activations_per_s)).toBeCloseTo(3, 2);
    expect(sample.routes.map((route) => route.route)).toEqual(['GET /a', 'POST /b']);
    expect(sample.routes[0].p50_ms).toBeCloseTo(5.5);
    expect(sample.routes[1].p50_ms).toBeNull();
    // Metrics the registry does not have (embedded: no replication) are null, not zero.
    expect(sample.commit_p50_ms).toBeNull();
    expect(sample.replication_p50_ms).toBeNull();
    expect(sample.actors_active).toBeNull();
    expect(history.since(sample.at_ms)).toEqual([]);
  });

  it('keeps at most historySamples samples and routesPerSample routes', async () => {
    const { r, requests } = registry();
    const history = new MetricsHistory(r, { intervalMs: 1_000, historySamples: 3, routesPerSample: 2 });
    await history.sampleNow();
    for (let i = 0; i < 5; i++) {
      for (const route of ['/a', '/b', '/c']) requests.inc({ method: 'GET', route, status_code: 200 }, route === '/c' ? 3 : 1);
      await history.sampleNow();
    }
    const samples = history.since(0);
    expect(samples).toHaveLength(3);
    expect(samples[0].routes.map((route) => route.route)).toEqual(['GET /c', 'GET /a']);
  });
});
