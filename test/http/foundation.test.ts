import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/** The edge itself: probes, OpenAPI, metrics, the 404 shape, Idempotency-Key. */
let t: TestNode;
let user: Awaited<ReturnType<TestNode['newUser']>>;

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
  user = await t.newUser('found');
});
afterAll(async () => {
  await t?.destroy();
});

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}

describe('probes', () => {
  it('GET /health answers {status: ok}', async () => {
    const res = await t.request('GET', '/health');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('GET /health/ready answers 200 while serving', async () => {
    const res = await t.request('GET', '/health/ready');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready' });
  });
});

describe('GET /openapi.json', () => {
  it('is an OpenAPI 3 document with the auth and lock paths, their methods and schemas', async () => {
    const res = await t.request('GET', '/openapi.json');
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toMatch(/^3\.\d+\.\d+$/);
    expect(doc.info).toMatchObject({ title: expect.any(String), version: expect.any(String) });
    const paths = doc.paths as Record<string, Record<string, any>>;
    for (const path of ['/api/v1/auth/register', '/api/v1/auth/login', '/api/v1/auth/refresh', '/api/v1/auth/logout']) {
      expect(paths[path]?.post, path).toBeDefined();
    }
    expect(paths['/api/v1/auth/me']?.get).toBeDefined();
    const lock = paths['/api/v1/distributed-state/{namespace}/{key}/lock'];
    expect(lock).toBeDefined();
    expect(Object.keys(lock).sort()).toEqual(expect.arrayContaining(['delete', 'get', 'patch', 'post']));
    // Parameters, bodies, responses and security come from the route schemas.
    expect(lock.get.parameters.map((p: any) => p.name).sort()).toEqual(['key', 'namespace']);
    expect(lock.post.requestBody.content['application/json'].schema.required).toEqual(['owner_id']);
    expect(lock.post.responses['200']).toBeDefined();
    expect(lock.post.responses['409']).toBeDefined();
    expect(lock.delete.responses['204']).toBeDefined();
    expect(lock.get.security).toEqual([{ bearerAuth: [] }]);
    expect(paths['/api/v1/auth/register'].post.responses['201']).toBeDefined();
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    // Every $ref resolves inside the document.
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? [];
    for (const ref of new Set(refs)) {
      const pointer = JSON.parse(`{${ref}}`).$ref as string;
      expect(pointer.startsWith('#/'), pointer).toBe(true);
      let node: any = doc;
      for (const part of pointer.slice(2).split('/')) node = node?.[part];
      expect(node, pointer).toBeDefined();
    }
    // Operational endpoints are not part of the API document.
    expect(paths['/metrics']).toBeUndefined();
  });
});

describe('GET /metrics', () => {
  it('serves Prometheus text with HTTP request counts by route and actor metrics', async () => {
    // Some traffic to count: a lock acquire exercises the lock actor.
    expect((await t.request('POST', '/api/v1/distributed-state/m/k/lock', { token: user.token, body: { owner_id: 'a' } })).status).toBe(200);
    const res = await t.request('GET', '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = res.text;
    expect(text).toMatch(/^# TYPE http_requests_total counter$/m);
    expect(text).toMatch(/^http_requests_total\{method="POST",route="\/api\/v1\/distributed-state\/:namespace\/:key\/lock",status_code="200"\} \d+$/m);
    expect(text).toMatch(/^http_requests_total\{method="POST",route="\/api\/v1\/auth\/register",status_code="201"\} \d+$/m);
    expect(text).toMatch(/^actor_messages_total\{kind="lock"\} \d+$/m);
    expect(text).toMatch(/^actor_activations_total\{kind="lock"\} \d+$/m);
    expect(text).toMatch(/^actor_active \d+$/m);
    expect(text).toMatch(/^storage_commit_duration_seconds_count \d+$/m);
    expect(text).toMatch(/^actor_alarms_pending \d+$/m);
  });

  it('counts unmatched routes under one label, not the raw URL', async () => {
    await t.request('GET', '/no/such/route/12345');
    const text = (await t.request('GET', '/metrics')).text;
    expect(text).not.toContain('12345');
  });
});

describe('errors at the edge', () => {
  it('unknown routes are 404 with the error shape', async () => {
    const res = await t.request('GET', '/api/v1/nothing-here?x=1');
    expectError(res, 404, 'not_found');
    expect(res.body.message).toContain('/api/v1/nothing-here');
    expectError(await t.request('POST', '/api/v1/nothing-here', { body: {} }), 404, 'not_found');
  });

  it('a known path with an unsupported method is a 404 with the error shape', async () => {
    expectError(await t.request('PUT', '/api/v1/distributed-state/a/b/lock', { token: user.token, body: {} }), 404, 'not_found');
  });
});

describe('Idempotency-Key on POST', () => {
  const path = (key: string) => `/api/v1/distributed-state/idem/${key}/lock`;

  it('a retry with the same key and body replays the first answer, marked idempotent-replayed', async () => {
    const headers = { 'idempotency-key': 'acquire-1' };
    const first = await t.request('POST', path('k1'), { token: user.token, body: { owner_id: 'a', ttl_seconds: 60 }, headers });
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const released = await t.request('DELETE', path('k1'), { token: user.token, body: { lock_id: first.body.lock_id, owner_id: 'a' } });
    expect(released.status).toBe(204);
    // Ran again, this would take a new lock with fence token 2; the replay returns the stored answer.
    const retry = await t.request('POST', path('k1'), { token: user.token, body: { owner_id: 'a', ttl_seconds: 60 }, headers });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text);
    expect((await t.request('GET', path('k1'), { token: user.token })).body).toMatchObject({ is_locked: false, fence_token: 1 });
  });

  it('the same key with a different body is 409 idempotency_key_reused', async () => {
    const headers = { 'idempotency-key': 'acquire-2' };
    expect((await t.request('POST', path('k2'), { token: user.token, body: { owner_id: 'a' }, headers })).status).toBe(200);
    const reused = await t.request('POST', path('k2'), { token: user.token, body: { owner_id: 'b' }, headers });
    expectError(reused, 409, 'idempotency_key_reused');
    const otherPath = await t.request('POST', path('k3'), { token: user.token, body: { owner_id: 'a' }, headers });
    expectError(otherPath, 409, 'idempotency_key_reused');
    expect((await t.request('GET', path('k3'), { token: user.token })).body.is_locked).toBe(false);
  });

  it('a stored 4xx answer is replayed too', async () => {
    expect((await t.request('POST', path('k4'), { token: user.token, body: { owner_id: 'holder' } })).status).toBe(200);
    const headers = { 'idempotency-key': 'acquire-4' };
    const first = await t.request('POST', path('k4'), { token: user.token, body: { owner_id: 'b' }, headers });
    expectError(first, 409, 'lock_held');
    const retry = await t.request('POST', path('k4'), { token: user.token, body: { owner_id: 'b' }, headers });
    expectError(retry, 409, 'lock_held');
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
  });

  it('keys are scoped to the tenant: another user with the same key runs its own request', async () => {
    const other = await t.newUser('idem');
    const headers = { 'idempotency-key': 'shared-key' };
    const mine = await t.request('POST', path('k5'), { token: user.token, body: { owner_id: 'a' }, headers });
    const theirs = await t.request('POST', path('k5'), { token: other.token, body: { owner_id: 'a' }, headers });
    expect(mine.status).toBe(200);
    expect(theirs.status).toBe(200);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect(theirs.body.lock_id).not.toBe(mine.body.lock_id);
  });

  it('concurrent retries with one key run the request once', async () => {
    const headers = { 'idempotency-key': 'acquire-6' };
    const results = await Promise.all(
      Array.from({ length: 10 }, () => t.request('POST', path('k6'), { token: user.token, body: { owner_id: 'a' }, headers })),
    );
    const ran = results.filter((r) => r.status === 200 && r.headers.get('idempotent-replayed') === null);
    expect(ran).toHaveLength(1);
    for (const r of results) {
      if (r.status === 200) expect(r.body.lock_id).toBe(ran[0].body.lock_id);
      else expectError(r, 409, 'idempotency_in_progress');
    }
  });

  it('keys are forgotten after 24 hours (durable alarm); then the key may carry a new request', async () => {
    const headers = { 'idempotency-key': 'acquire-expiry' };
    const first = await t.request('POST', path('k8'), { token: user.token, body: { owner_id: 'a', ttl_seconds: 60 }, headers });
    expect(first.status).toBe(200);
    (t.clock as ManualClock).advance(24 * 3600_000 - 1000);
    const login = await t.request('POST', '/api/v1/auth/login', { body: { login: user.username, password: user.password } });
    user.token = login.body.access_token;
    expectError(await t.request('POST', path('k8'), { token: user.token, body: { owner_id: 'b' }, headers }), 409, 'idempotency_key_reused');
    (t.clock as ManualClock).advance(1000);
    const later = await t.request('POST', path('k8'), { token: user.token, body: { owner_id: 'b' }, headers });
    expect(later.status, later.text).toBe(200);
    expect(later.headers.get('idempotent-replayed')).toBeNull();
    expect(later.body).toMatchObject({ owner_id: 'b', fence_token: 2 });
  });

  it('stored answers survive a restart', async () => {
    let node = await startTestNode({ clock: 'manual' });
    try {
      const owner = await node.newUser('idemrestart');
      const headers = { 'idempotency-key': 'durable-1' };
      const first = await node.request('POST', path('r1'), { token: owner.token, body: { owner_id: 'a' }, headers });
      expect(first.status).toBe(200);
      await node.stop();
      node = await startTestNode({ clock: 'manual', dataDir: node.dataDir });
      const retry = await node.request('POST', path('r1'), { token: owner.token, body: { owner_id: 'a' }, headers });
      expect(retry.status).toBe(200);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.text).toBe(first.text);
    } finally {
      await node.destroy();
    }
  });

  it('an invalid Idempotency-Key header is a 400', async () => {
    const res = await t.request('POST', path('k7'), { token: user.token, body: { owner_id: 'a' }, headers: { 'idempotency-key': 'x'.repeat(300) } });
    expectError(res, 400, 'BAD_REQUEST');
  });
});
