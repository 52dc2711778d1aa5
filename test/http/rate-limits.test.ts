import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';
import { settle, untilWithClock } from '../helpers/runtime.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/** Rate limits over the real socket: the admin API and enforcement at the edge (spec doc 1 §4.12; docs/api/rate-limits.md). */
let t: TestNode;
let receiver: Receiver;
let adminToken: string;
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestNode({ clock: 'manual', config: { accessTokenTtlSeconds: 86_400, adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } });
  adminToken = login.body.access_token;
});
afterAll(async () => {
  await t?.destroy();
  await receiver?.close();
});

const clock = () => t.clock as ManualClock;
const admin = (method: string, path: string, body?: unknown) => t.request(method, path, { token: adminToken, body });
const enc = encodeURIComponent;


const until = <T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, rounds?: number) =>
  untilWithClock(clock, check, what, rounds);

describe('admin API: access', () => {
  it('needs a bearer (401) and the admin role (403 forbidden)', async () => {
    expectError(await t.request('GET', '/admin/rate-limits'), 401, 'unauthorized');
    const user = await t.newUser('plain');
    expectError(await t.request('GET', '/admin/rate-limits', { token: user.token }), 403, 'forbidden');
    expectError(await t.request('PUT', '/admin/rate-limits/tiers/default', { token: user.token, body: { max_requests: 1, window_seconds: 1 } }), 403, 'forbidden');
    expectError(await t.request('POST', '/admin/rate-limits/cache/clear', { token: user.token }), 403, 'forbidden');
  });

  it('is exempt from limits for a platform admin (no RateLimit headers)', async () => {
    const res = await admin('GET', '/admin/rate-limits');
    expect(res.status).toBe(200);
    expect(res.headers.get('ratelimit')).toBeNull();
  });
});

describe('default tier', () => {
  it('shows the configured default until set, then the stored one', async () => {
    const before = await admin('GET', '/admin/rate-limits/tiers/default');
    expect(before.body).toEqual({ id: 'default', name: 'default', tier_type: 'default', max_requests: 1_000_000_000, window_seconds: 60, created_at: null, updated_at: null });
    const put = await admin('PUT', '/admin/rate-limits/tiers/default', { max_requests: 900_000_000, window_seconds: 120 });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ id: 'default', tier_type: 'default', max_requests: 900_000_000, window_seconds: 120 });
    expect(put.body.created_at).toMatch(/Z$/);
    expect((await admin('GET', '/admin/rate-limits/tiers/default')).body).toEqual(put.body);
    expect((await admin('GET', '/admin/rate-limits')).body.default_tier).toEqual(put.body);
  });

  it('refuses out-of-range values with 400 and changes nothing', async () => {
    const before = (await admin('GET', '/admin/rate-limits/tiers/default')).body;
    expectError(await admin('PUT', '/admin/rate-limits/tiers/default', { max_requests: 0, window_seconds: 60 }), 400, 'BAD_REQUEST');
    expectError(await admin('PUT', '/admin/rate-limits/tiers/default', { max_requests: 10, window_seconds: 86_401 }), 400, 'BAD_REQUEST');
    expectError(await admin('PUT', '/admin/rate-limits/tiers/default', { max_requests: 1.5, window_seconds: 60 }), 400, 'BAD_REQUEST');
    expectError(await admin('PUT', '/admin/rate-limits/tiers/default', { window_seconds: 60 }), 400, 'BAD_REQUEST');
    expect((await admin('GET', '/admin/rate-limits/tiers/default')).body).toEqual(before);
  });
});

describe('endpoint tiers', () => {
  const path = '/api/v1/jobs/{job_id}';
  it('create, read (URL-encoded template), change, list, delete', async () => {
    const created = await admin('POST', '/admin/rate-limits/tiers/endpoints', { endpoint_path: path, max_requests: 50, window_seconds: 60 });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ name: path, tier_type: 'endpoint', max_requests: 50, window_seconds: 60 });
    expect(created.body.id).toMatch(/^rlt_/);
    // The same endpoint under other parameter names or the router's :param form is the same tier.
    expectError(await admin('POST', '/admin/rate-limits/tiers/endpoints', { endpoint_path: '/api/v1/jobs/:id/', max_requests: 5, window_seconds: 1 }), 409, 'rate_limit_tier_exists');
    expect((await admin('GET', `/admin/rate-limits/tiers/endpoints/${enc(path)}`)).body).toEqual(created.body);
    expect((await admin('GET', `/admin/rate-limits/tiers/endpoints/${enc('/api/v1/jobs/{id}')}`)).body.id).toBe(created.body.id);
    const changed = await admin('PUT', `/admin/rate-limits/tiers/endpoints/${enc(path)}`, { max_requests: 70, window_seconds: 30 });
    expect(changed.body).toMatchObject({ id: created.body.id, name: path, max_requests: 70, window_seconds: 30 });
    const listed = await admin('GET', '/admin/rate-limits/tiers/endpoints?q=jobs');
    expect(listed.body.tiers.map((tier: { id: string }) => tier.id)).toContain(created.body.id);
    expect((await admin('GET', '/admin/rate-limits')).body.endpoint_tiers.map((tier: { id: string }) => tier.id)).toContain(created.body.id);
    expect((await admin('DELETE', `/admin/rate-limits/tiers/endpoints/${enc(path)}`)).status).toBe(204);
    expectError(await admin('GET', `/admin/rate-limits/tiers/endpoints/${enc(path)}`), 404, 'not_found');
    expectError(await admin('PUT', `/admin/rate-limits/tiers/endpoints/${enc(path)}`, { max_requests: 1, window_seconds: 1 }), 404, 'not_found');
    expectError(await admin('DELETE', `/admin/rate-limits/tiers/endpoints/${enc(path)}`), 404, 'not_found');
  });

  it('refuses a path that is not a template with 400', async () => {
    for (const endpoint_path of ['api/v1/x', '/api/v1/x?y=1', '/api/v1/a b', '/api/v1/{x']) {
      expectError(await admin('POST', '/admin/rate-limits/tiers/endpoints', { endpoint_path, max_requests: 5, window_seconds: 1 }), 400, 'BAD_REQUEST');
    }
    expectError(await admin('GET', `/admin/rate-limits/tiers/endpoints/${enc('no-slash')}`), 400, 'BAD_REQUEST');
  });

  it('lists with filters, sort and pagination; tier_type=default lists the default tier', async () => {
    for (let i = 1; i <= 5; i++) {
      expect((await admin('POST', '/admin/rate-limits/tiers/endpoints', { endpoint_path: `/api/v1/list-test/${i}`, max_requests: i * 10, window_seconds: 60 })).status).toBe(201);
    }
    const page1 = await admin('GET', '/admin/rate-limits/tiers/endpoints?q=list-test&sort_by=max_requests&sort_order=desc&page_size=2');
    expect(page1.body.pagination).toEqual({ page: 1, page_size: 2, total: 5, has_more: true });
    expect(page1.body.tiers.map((tier: { max_requests: number }) => tier.max_requests)).toEqual([50, 40]);
    const page3 = await admin('GET', '/admin/rate-limits/tiers/endpoints?q=list-test&sort_by=max_requests&sort_order=desc&page_size=2&page=3');
    expect(page3.body.pagination).toEqual({ page: 3, page_size: 2, total: 5, has_more: false });
    const filtered = await admin('GET', '/admin/rate-limits/tiers/endpoints?q=list-test&filter=max_requests:gte:30&filter=max_requests:lt:50');
    expect(filtered.body.tiers.map((tier: { name: string }) => tier.name).sort()).toEqual(['/api/v1/list-test/3', '/api/v1/list-test/4']);
    const inFilter = await admin('GET', `/admin/rate-limits/tiers/endpoints?filter=${enc('max_requests:in:10|20')}&q=list-test`);
    expect(inFilter.body.pagination.total).toBe(2);
    expectError(await admin('GET', '/admin/rate-limits/tiers/endpoints?filter=colour:eq:red'), 400, 'BAD_REQUEST');
    expectError(await admin('GET', '/admin/rate-limits/tiers/endpoints?filter=max_requests:near:3'), 400, 'BAD_REQUEST');
    expectError(await admin('GET', '/admin/rate-limits/tiers/endpoints?filter=max_requests:eq:many'), 400, 'BAD_REQUEST');
    expectError(await admin('GET', '/admin/rate-limits/tiers/endpoints?tier_type=weekly'), 400, 'BAD_REQUEST');
    const defaults = await admin('GET', '/admin/rate-limits/tiers/endpoints?tier_type=default');
    expect(defaults.body.tiers.map((tier: { tier_type: string }) => tier.tier_type)).toEqual(['default']);
  });
});

describe('module tiers', () => {
  it('create, read, change, list, delete; a bad module name is 400', async () => {
    const created = await admin('POST', '/admin/rate-limits/tiers/modules', { module: 'reports', max_requests: 9, window_seconds: 10 });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ name: 'reports', tier_type: 'module', max_requests: 9, window_seconds: 10 });
    expectError(await admin('POST', '/admin/rate-limits/tiers/modules', { module: 'reports', max_requests: 9, window_seconds: 10 }), 409, 'rate_limit_tier_exists');
    expectError(await admin('POST', '/admin/rate-limits/tiers/modules', { module: 'a/b', max_requests: 9, window_seconds: 10 }), 400, 'BAD_REQUEST');
    expect((await admin('GET', '/admin/rate-limits/tiers/modules/reports')).body).toEqual(created.body);
    expect((await admin('PUT', '/admin/rate-limits/tiers/modules/reports', { max_requests: 11, window_seconds: 10 })).body.max_requests).toBe(11);
    const listed = await admin('GET', '/admin/rate-limits/tiers/modules?filter=name:eq:reports');
    expect(listed.body.tiers).toHaveLength(1);
    expect((await admin('DELETE', '/admin/rate-limits/tiers/modules/reports')).status).toBe(204);
    expectError(await admin('GET', '/admin/rate-limits/tiers/modules/reports'), 404, 'not_found');
  });
});

describe('support tiers', () => {
  it('create, read, change, list, delete; reserved and taken names; a tier in use cannot go', async () => {
    const created = await admin('POST', '/admin/rate-limits/support-tiers', { name: 'gold', max_requests: 500, window_seconds: 60, description: 'Gold support' });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ name: 'gold', description: 'Gold support', max_requests: 500, window_seconds: 60 });
    expectError(await admin('POST', '/admin/rate-limits/support-tiers', { name: 'gold', max_requests: 1, window_seconds: 1 }), 409, 'rate_limit_tier_exists');
    const reserved = await admin('POST', '/admin/rate-limits/support-tiers', { name: 'default', max_requests: 1, window_seconds: 1 });
    expectError(reserved, 400, 'BAD_REQUEST');
    // A handler's detail names the request part too, as schema errors do.
    expect(reserved.body.details[0].field).toBe('body.name');
    expectError(await admin('POST', '/admin/rate-limits/support-tiers', { name: 'gold', max_requests: 1 }), 400, 'BAD_REQUEST');
    expect((await admin('GET', '/admin/rate-limits/support-tiers/gold')).body).toEqual(created.body);
    const changed = await admin('PUT', '/admin/rate-limits/support-tiers/gold', { max_requests: 600, window_seconds: 60 });
    expect(changed.body).toMatchObject({ name: 'gold', description: 'Gold support', max_requests: 600 });
    expect((await admin('GET', '/admin/rate-limits/support-tiers?q=gold')).body.tiers).toHaveLength(1);
    expect((await admin('GET', '/admin/rate-limits')).body.support_tiers.map((tier: { name: string }) => tier.name)).toContain('gold');

    expect((await admin('POST', '/admin/rate-limits/users', { user_id: 'usr_gold_member', tier: 'gold' })).status).toBe(201);
    expectError(await admin('DELETE', '/admin/rate-limits/support-tiers/gold'), 409, 'rate_limit_tier_in_use');
    expect((await admin('DELETE', '/admin/rate-limits/users/usr_gold_member')).status).toBe(204);
    expect((await admin('DELETE', '/admin/rate-limits/support-tiers/gold')).status).toBe(204);
    expectError(await admin('GET', '/admin/rate-limits/support-tiers/gold'), 404, 'not_found');
    expectError(await admin('PUT', '/admin/rate-limits/support-tiers/gold', { max_requests: 1, window_seconds: 1 }), 404, 'not_found');
  });
});

describe('user settings', () => {
  it('create, read, replace, list with tier/bypass/filters, delete', async () => {
    expect((await admin('POST', '/admin/rate-limits/support-tiers', { name: 'silver', max_requests: 100, window_seconds: 60 })).status).toBe(201);
    const before = (await admin('GET', '/admin/rate-limits')).body.user_count as number;
    const created = await admin('POST', '/admin/rate-limits/users', {
      user_id: 'usr_alpha',
      tier: 'silver',
      custom_limits: { '/api/v1/jobs/{job_id}': { max_requests: 5, window_seconds: 10 } },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ user_id: 'usr_alpha', tier: 'silver', bypass: false, custom_limits: { '/api/v1/jobs/{job_id}': { max_requests: 5, window_seconds: 10 } } });
    expectError(await admin('POST', '/admin/rate-limits/users', { user_id: 'usr_alpha', tier: 'default' }), 409, 'rate_limit_user_exists');
    expectError(await admin('POST', '/admin/rate-limits/users', { user_id: 'usr_beta', tier: 'platinum' }), 400, 'BAD_REQUEST');
    expectError(await admin('POST', '/admin/rate-limits/users', { user_id: 'usr_beta', tier: 'default', custom_limits: { 'no-slash': { max_requests: 1, window_seconds: 1 } } }), 400, 'BAD_REQUEST');
    expectError(
      await admin('POST', '/admin/rate-limits/users', {
        user_id: 'usr_beta',
        tier: 'default',
        custom_limits: { '/a/{x}': { max_requests: 1, window_seconds: 1 }, '/a/:y': { max_requests: 2, window_seconds: 1 } },
      }),
      400,
      'BAD_REQUEST',
    );
    expectError(await admin('POST', '/admin/rate-limits/users', { user_id: 'usr_beta', tier: 'default', custom_limits: { '/a': { max_requests: 0, window_seconds: 1 } } }), 400, 'BAD_REQUEST');
    expect((await admin('GET', '/admin/rate-limits/users/usr_alpha')).body).toEqual(created.body);

    const replaced = await admin('PUT', '/admin/rate-limits/users/usr_alpha', { tier: 'default', bypass: true });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ user_id: 'usr_alpha', tier: 'default', bypass: true, custom_limits: {}, created_at: created.body.created_at });
    const upserted = await admin('PUT', '/admin/rate-limits/users/usr_gamma', { tier: 'silver' });
    expect(upserted.status).toBe(201);
    expect((await admin('GET', '/admin/rate-limits')).body.user_count).toBe(before + 2);

    expect((await admin('GET', '/admin/rate-limits/users?tier=silver')).body.users.map((u: { user_id: string }) => u.user_id)).toContain('usr_gamma');
    expect((await admin('GET', '/admin/rate-limits/users?tier=silver')).body.users.map((u: { user_id: string }) => u.user_id)).not.toContain('usr_alpha');
    const bypassing = await admin('GET', '/admin/rate-limits/users?bypass=true');
    expect(bypassing.body.users.map((u: { user_id: string }) => u.user_id)).toContain('usr_alpha');
    expect(bypassing.body.users.every((u: { bypass: boolean }) => u.bypass)).toBe(true);
    const byFilter = await admin('GET', '/admin/rate-limits/users?filter=user_id:in:usr_alpha|usr_gamma&sort_by=user_id&page_size=1');
    expect(byFilter.body.pagination).toEqual({ page: 1, page_size: 1, total: 2, has_more: true });
    expect(byFilter.body.users[0].user_id).toBe('usr_alpha');
    expectError(await admin('GET', '/admin/rate-limits/users?filter=bypass:gt:true'), 400, 'BAD_REQUEST');
    expectError(await admin('GET', '/admin/rate-limits/users?bypass=maybe'), 400, 'BAD_REQUEST');

    expect((await admin('DELETE', '/admin/rate-limits/users/usr_alpha')).status).toBe(204);
    expect((await admin('DELETE', '/admin/rate-limits/users/usr_gamma')).status).toBe(204);
    expectError(await admin('GET', '/admin/rate-limits/users/usr_alpha'), 404, 'not_found');
    expectError(await admin('DELETE', '/admin/rate-limits/users/usr_alpha'), 404, 'not_found');
  });
});

describe('enforcement', () => {
  it('20 concurrent requests against a limit of 3 let exactly 3 through; the rest get 429 with Retry-After and RateLimit headers', async () => {
    const user = await t.newUser('burst');
    expect((await admin('POST', '/admin/rate-limits/users', { user_id: user.user_id, tier: 'default', custom_limits: { '/api/v1/auth/me': { max_requests: 3, window_seconds: 60 } } })).status).toBe(201);
    const results = await Promise.all(Array.from({ length: 20 }, () => t.request('GET', '/api/v1/auth/me', { token: user.token })));
    const ok = results.filter((res) => res.status === 200);
    const limited = results.filter((res) => res.status === 429);
    expect(ok).toHaveLength(3);
    expect(limited).toHaveLength(17);
    for (const res of ok) {
      expect(res.headers.get('ratelimit-policy')).toBe('"custom";q=3;w=60');
      expect(res.headers.get('ratelimit')).toMatch(/^"custom";r=[0-2];t=\d+$/);
    }
    for (const res of limited) {
      expectError(res, 429, 'rate_limited');
      const retryAfter = Number(res.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(65); // the window (60 s) after the lease's end (5 s)
      expect(res.headers.get('ratelimit-policy')).toBe('"custom";q=3;w=60');
      expect(res.headers.get('ratelimit')).toBe(`"custom";r=0;t=${retryAfter}`);
    }
    // Another endpoint is not this limit's: the default tier counts it.
    const other = await t.request('GET', '/api/v1/webhooks/events', { token: user.token });
    expect(other.status).toBe(200);
    expect(other.headers.get('ratelimit-policy')).toMatch(/^"default";/);
    // After the window (and the lease) the caller has room again.
    clock().advance(65_000);
    expect((await t.request('GET', '/api/v1/auth/me', { token: user.token })).status).toBe(200);
  });

  it('the most specific rule wins: custom > support tier > endpoint > module > default; bypass lifts every limit', async () => {
    const user = await t.newUser('prec');
    const me = () => t.request('GET', '/api/v1/webhooks/events', { token: user.token });
    const policyOf = async () => (await me()).headers.get('ratelimit-policy');
    expect(await policyOf()).toMatch(/^"default";q=900000000;w=120$/);
    expect((await admin('POST', '/admin/rate-limits/tiers/modules', { module: 'webhooks', max_requests: 400, window_seconds: 60 })).status).toBe(201);
    expect(await policyOf()).toBe('"module";q=400;w=60');
    expect((await admin('POST', '/admin/rate-limits/tiers/endpoints', { endpoint_path: '/api/v1/webhooks/events', max_requests: 300, window_seconds: 60 })).status).toBe(201);
    expect(await policyOf()).toBe('"endpoint";q=300;w=60');
    expect((await admin('POST', '/admin/rate-limits/support-tiers', { name: 'bronze', max_requests: 200, window_seconds: 60 })).status).toBe(201);
    expect((await admin('PUT', `/admin/rate-limits/users/${user.user_id}`, { tier: 'bronze' })).status).toBe(201);
    expect(await policyOf()).toBe('"tier";q=200;w=60');
    expect((await admin('PUT', `/admin/rate-limits/users/${user.user_id}`, { tier: 'bronze', custom_limits: { '/api/v1/webhooks/events': { max_requests: 100, window_seconds: 60 } } })).status).toBe(200);
    expect(await policyOf()).toBe('"custom";q=100;w=60');
    expect((await admin('PUT', `/admin/rate-limits/users/${user.user_id}`, { tier: 'bronze', bypass: true })).status).toBe(200);
    const bypassed = await me();
    expect(bypassed.status).toBe(200);
    expect(bypassed.headers.get('ratelimit')).toBeNull();
    // Another user still gets the endpoint tier.
    const other = await t.newUser('prec2');
    expect((await t.request('GET', '/api/v1/webhooks/events', { token: other.token })).headers.get('ratelimit-policy')).toBe('"endpoint";q=300;w=60');
    expect((await admin('DELETE', `/admin/rate-limits/users/${user.user_id}`)).status).toBe(204);
    expect((await admin('DELETE', '/admin/rate-limits/tiers/endpoints/' + enc('/api/v1/webhooks/events'))).status).toBe(204);
    expect((await admin('DELETE', '/admin/rate-limits/tiers/modules/webhooks')).status).toBe(204);
  });

  it('an anonymous caller is counted by address', async () => {
    expect((await admin('POST', '/admin/rate-limits/tiers/endpoints', { endpoint_path: '/api/v1/auth/refresh', max_requests: 2, window_seconds: 30 })).status).toBe(201);
    const refresh = () => t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: 'rt.nobody.nothing.nothing' } });
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await refresh()).status);
    expect(statuses).toEqual([401, 401, 429, 429]);
    clock().advance(33_000);
    expect((await refresh()).status).toBe(401);
    expect((await admin('DELETE', '/admin/rate-limits/tiers/endpoints/' + enc('/api/v1/auth/refresh'))).status).toBe(204);
  });

  it('a HEAD request of a GET route is counted, once', async () => {
    const user = await t.newUser('head');
    expect((await admin('POST', '/admin/rate-limits/tiers/endpoints', { endpoint_path: '/api/v1/webhooks/events', max_requests: 10, window_seconds: 60 })).status).toBe(201);
    const remaining = async (method: string) => {
      const res = await t.request(method, '/api/v1/webhooks/events', { token: user.token });
      expect(res.status).toBe(200);
      return res.headers.get('ratelimit');
    };
    expect(await remaining('GET')).toMatch(/^"endpoint";r=9;t=\d+$/);
    expect(await remaining('HEAD')).toMatch(/^"endpoint";r=8;t=\d+$/);
    expect(await remaining('GET')).toMatch(/^"endpoint";r=7;t=\d+$/);
    expect((await admin('DELETE', '/admin/rate-limits/tiers/endpoints/' + enc('/api/v1/webhooks/events'))).status).toBe(204);
  });

  it('an API key is counted by its tenant: every key of the tenant shares one count, apart from the user\'s own token', async () => {
    const user = await t.newUser('keys');
    const key = async (name: string) => {
      const res = await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body: { name, scopes: ['*'] } });
      expect(res.status, res.text).toBe(201);
      return res.body.key as string;
    };
    const [first, second] = [await key('one'), await key('two')];
    expect((await admin('POST', '/admin/rate-limits/tiers/endpoints', { endpoint_path: '/api/v1/webhooks', max_requests: 2, window_seconds: 60 })).status).toBe(201);
    const list = (token: string) => t.request('GET', '/api/v1/webhooks', { token });
    expect((await list(first)).status).toBe(200);
    expect((await list(second)).status).toBe(200);
    expectError(await list(first), 429, 'rate_limited');
    expectError(await list(second), 429, 'rate_limited');
    // The user's access token is counted as the user, not as the tenant's keys.
    expect((await list(user.token)).status).toBe(200);
    expect((await admin('DELETE', '/admin/rate-limits/tiers/endpoints/' + enc('/api/v1/webhooks'))).status).toBe(204);
  });

  it('a raised limit applies at once on this node; cache/clear answers 204', async () => {
    const user = await t.newUser('raise');
    expect((await admin('PUT', `/admin/rate-limits/users/${user.user_id}`, { tier: 'default', custom_limits: { '/api/v1/auth/me': { max_requests: 1, window_seconds: 600 } } })).status).toBe(201);
    expect((await t.request('GET', '/api/v1/auth/me', { token: user.token })).status).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/me', { token: user.token })).status).toBe(429);
    expect((await admin('PUT', `/admin/rate-limits/users/${user.user_id}`, { tier: 'default', custom_limits: { '/api/v1/auth/me': { max_requests: 2, window_seconds: 600 } } })).status).toBe(200);
    // The refusal this node remembered was decided under the old limit: the change drops it, no cache/clear needed.
    const after = await t.request('GET', '/api/v1/auth/me', { token: user.token });
    expect(after.status, after.text).toBe(200);
    expect(after.headers.get('ratelimit-policy')).toBe('"custom";q=2;w=600');
    expect((await t.request('GET', '/api/v1/auth/me', { token: user.token })).status).toBe(429);
    // An endpoint tier raised the same way.
    const other = await t.newUser('raise2');
    expect((await admin('POST', '/admin/rate-limits/tiers/endpoints', { endpoint_path: '/api/v1/webhooks/events', max_requests: 1, window_seconds: 600 })).status).toBe(201);
    expect((await t.request('GET', '/api/v1/webhooks/events', { token: other.token })).status).toBe(200);
    expect((await t.request('GET', '/api/v1/webhooks/events', { token: other.token })).status).toBe(429);
    expect((await admin('PUT', '/admin/rate-limits/tiers/endpoints/' + enc('/api/v1/webhooks/events'), { max_requests: 3, window_seconds: 600 })).status).toBe(200);
    expect((await t.request('GET', '/api/v1/webhooks/events', { token: other.token })).status).toBe(200);
    expect((await admin('DELETE', '/admin/rate-limits/tiers/endpoints/' + enc('/api/v1/webhooks/events'))).status).toBe(204);
    expect((await admin('POST', '/admin/rate-limits/cache/clear')).status).toBe(204);
  });

  it('health, metrics and the OpenAPI document are not limited', async () => {
    for (const path of ['/health', '/metrics', '/openapi.json']) {
      const res = await t.request('GET', path);
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit')).toBeNull();
    }
  });
});

describe('rate_limit.exceeded', () => {
  it('reaches the tenant\'s webhooks once per caller and window, not per refused request', async () => {
    const user = await t.newUser('hooked');
    const hook = await t.request('POST', '/api/v1/webhooks', { token: user.token, body: { url: `${receiver.url}/rl-${user.user_id}`, events: ['rate_limit.exceeded'] } });
    expect(hook.status, hook.text).toBe(201);
    expect((await admin('PUT', `/admin/rate-limits/users/${user.user_id}`, { tier: 'default', custom_limits: { '/api/v1/auth/me': { max_requests: 1, window_seconds: 60 } } })).status).toBe(201);
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await t.request('GET', '/api/v1/auth/me', { token: user.token })).status);
    expect(statuses).toEqual([200, 429, 429, 429, 429, 429]);
    const mine = () => receiver.received.filter((delivery) => delivery.path === `/rl-${user.user_id}`);
    await until(() => mine().length >= 1, 'the breach event');
    // The refusals after the first are answered from the node's remembered refusal or the same window: no second event.
    await settle(10);
    expect(mine()).toHaveLength(1);
    const event = mine()[0]!.json;
    expect(event).toMatchObject({
      type: 'rate_limit.exceeded',
      data: { caller: `user:${user.user_id}`, user_id: user.user_id, tenant: user.user_id, policy: 'custom', endpoint: '/api/v1/auth/me', method: 'GET', max_requests: 1, window_seconds: 60 },
    });
    // The next window: one more breach, one more event.
    clock().advance(65_000);
    const next = [];
    for (let i = 0; i < 3; i++) next.push((await t.request('GET', '/api/v1/auth/me', { token: user.token })).status);
    expect(next).toEqual([200, 429, 429]);
    await until(() => mine().length >= 2, 'the second window\'s breach event');
    await settle(10);
    expect(mine()).toHaveLength(2);
  });
});
