import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** The administrators' entity list with anomalies (GET /admin/liveness) over the real socket. */
const ADMIN_EMAIL = 'liveness-admin@example.com';
const ADMIN_PASSWORD = 'liveness admin password';

let t: TestNode;
let adminToken: string;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
  adminToken = await t.loginAdmin();
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
});
afterAll(async () => {
  await t?.destroy();
});

const admin = (path: string) => t.request('GET', path, { token: adminToken });
/** A heartbeat whose latency is about `latency_ms` (a client clock that far behind). */
const heartbeat = (token: string, entity_id: string, latency_ms: number, labels?: Record<string, string>) =>
  t.request('POST', '/api/v1/liveness', { token, body: { entity_id, client_timestamp_ms: Date.now() - latency_ms, labels } });

describe('GET /admin/liveness', () => {
  it("lists a tenant's entities with their latency anomalies", async () => {
    // A steady second of latency (the rule's floor is 5% of the mean: jitter of the test itself
    // stays far below), then one heartbeat five seconds late.
    for (let i = 0; i < 25; i++) expect((await heartbeat(alice.token, 'sensor-1', 1000, { site: 'north' })).status).toBe(200);
    await heartbeat(alice.token, 'sensor-1', 5000);
    await heartbeat(alice.token, 'sensor-2', 0);
    await heartbeat(bob.token, 'bobs-sensor', 0);

    await expect.poll(async () => (await admin(`/admin/liveness?tenant=${alice.user_id}`)).body.total_matched).toBe(2);
    const list = await admin(`/admin/liveness?tenant=${alice.user_id}`);
    expect(list.status).toBe(200);
    const [one, two] = list.body.entities;
    expect(one).toMatchObject({ entity_id: 'sensor-1', alive: true, labels: { site: 'north' }, anomaly_count: 1, uptime: 100 });
    expect(one.anomalies).toHaveLength(1);
    expect(one.anomalies[0]).toMatchObject({ direction: 'high', window_samples: 25 });
    expect(one.anomalies[0].latency_ms).toBeGreaterThanOrEqual(5000);
    expect(two).toMatchObject({ entity_id: 'sensor-2', anomaly_count: 0, anomalies: [] });

    expect((await admin(`/admin/liveness?tenant=${alice.user_id}&alive=false`)).body).toEqual({ entities: [], total_matched: 0 });
    await expect.poll(async () => (await admin(`/admin/liveness?tenant=${bob.user_id}`)).body.entities?.map((e: { entity_id: string }) => e.entity_id)).toEqual(['bobs-sensor']);
  });

  it('is for administrators only, and checks its query', async () => {
    expect((await t.request('GET', `/admin/liveness?tenant=${alice.user_id}`, { token: alice.token })).status).toBe(403);
    expect((await t.request('GET', `/admin/liveness?tenant=${alice.user_id}`)).status).toBe(401);
    expect((await admin('/admin/liveness')).status).toBe(400);
    expect((await admin(`/admin/liveness?tenant=${alice.user_id}&limit=101`)).status).toBe(400);
  });
});
