import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { USER_KIND } from '../../actors/accounts/messages.js';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

let t: TestNode;
const ADMIN = { adminEmail: 'root@example.com', adminPassword: 'admin password 123' };
beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: ADMIN });
});
afterAll(async () => t.destroy());

const clock = () => t.clock as ManualClock;
const base = '/api/v1/auth/api-keys';
const lockPath = (key: string) => `/api/v1/distributed-state/ns/${key}/lock`;

async function createKey(token: string, body: Record<string, unknown>) {
  const res = await t.request('POST', base, { token, body });
  expect(res.status).toBe(201);
  return res.body;
}

describe('API keys', () => {
  it('shows the full key once at creation; list and get show only key_prefix', async () => {
    const user = await t.newUser('ak');
    const created = await createKey(user.token, { name: 'ci', scopes: ['locks:read', 'locks:write', 'locks:read'] });
    expect(created).toEqual({
      api_key_id: expect.stringMatching(/^[0-9a-f]{32}$/),
      key: expect.stringMatching(/^pk_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/),
      key_prefix: created.key.slice(0, 12),
      name: 'ci',
      scopes: ['locks:read', 'locks:write'],
      org_id: null,
      created_at: new Date(clock().now()).toISOString(),
      expires_at: null,
    });
    expect(created.key.startsWith(`pk_${created.api_key_id}_`)).toBe(true);

    const got = await t.request('GET', `${base}/${created.api_key_id}`, { token: user.token });
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ ...created, key: undefined, last_used_at: null, revoked: false });
    expect(got.text).not.toContain(created.key.slice(13));

    const list = await t.request('GET', base, { token: user.token });
    expect(list.status).toBe(200);
    expect(list.body.api_keys).toEqual([got.body]);
    expect(list.body.pagination).toEqual({ page: 1, page_size: 20, total: 1, has_more: false });
    expect(list.text).not.toContain(created.key.slice(13));
  });

  it('pages the list, newest first, with page_size capped at 100', async () => {
    const user = await t.newUser('ak');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await createKey(user.token, { name: `k${i}`, scopes: ['*'] })).api_key_id);
      clock().advance(1000);
    }
    const page1 = await t.request('GET', `${base}?page=1&page_size=2`, { token: user.token });
    expect(page1.body.api_keys.map((k: { api_key_id: string }) => k.api_key_id)).toEqual([ids[2], ids[1]]);
    expect(page1.body.pagination).toEqual({ page: 1, page_size: 2, total: 3, has_more: true });
    const page2 = await t.request('GET', `${base}?page=2&page_size=2`, { token: user.token });
    expect(page2.body.api_keys.map((k: { api_key_id: string }) => k.api_key_id)).toEqual([ids[0]]);
    expect(page2.body.pagination.has_more).toBe(false);
    const big = await t.request('GET', `${base}?page=0&page_size=1000`, { token: user.token });
    expect(big.body.pagination).toEqual({ page: 1, page_size: 100, total: 3, has_more: false });
  });

  it('authenticates as its owner on a lock route, and updates last_used_at at most once a minute', async () => {
    const user = await t.newUser('ak');
    const key = await createKey(user.token, { name: 'locks', scopes: ['locks:read', 'locks:write'] });
    const acquire = await t.request('POST', lockPath('a'), { token: key.key, body: { owner_id: 'o1', ttl_seconds: 30 } });
    expect(acquire.status).toBe(200);
    // Same tenant as the owner's access token: the session sees the lock the key took.
    const status = await t.request('GET', lockPath('a'), { token: user.token });
    expect(status.body).toMatchObject({ is_locked: true, owner_id: 'o1' });
    const firstUse = new Date(clock().now()).toISOString();
    expect((await t.request('GET', `${base}/${key.api_key_id}`, { token: user.token })).body.last_used_at).toBe(firstUse);

    clock().advance(30_000);
    expect((await t.request('GET', lockPath('a'), { token: key.key })).status).toBe(200);
    expect((await t.request('GET', `${base}/${key.api_key_id}`, { token: user.token })).body.last_used_at).toBe(firstUse);
    clock().advance(30_000);
    expect((await t.request('GET', lockPath('a'), { token: key.key })).status).toBe(200);
    expect((await t.request('GET', `${base}/${key.api_key_id}`, { token: user.token })).body.last_used_at).toBe(new Date(clock().now()).toISOString());
    // auth:read is needed for /me.
    const me = await t.request('GET', '/api/v1/auth/me', { token: key.key });
    expect(me.status).toBe(403);
    expect(me.body.code).toBe('insufficient_scope');
  });

  it('a key made for an organization acts for it: its members\' org keys share resources, personal credentials do not', async () => {
    const alice = await t.newUser('akorg');
    const bob = await t.newUser('akorg');
    const carol = await t.newUser('akorg');
    const org = await t.request('POST', '/api/v1/orgs', { token: alice.token, body: { name: `Keys ${alice.username}` } });
    expect(org.status, org.text).toBe(201);
    const org_id = org.body.org_id as string;
    const admin = (await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.adminEmail, password: ADMIN.adminPassword } })).body.access_token;
    const added = await t.request('POST', `/admin/auth/org/${org_id}/members`, { token: admin, body: { user_id: bob.user_id, role: 'member' } });
    expect(added.status, added.text).toBe(201);

    const scopes = ['locks:read', 'locks:write'];
    const aliceOrg = await createKey(alice.token, { name: 'org', scopes, org_id });
    expect(aliceOrg.org_id).toBe(org_id);
    const bobOrg = await createKey(bob.token, { name: 'org', scopes, org_id });
    const alicePersonal = await createKey(alice.token, { name: 'mine', scopes, org_id: null });
    expect(alicePersonal.org_id).toBeNull();
    expect((await t.request('GET', `${base}/${aliceOrg.api_key_id}`, { token: alice.token })).body.org_id).toBe(org_id);
    expect((await t.request('GET', base, { token: alice.token })).body.api_keys.map((k: { org_id: string | null }) => k.org_id).sort())
      .toEqual([org_id, null].sort());

    // A lock taken with Alice's org key is the organization's.
    const taken = await t.request('POST', lockPath('shared'), { token: aliceOrg.key, body: { owner_id: 'alice-job', ttl_seconds: 60 } });
    expect(taken.status, taken.text).toBe(200);
    expect((await t.request('GET', lockPath('shared'), { token: bobOrg.key })).body).toMatchObject({ is_locked: true, owner_id: 'alice-job' });
    const clash = await t.request('POST', lockPath('shared'), { token: bobOrg.key, body: { owner_id: 'bob-job' } });
    expect(clash.status).toBe(409);
    expect(clash.body.code).toBe('lock_held');
    // Alice's personal token and key are another tenant: the same name is free there.
    expect((await t.request('GET', lockPath('shared'), { token: alice.token })).body.is_locked).toBe(false);
    expect((await t.request('GET', lockPath('shared'), { token: alicePersonal.key })).body.is_locked).toBe(false);
    expect((await t.request('GET', lockPath('shared'), { token: bob.token })).body.is_locked).toBe(false);

    // Only members may make such a key; an unknown organization looks the same; a malformed id is 400.
    for (const other of [org_id, 'org_doesnotexist']) {
      const refused = await t.request('POST', base, { token: carol.token, body: { name: 'x', scopes, org_id: other } });
      expect(refused.status, refused.text).toBe(404);
      expect(refused.body.code).toBe('not_found');
    }
    expect((await t.request('POST', base, { token: carol.token, body: { name: 'x', scopes, org_id: 'not an org' } })).status).toBe(400);
    expect((await t.request('GET', base, { token: carol.token })).body.api_keys).toEqual([]);

    // Leaving the organization cuts the member's org key off at once; the owner's keeps working.
    const removed = await t.request('DELETE', `/api/v1/orgs/${org_id}/members/${bob.user_id}`, { token: alice.token });
    expect(removed.status, removed.text).toBe(200);
    const cut = await t.request('GET', lockPath('shared'), { token: bobOrg.key });
    expect(cut.status).toBe(401);
    expect(cut.body.code).toBe('unauthorized');
    expect((await t.request('GET', lockPath('shared'), { token: aliceOrg.key })).body.is_locked).toBe(true);
  });

  it('enforces scopes: a read-only key reads but cannot write; * reaches everything but credentials', async () => {
    const user = await t.newUser('ak');
    const readOnly = await createKey(user.token, { name: 'ro', scopes: ['locks:read', 'auth:read'] });
    expect((await t.request('GET', lockPath('r'), { token: readOnly.key })).status).toBe(200);
    const write = await t.request('POST', lockPath('r'), { token: readOnly.key, body: { owner_id: 'o', ttl_seconds: 10 } });
    expect(write.status).toBe(403);
    expect(write.body.code).toBe('insufficient_scope');
    expect((await t.request('GET', lockPath('r'), { token: user.token })).body.is_locked).toBe(false);
    const me = await t.request('GET', '/api/v1/auth/me', { token: readOnly.key });
    expect(me.status).toBe(200);
    expect(me.body.id).toBe(user.user_id);
    expect((await t.request('GET', '/api/v1/liveness', { token: readOnly.key })).status).toBe(403);

    const all = await createKey(user.token, { name: 'all', scopes: ['*'] });
    expect((await t.request('POST', lockPath('r'), { token: all.key, body: { owner_id: 'o', ttl_seconds: 10 } })).status).toBe(200);
    expect((await t.request('GET', '/api/v1/liveness', { token: all.key })).status).toBe(200);
  });

  it('refuses API keys on key management, two-factor and logout, even with *', async () => {
    const user = await t.newUser('ak');
    const all = await createKey(user.token, { name: 'all', scopes: ['*'] });
    const attempts: [string, string, unknown?][] = [
      ['GET', base],
      ['POST', base, { name: 'more', scopes: ['*'] }],
      ['GET', `${base}/${all.api_key_id}`],
      ['PATCH', `${base}/${all.api_key_id}`, { scopes: ['*'] }],
      ['DELETE', `${base}/${all.api_key_id}`],
      ['POST', '/api/v1/auth/2fa/totp/setup'],
      ['GET', '/api/v1/auth/2fa/status'],
      ['POST', '/api/v1/auth/logout'],
    ];
    for (const [method, path, body] of attempts) {
      const res = await t.request(method, path, { token: all.key, body });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.code).toBe('insufficient_scope');
    }
    const list = await t.request('GET', base, { token: user.token });
    expect(list.body.pagination.total).toBe(1);
  });

  it('revoking (PATCH revoked: true) cuts the key off at once, for good', async () => {
    const user = await t.newUser('ak');
    const key = await createKey(user.token, { name: 'r', scopes: ['locks:read'] });
    expect((await t.request('GET', lockPath('x'), { token: key.key })).status).toBe(200);
    const renamed = await t.request('PATCH', `${base}/${key.api_key_id}`, { token: user.token, body: { name: ' renamed ', scopes: ['locks:write'] } });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ name: 'renamed', scopes: ['locks:write'], revoked: false });
    // New scopes apply on the next request.
    expect((await t.request('GET', lockPath('x'), { token: key.key })).status).toBe(403);

    const revoked = await t.request('PATCH', `${base}/${key.api_key_id}`, { token: user.token, body: { revoked: true } });
    expect(revoked.status).toBe(200);
    expect(revoked.body.revoked).toBe(true);
    const after = await t.request('POST', lockPath('x'), { token: key.key, body: { owner_id: 'o', ttl_seconds: 5 } });
    expect(after.status).toBe(401);
    expect(after.body.code).toBe('unauthorized');
    const undo = await t.request('PATCH', `${base}/${key.api_key_id}`, { token: user.token, body: { revoked: false } });
    expect(undo.status).toBe(409);
    expect((await t.request('GET', base, { token: user.token })).body.api_keys[0].revoked).toBe(true);
  });

  it('an expired key stops working the moment expires_at passes', async () => {
    const user = await t.newUser('ak');
    const expires_at = new Date(clock().now() + 60_000).toISOString();
    const key = await createKey(user.token, { name: 'short', scopes: ['locks:read'], expires_at });
    expect(key.expires_at).toBe(expires_at);
    expect((await t.request('GET', lockPath('e'), { token: key.key })).status).toBe(200);
    clock().advance(59_999);
    expect((await t.request('GET', lockPath('e'), { token: key.key })).status).toBe(200);
    clock().advance(1);
    await settle();
    const res = await t.request('GET', lockPath('e'), { token: key.key });
    expect(res.status).toBe(401);
    expect(res.body.message).toBe('The API key is invalid, revoked or expired.');
  });

  it('gives the same 401 for unknown, malformed, wrong-secret and deleted keys', async () => {
    const user = await t.newUser('ak');
    const key = await createKey(user.token, { name: 'd', scopes: ['locks:read'] });
    const wrongSecret = `${key.key.slice(0, -1)}${key.key.endsWith('A') ? 'B' : 'A'}`;
    const unknown = `pk_${'0'.repeat(32)}_${key.key.slice(-43)}`;
    const tokens = [wrongSecret, unknown, 'pk_short', `pk_${key.api_key_id}_`, `${key.key}_extra`];
    for (const token of tokens) {
      const res = await t.request('GET', lockPath('d'), { token });
      expect(res.status, token).toBe(401);
      expect(res.body).toMatchObject({ code: 'unauthorized', message: 'The API key is invalid, revoked or expired.' });
    }
    const del = await t.request('DELETE', `${base}/${key.api_key_id}`, { token: user.token });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ message: 'API key deleted.' });
    expect((await t.request('GET', lockPath('d'), { token: key.key })).status).toBe(401);
    expect((await t.request('GET', `${base}/${key.api_key_id}`, { token: user.token })).status).toBe(404);
    expect((await t.request('DELETE', `${base}/${key.api_key_id}`, { token: user.token })).status).toBe(404);
    const list = await t.request('GET', base, { token: user.token });
    expect(list.body).toEqual({ api_keys: [], pagination: { page: 1, page_size: 20, total: 0, has_more: false } });
  });

  it("another user's key is 404 on get, patch and delete, and is not listed", async () => {
    const alice = await t.newUser('ak');
    const bob = await t.newUser('ak');
    const key = await createKey(alice.token, { name: 'alice', scopes: ['locks:read'] });
    expect((await t.request('GET', `${base}/${key.api_key_id}`, { token: bob.token })).status).toBe(404);
    expect((await t.request('PATCH', `${base}/${key.api_key_id}`, { token: bob.token, body: { revoked: true } })).status).toBe(404);
    expect((await t.request('DELETE', `${base}/${key.api_key_id}`, { token: bob.token })).status).toBe(404);
    expect((await t.request('GET', base, { token: bob.token })).body.pagination.total).toBe(0);
    expect((await t.request('GET', `${base}/not-a-key-id`, { token: bob.token })).status).toBe(404);
    // Untouched for alice.
    expect((await t.request('GET', lockPath('z'), { token: key.key })).status).toBe(200);
  });

  it('a ban of the owner cuts every key off at once', async () => {
    const user = await t.newUser('ak');
    const key = await createKey(user.token, { name: 'b', scopes: ['locks:read'] });
    expect((await t.request('GET', lockPath('b'), { token: key.key })).status).toBe(200);
    await t.node.services.actors.ask(USER_KIND, user.user_id, { op: 'ban', reason: 'test', banned_by: 'admin' });
    expect((await t.request('GET', lockPath('b'), { token: key.key })).status).toBe(401);
  });

  it('hostile and invalid bodies get 4xx, never 5xx', async () => {
    const user = await t.newUser('ak');
    const bodies: unknown[] = [
      {},
      { name: 'x' },
      { scopes: ['*'] },
      { name: '', scopes: ['*'] },
      { name: '   ', scopes: ['*'] },
      { name: 'x'.repeat(101), scopes: ['*'] },
      { name: 'x', scopes: [] },
      { name: 'x', scopes: ['root'] },
      { name: 'x', scopes: 'locks:read' },
      { name: 7, scopes: ['*'] },
      { name: 'x', scopes: ['*'], expires_at: 'tomorrow' },
      { name: 'x', scopes: ['*'], expires_at: new Date(clock().now() - 1000).toISOString() },
      { name: 'x', scopes: ['*'], expires_at: 12345 },
      [],
      'null',
    ];
    for (const body of bodies) {
      const res = await t.request('POST', base, { token: user.token, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('BAD_REQUEST');
    }
    const raw = await t.request('POST', base, { token: user.token, rawBody: '{"name":', headers: { 'content-type': 'application/json' } });
    expect(raw.status).toBe(400);
    const key = await createKey(user.token, { name: 'ok', scopes: ['*'], unknown_field: 1 });
    for (const body of [{ revoked: 'yes' }, { scopes: ['nope'] }, { name: '' }, { name: ' ' }]) {
      const res = await t.request('PATCH', `${base}/${key.api_key_id}`, { token: user.token, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    const noChange = await t.request('PATCH', `${base}/${key.api_key_id}`, { token: user.token, body: {} });
    expect(noChange.status).toBe(200);
    expect(noChange.body.name).toBe('ok');
    const badBearer = await t.request('GET', lockPath('h'), { token: `pk_${'x'.repeat(4000)}` });
    expect(badBearer.status).toBe(401);
  });

  it('keys survive a restart', async () => {
    const user = await t.newUser('ak');
    const key = await createKey(user.token, { name: 'durable', scopes: ['locks:read'] });
    const dataDir = t.dataDir;
    const now = clock().now();
    await t.stop();
    const { ManualClock } = await import('../../runtime/index.js');
    t = await startTestNode({ clock: new ManualClock(now), dataDir });
    expect((await t.request('GET', lockPath('s'), { token: key.key })).status).toBe(200);
    const list = await t.request('GET', base, { token: user.token });
    expect(list.body.api_keys.map((k: { name: string }) => k.name)).toEqual(['durable']);
  });
});
