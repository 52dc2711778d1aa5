import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** GET /admin/metrics/recent: the node's own metrics, sampled every METRICS_SAMPLE_INTERVAL_MS (250 ms here). */
const ADMIN_EMAIL = 'root@example.com';
const ADMIN_PASSWORD = 'admin password 123';

let t: TestNode;
let adminToken: string;

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD, metricsSampleIntervalMs: 250, metricsHistorySeconds: 60 } });
  adminToken = await t.loginAdmin();
});
afterAll(async () => {
  await t?.destroy();
});

const recent = (since?: number) => t.request('GET', `/admin/metrics/recent${since === undefined ? '' : `?since=${since}`}`, { token: adminToken });

async function until<T>(probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('GET /admin/metrics/recent', () => {
  it('needs an administrator', async () => {
    expect((await t.request('GET', '/admin/metrics/recent')).status).toBe(401);
    const user = await t.newUser('plain');
    const res = await t.request('GET', '/admin/metrics/recent', { token: user.token });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('forbidden');
  });

  it('shows the requests made, per route, with their latency, errors and the activations they caused', async () => {
    const first = await recent();
    expect(first.status, first.text).toBe(200);
    expect(first.body.interval_ms).toBe(250);
    expect(first.body.history_seconds).toBe(60);
    const since = first.body.samples.at(-1)?.at_ms ?? 0;
    // Locks: each key is an actor activated on its first message; a second take is a 409 (client error).
    for (let i = 0; i < 5; i++) {
      const taken = await t.request('POST', `/api/v1/distributed-state/metrics/k${i}/lock`, { token: adminToken, body: { owner_id: 'a' } });
      expect([200, 201], taken.text).toContain(taken.status);
      expect((await t.request('POST', `/api/v1/distributed-state/metrics/k${i}/lock`, { token: adminToken, body: { owner_id: 'b' } })).status).toBe(409);
    }
    const LOCK = 'POST /api/v1/distributed-state/:namespace/:key/lock';
    // Counts over the samples: a rate times its window.
    const total = (all: any[], pick: (s: any) => number) => Math.round(all.reduce((n, s) => n + pick(s) * s.window_s, 0));
    const ofLock = (s: any) => s.routes.find((r: any) => r.route === LOCK);
    // The requests may fall into several windows: wait until the windows holding all of them were sampled.
    const samples = await until(async () => {
      const all = (await recent(since)).body.samples as any[];
      return total(all, (s) => ofLock(s)?.requests_per_s ?? 0) >= 10 && total(all, (s) => s.activations_per_s) >= 5 ? all : undefined;
    });
    for (const sample of samples) expect(sample.at_ms).toBeGreaterThan(since);
    const lockWindows = samples.map(ofLock).filter((r) => r !== undefined);
    expect(total(samples, (s) => ofLock(s)?.requests_per_s ?? 0)).toBe(10);
    expect(total(samples, (s) => ofLock(s)?.client_errors_per_s ?? 0)).toBe(5);
    expect(total(samples, (s) => ofLock(s)?.server_errors_per_s ?? 0)).toBe(0);
    expect(lockWindows.every((r: any) => typeof r.p50_ms === 'number' && r.p99_ms >= r.p50_ms)).toBe(true);
    expect(samples.some((s) => s.commit_p50_ms !== null)).toBe(true);
    expect(samples.every((s) => s.replication_p50_ms === null)).toBe(true);
    expect(samples.every((s) => typeof s.actors_active === 'number' && typeof s.mailbox_messages === 'number')).toBe(true);
  });

  it('refuses a since that is not a non-negative integer with 400', async () => {
    for (const bad of ['-1', 'soon', '1.5', '1e999']) {
      const res = await t.request('GET', `/admin/metrics/recent?since=${bad}`, { token: adminToken });
      expect(res.status, bad).toBe(400);
      expect(res.body.code).toBe('BAD_REQUEST');
    }
  });
});
