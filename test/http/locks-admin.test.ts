import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** The administrators' lock list (GET /admin/locks/namespaces, GET /admin/locks) over the real socket. */
const ADMIN_EMAIL = 'locks-admin@example.com';
const ADMIN_PASSWORD = 'locks admin password';

let t: TestNode;
let adminToken: string;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
  adminToken = await t.loginAdmin();
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
});
afterAll(async () => {
  await t?.destroy();
});

const lockPath = (namespace: string, key: string) => `/api/v1/distributed-state/${encodeURIComponent(namespace)}/${encodeURIComponent(key)}/lock`;
const admin = (path: string) => t.request('GET', path, { token: adminToken });
const listOf = (tenant: string, namespace: string, extra = '') =>
  admin(`/admin/locks?tenant=${encodeURIComponent(tenant)}&namespace=${encodeURIComponent(namespace)}${extra}`);

describe('GET /admin/locks', () => {
  it("lists a tenant's namespaces and locks with live holder, fence token and expiry", async () => {
    const first = await t.request('POST', lockPath('jobs', 'nightly/report'), { token: alice.token, body: { owner_id: 'worker-1', ttl_seconds: 60 } });
    expect(first.status).toBe(200);
    const other = await t.request('POST', lockPath('jobs', 'cleanup'), { token: alice.token, body: { owner_id: 'worker-2' } });
    await t.request('DELETE', lockPath('jobs', 'cleanup'), { token: alice.token, body: { lock_id: other.body.lock_id, owner_id: 'worker-2' } });
    await t.request('POST', lockPath('billing', 'invoice-7'), { token: alice.token, body: { owner_id: 'w' } });
    await t.request('POST', lockPath('jobs', 'bobs'), { token: bob.token, body: { owner_id: 'w' } });

    // Listed from where the locks are stored: at once, with nothing for an acquisition to tell.
    expect((await admin(`/admin/locks/namespaces?tenant=${alice.user_id}`)).body.namespaces).toEqual([
      { namespace: 'billing', key_count: 1 },
      { namespace: 'jobs', key_count: 2 },
    ]);
    const list = await listOf(alice.user_id, 'jobs');
    expect(list.status).toBe(200);
    expect(list.body.pagination).toEqual({ page: 1, page_size: 20, total: 2, has_more: false });
    const [cleanup, nightly] = list.body.locks;
    expect(cleanup).toMatchObject({ key: 'cleanup', is_locked: false, owner_id: null, fence_token: 1, time_remaining_ms: 0 });
    expect(nightly).toMatchObject({
      namespace: 'jobs',
      key: 'nightly/report',
      is_locked: true,
      lock_id: first.body.lock_id,
      owner_id: 'worker-1',
      fence_token: 1,
      expires_at: first.body.expires_at,
    });
    expect(nightly.time_remaining_ms).toBeGreaterThan(50_000);

    // A later acquisition of a listed key shows its new fence token; tenants stay apart.
    const second = await t.request('POST', lockPath('jobs', 'cleanup'), { token: alice.token, body: { owner_id: 'worker-3' } });
    expect((await listOf(alice.user_id, 'jobs')).body.locks[0]).toMatchObject({ is_locked: true, owner_id: 'worker-3', fence_token: 2, lock_id: second.body.lock_id });
    expect((await listOf(bob.user_id, 'jobs')).body.locks.map((l: { key: string }) => l.key)).toEqual(['bobs']);
    expect((await listOf(bob.user_id, 'billing')).body).toEqual({ pagination: { page: 1, page_size: 20, total: 0, has_more: false }, locks: [] });
  });

  it('pages through the keys', async () => {
    for (const key of ['a', 'b', 'c']) await t.request('POST', lockPath('paged', key), { token: bob.token, body: { owner_id: 'w' } });
    expect((await listOf(bob.user_id, 'paged')).body.pagination.total).toBe(3);
    const page2 = await listOf(bob.user_id, 'paged', '&page=2&page_size=2');
    expect(page2.body.pagination).toEqual({ page: 2, page_size: 2, total: 3, has_more: false });
    expect(page2.body.locks.map((l: { key: string }) => l.key)).toEqual(['c']);
  });

  it('pages through many keys spread over the partitions, in key order, each key once', async () => {
    const keys = Array.from({ length: 23 }, (_, i) => `k${String(i).padStart(2, '0')}`);
    await Promise.all(keys.map((key) => t.request('POST', lockPath('many', key), { token: alice.token, body: { owner_id: 'w' } })));
    // A namespace whose name starts with another's is its own.
    await t.request('POST', lockPath('many2', 'k00'), { token: alice.token, body: { owner_id: 'w' } });
    const seen: string[] = [];
    for (let page = 1; page <= 4; page++) {
      const body = (await listOf(alice.user_id, 'many', `&page=${page}&page_size=7`)).body;
      expect(body.pagination).toEqual({ page, page_size: 7, total: 23, has_more: page < 4 });
      seen.push(...body.locks.map((l: { key: string }) => l.key));
    }
    expect(seen).toEqual(keys);
    const namespaces = (await admin(`/admin/locks/namespaces?tenant=${alice.user_id}&page_size=100`)).body.namespaces;
    expect(namespaces).toContainEqual({ namespace: 'many', key_count: 23 });
    expect(namespaces).toContainEqual({ namespace: 'many2', key_count: 1 });
    const page = (await admin(`/admin/locks/namespaces?tenant=${alice.user_id}&page=2&page_size=1`)).body;
    expect(page.pagination).toMatchObject({ page: 2, page_size: 1, has_more: true });
    expect(page.namespaces).toEqual([namespaces[1]]);
  });

  it('shows a lock whose time is up as free, with its fence token', async () => {
    const held = await t.request('POST', lockPath('short', 'k'), { token: bob.token, body: { owner_id: 'w', ttl_seconds: 1 } });
    expect(held.status).toBe(200);
    expect((await listOf(bob.user_id, 'short')).body.locks[0]).toMatchObject({ is_locked: true, fence_token: 1 });
    (t.clock as ManualClock).advance(1_000);
    expect((await listOf(bob.user_id, 'short')).body.locks[0]).toMatchObject({ key: 'k', is_locked: false, lock_id: null, owner_id: null, fence_token: 1, time_remaining_ms: 0 });
  });

  it('is for administrators only, and checks its query', async () => {
    expect((await t.request('GET', `/admin/locks?tenant=${alice.user_id}&namespace=jobs`, { token: alice.token })).status).toBe(403);
    expect((await t.request('GET', `/admin/locks/namespaces?tenant=${alice.user_id}`, { token: alice.token })).status).toBe(403);
    expect((await t.request('GET', `/admin/locks?tenant=${alice.user_id}&namespace=jobs`)).status).toBe(401);
    const missing = await admin('/admin/locks?namespace=jobs');
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe('BAD_REQUEST');
    expect((await admin(`/admin/locks?tenant=${alice.user_id}`)).status).toBe(400);
    expect((await admin('/admin/locks/namespaces?tenant=')).status).toBe(400);
  });
});
