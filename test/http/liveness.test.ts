import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock, PublishedEvent } from '../../runtime/index.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/** Liveness over the real socket (spec doc 1 §4.8, docs/api/liveness.md). */
let t: TestNode;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;
const events: PublishedEvent[] = [];
let entityCounter = 0;

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
  t.node.runtime.events.on('event', (event: PublishedEvent) => events.push(event));
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
});
afterAll(async () => {
  await t?.destroy();
});

const clock = () => t.clock as ManualClock;
const newEntity = () => `device/${++entityCounter}`;
const entityPath = (entity_id: string, suffix = '') => `/api/v1/liveness/${encodeURIComponent(entity_id)}${suffix}`;

function heartbeat(body: Record<string, unknown>, token = alice.token) {
  return t.request('POST', '/api/v1/liveness', { token, body });
}
function get(path: string, token = alice.token) {
  return t.request('GET', path, { token });
}
function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}
/**
 * Waits (bounded) for a condition that depends on LMDB commits and outbox
 * delivery, not on time. advance(0) fires timers the runtime armed after a
 * commit that landed once the clock had already moved (time does not move).
 */
async function until(condition: () => boolean | Promise<boolean>, what: string, rounds = 500) {
  for (let i = 0; i < rounds; i++) {
    if (await condition()) return;
    clock().advance(0);
    await settle(2);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`timed out waiting for ${what}`);
}
async function advance(ms: number) {
  clock().advance(ms);
  await settle();
}
function eventsOf(type: string, entity_id: string) {
  return events.filter((e) => e.type === type && (e.data as { entity_id: string }).entity_id === entity_id).map((e) => e.data as Record<string, unknown>);
}
async function listed(query = '', token = alice.token) {
  const res = await get(`/api/v1/liveness${query}`, token);
  expect(res.status, res.text).toBe(200);
  return res.body as { entities: { entity_id: string; alive: boolean; last_seen_ms: number; uptime: number }[]; total_matched: number };
}

describe('POST /api/v1/liveness and GET /api/v1/liveness/{entity_id}', () => {
  it('records a heartbeat and answers the HeartbeatAck; the status carries the latest values and summary', async () => {
    const id = newEntity();
    const now = clock().now();
    const ack = await heartbeat({ entity_id: id, client_timestamp_ms: now - 35, metadata: { version: '1.2.3' }, labels: { env: 'prod' }, unknown_field: 1 });
    expect(ack.status, ack.text).toBe(200);
    expect(ack.body).toEqual({ alive: true, entity_id: id, client_timestamp_ms: now - 35, network_delay_ms: 35, server_timestamp_ms: now });

    const bare = await heartbeat({ entity_id: newEntity() });
    expect(bare.body).toMatchObject({ alive: true, client_timestamp_ms: null, network_delay_ms: null });

    await advance(1000);
    const status = await get(entityPath(id));
    expect(status.status, status.text).toBe(200);
    expect(status.body).toMatchObject({
      alive: true,
      entity_id: id,
      labels: { env: 'prod' },
      metadata: { version: '1.2.3' },
      last_seen_server_ms: now,
      last_seen_client_ms: now - 35,
      latency_ms: 35,
      network_delay_ms: 35,
      summary: {
        status: 'alive',
        first_seen_ms: now,
        grace_ms: 30_000,
        dead_after_ms: now + 30_000,
        heartbeat_count: 1,
        uptime_24h: { percentage: 100, outages: 0, downtime_seconds: 0 },
        latency_recent: { samples: 1, avg_ms: 35 },
      },
    });
  });

  it('answers 404 for an unknown entity and for another tenant\'s entity', async () => {
    const id = newEntity();
    expect((await heartbeat({ entity_id: id })).status).toBe(200);
    expectError(await get(entityPath('never-seen')), 404, 'not_found');
    for (const suffix of ['', '/history', '/aggregations', '/latency', '/uptime']) expectError(await get(entityPath(id, suffix), bob.token), 404, 'not_found');
    expectError(await t.request('DELETE', entityPath(id), { token: bob.token }), 404, 'not_found');
    expect((await get(entityPath(id))).status).toBe(200);
  });

  it('rejects bad heartbeat bodies with 400 and the error shape', async () => {
    const cases: unknown[] = [
      {},
      { entity_id: '' },
      { entity_id: 42 },
      { entity_id: 'x'.repeat(257) },
      { entity_id: 'bad\u0001id' },
      { entity_id: 'a', client_timestamp_ms: '123' },
      { entity_id: 'a', client_timestamp_ms: -1 },
      { entity_id: 'a', client_timestamp_ms: 1.5 },
      { entity_id: 'a', metadata: [1, 2] },
      { entity_id: 'a', metadata: 'text' },
      { entity_id: 'a', metadata: { blob: 'x'.repeat(17 * 1024) } },
      { entity_id: 'a', labels: { env: 5 } },
      { entity_id: 'a', labels: { ['k'.repeat(129)]: 'v' } },
      { entity_id: 'a', labels: { env: 'v'.repeat(257) } },
      { entity_id: 'a', labels: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v'])) },
    ];
    for (const body of cases) expectError(await heartbeat(body as Record<string, unknown>), 400, 'BAD_REQUEST');
    const detailed = await heartbeat({ entity_id: 'a', client_timestamp_ms: 'soon' });
    expect(detailed.body.details).toEqual([expect.objectContaining({ field: 'body.client_timestamp_ms' })]);
  });

  it('requires a bearer token', async () => {
    expectError(await t.request('POST', '/api/v1/liveness', { body: { entity_id: 'a' } }), 401, 'unauthorized');
    expectError(await t.request('GET', '/api/v1/liveness'), 401, 'unauthorized');
    expectError(await t.request('GET', entityPath('a', '/uptime')), 401, 'unauthorized');
  });
});

describe('status changes and anomalies (events)', () => {
  it('detects alive -> dead by the durable alarm, without any read, and dead -> alive on the next heartbeat', async () => {
    const id = newEntity();
    const start = clock().now();
    await heartbeat({ entity_id: id, labels: { team: 'a' } });
    expect(eventsOf('entity.status_changed', id)).toEqual([expect.objectContaining({ old_status: 'unknown', new_status: 'alive', tenant: alice.user_id })]);
    await advance(10_000);
    await heartbeat({ entity_id: id });
    await advance(29_999);
    expect(eventsOf('entity.status_changed', id)).toHaveLength(1);
    await advance(1);
    await until(() => eventsOf('entity.status_changed', id).length === 2, 'the dead event');
    expect(eventsOf('entity.status_changed', id)[1]).toMatchObject({
      entity_id: id,
      tenant: alice.user_id,
      old_status: 'alive',
      new_status: 'dead',
      changed_at_ms: start + 40_000,
      last_seen_ms: start + 10_000,
      labels: { team: 'a' },
    });
    // The index learnt it through the outbox.
    await until(async () => (await listed('?alive=false')).entities.some((e) => e.entity_id === id), 'the index');
    await advance(20_000);
    await heartbeat({ entity_id: id });
    expect(eventsOf('entity.status_changed', id)[2]).toMatchObject({ old_status: 'dead', new_status: 'alive', changed_at_ms: start + 60_000 });
    const uptime = await get(entityPath(id, '/uptime?windows=1h'));
    expect(uptime.body.uptime['1h']).toEqual({ percentage: 66.6667, outages: 1, downtime_seconds: 20 });
    await until(async () => (await listed('?alive=true')).entities.some((e) => e.entity_id === id), 'the index revival');
  });

  it('publishes entity.liveness_anomaly for a latency far outside the entity\'s recent distribution', async () => {
    const id = newEntity();
    for (let i = 0; i < 25; i++) {
      const now = clock().now();
      expect((await heartbeat({ entity_id: id, client_timestamp_ms: now - (20 + (i % 3)) })).status).toBe(200);
      await advance(1000);
    }
    expect(eventsOf('entity.liveness_anomaly', id)).toEqual([]);
    await heartbeat({ entity_id: id, client_timestamp_ms: clock().now() - 900 });
    const [anomaly] = eventsOf('entity.liveness_anomaly', id);
    expect(anomaly).toMatchObject({ entity_id: id, tenant: alice.user_id, latency_ms: 900, direction: 'high', window_samples: 25 });
    expect(anomaly.z_score).toBeGreaterThan(4);
  });
});

describe('series reads', () => {
  let id: string;
  let start: number;

  beforeAll(async () => {
    id = newEntity();
    // Align to the next hour so buckets are easy to name (then sign in again:
    // access tokens live 15 minutes).
    clock().advance(3_600_000 - (clock().now() % 3_600_000));
    for (const user of [alice, bob]) {
      const login = await t.request('POST', '/api/v1/auth/login', { body: { login: user.username, password: user.password } });
      expect(login.status, login.text).toBe(200);
      user.token = login.body.access_token;
    }
    start = clock().now();
    const latencies = [10, 20, 30, 40];
    for (const latency of latencies) {
      await heartbeat({ entity_id: id, client_timestamp_ms: clock().now() - latency });
      await advance(10_000);
    }
    await heartbeat({ entity_id: id }); // no client timestamp: no latency sample
  });

  it('history: from/to/limit with has_more and total_in_range', async () => {
    const all = await get(entityPath(id, '/history'));
    expect(all.status, all.text).toBe(200);
    expect(all.body).toEqual({
      entity_id: id,
      has_more: false,
      total_in_range: 5,
      samples: [
        { timestamp_ms: start, latency_ms: 10 },
        { timestamp_ms: start + 10_000, latency_ms: 20 },
        { timestamp_ms: start + 20_000, latency_ms: 30 },
        { timestamp_ms: start + 30_000, latency_ms: 40 },
        { timestamp_ms: start + 40_000, latency_ms: null },
      ],
    });
    const page = await get(entityPath(id, `/history?from=${start / 1000}&to=${(start + 30_000) / 1000}&limit=2`));
    expect(page.body).toMatchObject({ has_more: true, total_in_range: 4, samples: [{ timestamp_ms: start + 20_000 }, { timestamp_ms: start + 30_000 }] });
    const back = await get(entityPath(id, `/history?from=${start / 1000}&to=${(start + 20_000 - 1) / 1000}&limit=2`));
    expect(back.body).toMatchObject({ has_more: false, total_in_range: 2, samples: [{ timestamp_ms: start }, { timestamp_ms: start + 10_000 }] });
  });

  it('aggregations: every aggregation of both series, with range and bucket', async () => {
    const expected: Record<string, number> = { avg: 25, sum: 100, min: 10, max: 40, count: 4, first: 10, last: 40, range: 30, 'std.p': 11.18 };
    for (const [aggregation, value] of Object.entries(expected)) {
      const res = await get(entityPath(id, `/aggregations?aggregation=${aggregation}&range=3600&bucket=3600`));
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ entity_id: id, aggregation, series: 'latency', bucket_ms: 3_600_000 });
      expect(res.body.data).toHaveLength(1);
      expect(res.body.data[0].timestamp_ms).toBe(start);
      expect(res.body.data[0].value).toBeCloseTo(value, 2);
    }
    const beats = await get(entityPath(id, '/aggregations?series=heartbeat&aggregation=count&range=3600&bucket=20'));
    expect(beats.body).toMatchObject({ series: 'heartbeat', bucket_ms: 20_000 });
    expect(beats.body.data).toEqual([
      { timestamp_ms: start, value: 2 },
      { timestamp_ms: start + 20_000, value: 2 },
      { timestamp_ms: start + 40_000, value: 1 },
    ]);
    const defaults = await get(entityPath(id, '/aggregations'));
    expect(defaults.body).toMatchObject({ aggregation: 'avg', series: 'latency', bucket_ms: 3_600_000, data: [{ timestamp_ms: start, value: 25 }] });
  });

  it('latency: current value, stats and trend', async () => {
    const res = await get(entityPath(id, '/latency?range=3600&bucket=20'));
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      entity_id: id,
      current_ms: null,
      bucket_ms: 20_000,
      stats: { avg: 25, max: 40, min: 10, std_dev: 11.18 },
      trend: [
        { timestamp_ms: start, avg: 15 },
        { timestamp_ms: start + 20_000, avg: 35 },
      ],
    });
  });

  it('uptime per window, default 1h,24h,7d', async () => {
    const res = await get(entityPath(id, '/uptime'));
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      entity_id: id,
      uptime: {
        '1h': { percentage: 100, outages: 0, downtime_seconds: 0 },
        '24h': { percentage: 100, outages: 0, downtime_seconds: 0 },
        '7d': { percentage: 100, outages: 0, downtime_seconds: 0 },
      },
    });
  });

  it('rejects bad reads with 400', async () => {
    const bad = [
      '/aggregations?range=-1',
      '/aggregations?bucket=-5',
      '/aggregations?bucket=0',
      '/aggregations?range=abc',
      '/aggregations?range=604801',
      '/aggregations?aggregation=median',
      '/aggregations?series=cpu',
      '/latency?range=-3600',
      '/latency?bucket=0',
      '/history?from=-1',
      '/history?to=-1',
      '/history?limit=-1',
      '/history?limit=1001',
      `/history?from=${start / 1000 + 100}&to=${start / 1000}`,
      '/uptime?windows=3x',
      '/uptime?windows=1h,,24h',
      '/uptime?windows=0h',
      '/uptime?windows=-1h',
      '/uptime?windows=31d',
      '/uptime?windows=1h,2h,3h,4h,5h,6h,7h,8h,9h,10h,11h',
    ];
    for (const query of bad) {
      const res = await get(entityPath(id, query));
      expect(res.status, `${query}: ${res.text}`).toBe(400);
      expect(res.body).toMatchObject({ statusCode: 400, code: 'BAD_REQUEST', details: [expect.objectContaining({ field: expect.any(String) })] });
    }
  });
});

describe('GET /api/v1/liveness', () => {
  it('lists the tenant\'s entities with alive, uptime_below, range and limit filters', async () => {
    const carol = await t.newUser('carol');
    const ids = ['alpha', 'bravo', 'charlie'];
    for (const entity_id of ids) expect((await heartbeat({ entity_id }, carol.token)).status).toBe(200);
    // charlie stops; alpha and bravo keep beating every 10 s for 2 minutes.
    for (let i = 0; i < 12; i++) {
      await advance(10_000);
      for (const entity_id of ['alpha', 'bravo']) await heartbeat({ entity_id }, carol.token);
    }
    await until(async () => (await listed('?alive=false', carol.token)).total_matched === 1, 'charlie dead in the index');
    const all = await listed('', carol.token);
    expect(all.total_matched).toBe(3);
    // last_seen_ms is the latest heartbeat, for alive and dead entities alike.
    expect(all.entities.map((e) => e.last_seen_ms)).toEqual([clock().now(), clock().now(), clock().now() - 120_000]);
    expect(all.entities.map((e) => e.entity_id)).toEqual(ids);
    const charlie = all.entities[2];
    expect(charlie.alive).toBe(false);
    expect(charlie.uptime).toBe(25); // up for 30 s of 120 s
    expect(all.entities[0]).toMatchObject({ alive: true, uptime: 100 });
    expect((await listed('?uptime_below=99.5', carol.token)).entities.map((e) => e.entity_id)).toEqual(['charlie']);
    expect((await listed('?alive=true&limit=1', carol.token))).toEqual({ total_matched: 2, entities: [expect.objectContaining({ entity_id: 'alpha' })] });
    expect((await listed('?limit=0', carol.token))).toEqual({ total_matched: 3, entities: [] });
    // The last 60 s: charlie was down all of it.
    expect((await listed('?range=60&alive=false', carol.token)).entities[0].uptime).toBe(0);
    // Another tenant sees none of them.
    expect((await listed('', bob.token)).entities.map((e) => e.entity_id)).not.toContain('alpha');

    for (const query of ['?range=-1', '?limit=-1', '?limit=1001', '?uptime_below=150', '?uptime_below=-1', '?alive=maybe', '?range=2592001']) {
      const res = await get(`/api/v1/liveness${query}`, carol.token);
      expectError(res, 400, 'BAD_REQUEST');
    }
  });

  it('DELETE removes the entity, its reads and its list entry; a new heartbeat starts afresh', async () => {
    const id = newEntity();
    await heartbeat({ entity_id: id, client_timestamp_ms: clock().now() - 5 });
    await until(async () => (await listed()).entities.some((e) => e.entity_id === id), 'the entity in the index');
    const deleted = await t.request('DELETE', entityPath(id), { token: alice.token });
    expect(deleted.status, deleted.text).toBe(204);
    expect(deleted.text).toBe('');
    expectError(await get(entityPath(id)), 404, 'not_found');
    expectError(await get(entityPath(id, '/history')), 404, 'not_found');
    expectError(await t.request('DELETE', entityPath(id), { token: alice.token }), 404, 'not_found');
    await until(async () => !(await listed()).entities.some((e) => e.entity_id === id), 'the entity gone from the index');
    await advance(1000);
    await heartbeat({ entity_id: id });
    const status = await get(entityPath(id));
    expect(status.body.summary).toMatchObject({ heartbeat_count: 1, first_seen_ms: clock().now() });
    expect(status.body.latency_ms).toBeNull();
    await until(async () => (await listed()).entities.some((e) => e.entity_id === id), 'the new incarnation in the index');
  });
});
