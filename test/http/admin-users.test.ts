import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';
import { eventually } from '../helpers/runtime.js';

/** Admin user management over the real socket: list, detail, patch, delete, ban/unban, sessions. */
const ADMIN_EMAIL = 'root@example.com';
const ADMIN_PASSWORD = 'admin password 123';

let t: TestNode;
let adminToken: string;
let adminId: string;

async function startNode(dataDir?: string): Promise<TestNode> {
  return startTestNode({ clock: 'manual', dataDir, config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
}

async function login(node: TestNode, login: string, password: string): Promise<TestResponse> {
  return node.request('POST', '/api/v1/auth/login', { body: { login, password } });
}

beforeAll(async () => {
  t = await startNode();
  const res = await login(t, ADMIN_EMAIL, ADMIN_PASSWORD);
  expect(res.status, res.text).toBe(200);
  adminToken = res.body.access_token;
  adminId = res.body.user.id;
});
afterAll(async () => {
  await t?.destroy();
});

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}

const admin = (method: string, path: string, body?: unknown) => t.request(method, path, { token: adminToken, body });

/** Waits until the user's summary reached the directory (registration sends it through the outbox). */
async function listedByEmail(email: string) {
  return eventually(async () => {
    const res = await admin('GET', `/admin/auth/users?q=${encodeURIComponent(email)}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.users).toHaveLength(1);
    return res.body.users[0];
  });
}

describe('admin role', () => {
  it('every endpoint answers 403 forbidden to a non-admin and 401 without a token', async () => {
    const user = await t.newUser('plain');
    const calls: [string, string, unknown?][] = [
      ['GET', '/admin/auth/users'],
      ['GET', `/admin/auth/users/${user.user_id}`],
      ['PATCH', `/admin/auth/users/${user.user_id}`, {}],
      ['DELETE', `/admin/auth/users/${user.user_id}`],
      ['POST', `/admin/auth/users/${user.user_id}/ban`, { reason: 'x' }],
      ['POST', `/admin/auth/users/${user.user_id}/unban`],
      ['GET', `/admin/auth/sessions?user_id=${user.user_id}`],
      ['DELETE', '/admin/auth/sessions/ses_x~y'],
    ];
    for (const [method, path, body] of calls) {
      expectError(await t.request(method, path, { token: user.token, body }), 403, 'forbidden');
      expectError(await t.request(method, path, { body }), 401, 'unauthorized');
    }
    // Nothing happened: the user still works and is not banned.
    const me = await t.request('GET', '/api/v1/auth/me', { token: user.token });
    expect(me.body).toMatchObject({ banned: false });
  });

  it('a promoted user gets admin access at once, a demoted admin loses it at once', async () => {
    const user = await t.newUser('promo');
    expectError(await t.request('GET', '/admin/auth/users', { token: user.token }), 403, 'forbidden');
    expect((await admin('PATCH', `/admin/auth/users/${user.user_id}`, { role: 'admin' })).body.role).toBe('admin');
    expect((await t.request('GET', '/admin/auth/users', { token: user.token })).status).toBe(200);
    expect((await admin('PATCH', `/admin/auth/users/${user.user_id}`, { role: 'user' })).body.role).toBe('user');
    expectError(await t.request('GET', '/admin/auth/users', { token: user.token }), 403, 'forbidden');
  });
});

describe('GET /admin/auth/users', () => {
  it('lists new users (the bootstrap admin too) with filters and pagination', async () => {
    const tag = `flt${Date.now().toString(36)}`;
    const users = [];
    for (let i = 0; i < 5; i++) {
      users.push(await t.newUser(`${tag}x${i}`));
      // Oldest first: distinct creation times make the order certain.
      (t.clock as ManualClock).advance(1000);
    }
    for (const u of users) await listedByEmail(u.email);
    const all = await admin('GET', `/admin/auth/users?q=${tag}&page_size=2`);
    expect(all.status, all.text).toBe(200);
    expect(all.body.pagination).toEqual({ page: 1, page_size: 2, total: 5, has_more: true });
    expect(all.body.users.map((u: any) => u.id)).toEqual([users[0].user_id, users[1].user_id]);
    const page3 = await admin('GET', `/admin/auth/users?q=${tag.toUpperCase()}&page_size=2&page=3`);
    expect(page3.body.pagination).toEqual({ page: 3, page_size: 2, total: 5, has_more: false });
    expect(page3.body.users.map((u: any) => u.id)).toEqual([users[4].user_id]);
    expect(page3.body.users[0]).toEqual({
      id: users[4].user_id, email: users[4].email, username: users[4].username, display_name: users[4].username,
      role: 'user', email_verified: false, two_factor_enabled: false, banned: false, created_at: expect.any(String),
    });
    // page 0 reads as 1, page_size over 100 is capped.
    const capped = await admin('GET', `/admin/auth/users?q=${tag}&page=0&page_size=1000`);
    expect(capped.body.pagination).toEqual({ page: 1, page_size: 100, total: 5, has_more: false });

    await admin('POST', `/admin/auth/users/${users[1].user_id}/ban`, { reason: 'spam' });
    await admin('PATCH', `/admin/auth/users/${users[2].user_id}`, { email_verified: true, role: 'admin' });
    const ids = async (query: string) => (await admin('GET', `/admin/auth/users?q=${tag}&${query}`)).body.users.map((u: any) => u.id);
    expect(await ids('banned=true')).toEqual([users[1].user_id]);
    expect(await ids('banned=false')).toHaveLength(4);
    expect(await ids('email_verified=true')).toEqual([users[2].user_id]);
    expect(await ids('role=admin')).toEqual([users[2].user_id]);
    expect(await ids('role=admin|user')).toHaveLength(5);
    expect(await ids('role=user,admin&banned=false&email_verified=false')).toHaveLength(3);

    const bootstrap = await admin('GET', `/admin/auth/users?q=${encodeURIComponent(ADMIN_EMAIL)}&role=admin`);
    expect(bootstrap.body.users.map((u: any) => u.id)).toEqual([adminId]);
  });

  it('400 for bad filters and an over-long q', async () => {
    expectError(await admin('GET', '/admin/auth/users?role=owner'), 400, 'BAD_REQUEST');
    expectError(await admin('GET', '/admin/auth/users?banned=maybe'), 400, 'BAD_REQUEST');
    expectError(await admin('GET', '/admin/auth/users?page=-1'), 400, 'BAD_REQUEST');
    expectError(await admin('GET', `/admin/auth/users?q=${'a'.repeat(101)}`), 400, 'BAD_REQUEST');
    expectError(await admin('GET', '/admin/auth/users?q=a%00b'), 400, 'BAD_REQUEST');
  });
});

describe('GET /admin/auth/users/{id}', () => {
  it('returns UserDetail with the live session count and the ban', async () => {
    const user = await t.newUser('detail');
    await login(t, user.email, user.password);
    const res = await admin('GET', `/admin/auth/users/${user.user_id}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      user: expect.objectContaining({ id: user.user_id, email: user.email, banned: false }),
      active_session_count: 2,
      api_key_count: 0,
      passkey_count: 0,
      identities: [],
      org_memberships: [],
      ban: null,
    });
    await t.request('POST', '/api/v1/auth/logout', { token: user.token });
    await admin('POST', `/admin/auth/users/${user.user_id}/ban`, { reason: 'abuse' });
    const banned = await admin('GET', `/admin/auth/users/${user.user_id}`);
    expect(banned.body.active_session_count).toBe(0);
    expect(banned.body.user.banned).toBe(true);
    expect(banned.body.ban).toEqual({ reason: 'abuse', banned_at: new Date(t.clock.now()).toISOString(), banned_by: adminId });
  });

  it('404 for an unknown user', async () => {
    expectError(await admin('GET', '/admin/auth/users/usr_nobody'), 404, 'not_found');
  });

  it('counts the user\'s API keys; a ban and a delete cut the keys off at once', async () => {
    const user = await t.newUser('keys');
    const keys = [];
    for (const name of ['a', 'b']) {
      const res = await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body: { name, scopes: ['locks:read'] } });
      expect(res.status, res.text).toBe(201);
      keys.push(res.body.key as string);
    }
    expect((await admin('GET', `/admin/auth/users/${user.user_id}`)).body.api_key_count).toBe(2);
    const lock = '/api/v1/distributed-state/ns/adminkeys/lock';
    expect((await t.request('GET', lock, { token: keys[0] })).status).toBe(200);
    await admin('POST', `/admin/auth/users/${user.user_id}/ban`, { reason: 'keys' });
    for (const key of keys) expectError(await t.request('GET', lock, { token: key }), 401, 'unauthorized');
    await admin('POST', `/admin/auth/users/${user.user_id}/unban`);
    expect((await t.request('GET', lock, { token: keys[1] })).status).toBe(200);
    await admin('DELETE', `/admin/auth/users/${user.user_id}`);
    for (const key of keys) expectError(await t.request('GET', lock, { token: key }), 401, 'unauthorized');
  });
});

describe('PATCH /admin/auth/users/{id}', () => {
  it('changes display_name, role, email_verified; an empty body changes nothing', async () => {
    const user = await t.newUser('patch');
    const res = await admin('PATCH', `/admin/auth/users/${user.user_id}`, { display_name: 'Grace', email_verified: true, unknown: 1 });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: user.user_id, display_name: 'Grace', email_verified: true, role: 'user' });
    const same = await admin('PATCH', `/admin/auth/users/${user.user_id}`, {});
    expect(same.body).toEqual(res.body);
    expect((await t.request('GET', '/api/v1/auth/me', { token: user.token })).body).toEqual(res.body);
    expect(await listedByEmail(user.email)).toEqual(res.body);
  });

  it('changes e-mail and username: the new names log in, the old ones are free; taken names are 409', async () => {
    const user = await t.newUser('ren');
    const other = await t.newUser('oth');
    expectError(await admin('PATCH', `/admin/auth/users/${user.user_id}`, { email: other.email.toUpperCase() }), 409, 'email_taken');
    expectError(await admin('PATCH', `/admin/auth/users/${user.user_id}`, { username: other.username }), 409, 'username_taken');
    const newEmail = `renamed${Date.now()}@example.com`;
    const newName = `rn${Date.now()}`;
    const res = await admin('PATCH', `/admin/auth/users/${user.user_id}`, { email: newEmail, username: newName });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ email: newEmail, username: newName });
    expect((await login(t, newEmail, user.password)).status).toBe(200);
    expect((await login(t, newName, user.password)).status).toBe(200);
    expectError(await login(t, user.email, user.password), 401, 'invalid_credentials');
    // The old names can be registered by someone else.
    const reg = await t.request('POST', '/api/v1/auth/register', { body: { email: user.email, username: user.username, password: 'another password' } });
    expect(reg.status, reg.text).toBe(201);
  });

  it('an admin cannot demote themselves (409); setting their own role to admin is fine', async () => {
    expectError(await admin('PATCH', `/admin/auth/users/${adminId}`, { role: 'user' }), 409, 'conflict');
    expect((await admin('PATCH', `/admin/auth/users/${adminId}`, { role: 'admin' })).body.role).toBe('admin');
    expect((await admin('GET', '/admin/auth/users')).status).toBe(200);
  });

  it('400 for bad fields, 404 for an unknown user', async () => {
    const user = await t.newUser('pbad');
    for (const body of [{ role: 'owner' }, { email_verified: 'yes' }, { display_name: '' }, { display_name: '   ' }, { email: 'not-an-email' }, { username: 'a b' }]) {
      expectError(await admin('PATCH', `/admin/auth/users/${user.user_id}`, body), 400, 'BAD_REQUEST');
    }
    expectError(await admin('PATCH', '/admin/auth/users/usr_nobody', { display_name: 'x' }), 404, 'not_found');
    expectError(await admin('PATCH', '/admin/auth/users/usr_nobody', { email: 'free@example.com' }), 404, 'not_found');
  });
});

describe('ban and unban', () => {
  it('a ban cuts off access and refresh tokens at once and blocks login; unban restores login', async () => {
    const user = await t.newUser('ban');
    const second = await login(t, user.username, user.password);
    expect((await t.request('GET', '/api/v1/auth/me', { token: user.token })).status).toBe(200);

    const ban = await admin('POST', `/admin/auth/users/${user.user_id}/ban`, { reason: 'fraud' });
    expect(ban.status, ban.text).toBe(200);
    expect(ban.body).toEqual({ message: expect.any(String) });
    for (const token of [user.token, second.body.access_token]) {
      expectError(await t.request('GET', '/api/v1/auth/me', { token }), 401, 'unauthorized');
    }
    for (const refresh_token of [user.refresh_token, second.body.refresh_token]) {
      expectError(await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token } }), 401, 'invalid_refresh_token');
    }
    expectError(await login(t, user.email, user.password), 403, 'forbidden');
    expect((await listedByEmail(user.email)).banned).toBe(true);
    // Banning again keeps the first ban.
    expect((await admin('POST', `/admin/auth/users/${user.user_id}/ban`, { reason: 'other' })).status).toBe(200);
    expect((await admin('GET', `/admin/auth/users/${user.user_id}`)).body.ban.reason).toBe('fraud');

    const unban = await admin('POST', `/admin/auth/users/${user.user_id}/unban`);
    expect(unban.status, unban.text).toBe(200);
    // The tokens cut off by the ban stay dead.
    expectError(await t.request('GET', '/api/v1/auth/me', { token: user.token }), 401, 'unauthorized');
    expectError(await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh_token } }), 401, 'invalid_refresh_token');
    const again = await login(t, user.email, user.password);
    expect(again.status, again.text).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/me', { token: again.body.access_token })).body.banned).toBe(false);
    expect((await admin('GET', `/admin/auth/users/${user.user_id}`)).body.ban).toBeNull();
    expect((await listedByEmail(user.email)).banned).toBe(false);
  });

  it('reason is required (1..500); an admin cannot ban themselves (409); unknown user 404', async () => {
    const user = await t.newUser('banbad');
    for (const body of [{}, { reason: '' }, { reason: 'x'.repeat(501) }, { reason: 5 }]) {
      expectError(await admin('POST', `/admin/auth/users/${user.user_id}/ban`, body), 400, 'BAD_REQUEST');
    }
    expectError(await admin('POST', `/admin/auth/users/${user.user_id}/ban`, { reason: '  ' }), 400, 'BAD_REQUEST');
    expectError(await admin('POST', `/admin/auth/users/${adminId}/ban`, { reason: 'oops' }), 409, 'conflict');
    expectError(await admin('POST', '/admin/auth/users/usr_nobody/ban', { reason: 'x' }), 404, 'not_found');
    expectError(await admin('POST', '/admin/auth/users/usr_nobody/unban'), 404, 'not_found');
    expect((await t.request('GET', '/api/v1/auth/me', { token: user.token })).status).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/me', { token: adminToken })).status).toBe(200);
  });
});

describe('DELETE /admin/auth/users/{id}', () => {
  it('ends sessions and tokens at once, drops the user from the list, frees the names for re-registration', async () => {
    const user = await t.newUser('del');
    await listedByEmail(user.email);
    const res = await admin('DELETE', `/admin/auth/users/${user.user_id}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ message: expect.any(String) });
    expectError(await t.request('GET', '/api/v1/auth/me', { token: user.token }), 401, 'unauthorized');
    expectError(await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh_token } }), 401, 'invalid_refresh_token');
    expectError(await login(t, user.email, user.password), 401, 'invalid_credentials');
    expect((await admin('GET', `/admin/auth/users?q=${encodeURIComponent(user.email)}`)).body.pagination.total).toBe(0);
    expectError(await admin('GET', `/admin/auth/users/${user.user_id}`), 404, 'not_found');
    expectError(await admin('DELETE', `/admin/auth/users/${user.user_id}`), 404, 'not_found');

    const reg = await t.request('POST', '/api/v1/auth/register', { body: { email: user.email, username: user.username, password: 'a new password' } });
    expect(reg.status, reg.text).toBe(201);
    expect(reg.body.user.id).not.toBe(user.user_id);
    expect((await listedByEmail(user.email)).id).toBe(reg.body.user.id);
    // The old token still does not work.
    expectError(await t.request('GET', '/api/v1/auth/me', { token: user.token }), 401, 'unauthorized');
  });

  it('an admin cannot delete themselves (409); unknown user 404', async () => {
    expectError(await admin('DELETE', `/admin/auth/users/${adminId}`), 409, 'conflict');
    expectError(await admin('DELETE', '/admin/auth/users/usr_nobody'), 404, 'not_found');
  });
});

describe('sessions', () => {
  it('lists the sessions of several users, newest first, paginated', async () => {
    const a = await t.newUser('sa');
    const b = await t.newUser('sb');
    await login(t, a.email, a.password);
    const res = await admin('GET', `/admin/auth/sessions?user_id=${a.user_id},${b.user_id}|usr_nobody`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.pagination).toEqual({ page: 1, page_size: 20, total: 3, has_more: false });
    expect(res.body.sessions.filter((s: any) => s.user_id === a.user_id)).toHaveLength(2);
    for (const s of res.body.sessions) {
      expect(s).toEqual({
        id: expect.stringMatching(/^ses_usr_[A-Za-z0-9_-]+~[A-Za-z0-9_-]+$/),
        user_id: expect.any(String),
        active: true,
        created_at: expect.any(String),
        expires_at: expect.any(String),
        ip_address: expect.any(String),
        user_agent: expect.any(String),
        impersonated_by: null,
      });
    }
    const page2 = await admin('GET', `/admin/auth/sessions?user_id=${a.user_id}|${b.user_id}&page=2&page_size=2`);
    expect(page2.body.pagination).toEqual({ page: 2, page_size: 2, total: 3, has_more: false });
    expect(page2.body.sessions).toHaveLength(1);
  });

  it('user_id is required and bounded (400)', async () => {
    expectError(await admin('GET', '/admin/auth/sessions'), 400, 'BAD_REQUEST');
    expectError(await admin('GET', '/admin/auth/sessions?user_id=,|'), 400, 'BAD_REQUEST');
    const many = Array.from({ length: 51 }, (_, i) => `usr_${i}`).join(',');
    expectError(await admin('GET', `/admin/auth/sessions?user_id=${many}`), 400, 'BAD_REQUEST');
  });

  it('DELETE of a session cuts its access and refresh tokens at once; other sessions keep working', async () => {
    const user = await t.newUser('sdel');
    const other = await login(t, user.email, user.password);
    const list = await admin('GET', `/admin/auth/sessions?user_id=${user.user_id}`);
    const target = user.refresh_token.split('.')[2];
    expect(list.body.sessions.map((s: any) => s.id)).toContain(target);
    const res = await admin('DELETE', `/admin/auth/sessions/${encodeURIComponent(target)}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ message: expect.any(String) });
    expectError(await t.request('GET', '/api/v1/auth/me', { token: user.token }), 401, 'unauthorized');
    expectError(await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh_token } }), 401, 'invalid_refresh_token');
    expect((await t.request('GET', '/api/v1/auth/me', { token: other.body.access_token })).status).toBe(200);
    const after = await admin('GET', `/admin/auth/sessions?user_id=${user.user_id}`);
    expect(after.body.sessions.find((s: any) => s.id === target).active).toBe(false);
    // Ending it again is no error.
    expect((await admin('DELETE', `/admin/auth/sessions/${encodeURIComponent(target)}`)).status).toBe(200);
  });

  it('404 for an unknown or old-style session id', async () => {
    const user = await t.newUser('s404');
    expectError(await admin('DELETE', `/admin/auth/sessions/${encodeURIComponent(`ses_${user.user_id}~nope`)}`), 404, 'not_found');
    expectError(await admin('DELETE', '/admin/auth/sessions/ses_usr_nobody~x'), 404, 'not_found');
    expectError(await admin('DELETE', '/admin/auth/sessions/ses_oldstyle'), 404, 'not_found');
  });
});

describe('restart', () => {
  it('summaries, bans and deletions survive a restart', async () => {
    const kept = await t.newUser('rk');
    const banned = await t.newUser('rb');
    const gone = await t.newUser('rg');
    for (const u of [kept, banned, gone]) await listedByEmail(u.email);
    await admin('POST', `/admin/auth/users/${banned.user_id}/ban`, { reason: 'r' });
    await admin('DELETE', `/admin/auth/users/${gone.user_id}`);
    const dataDir = t.dataDir;
    await t.stop();
    t = await startNode(dataDir);
    const relog = await login(t, ADMIN_EMAIL, ADMIN_PASSWORD);
    adminToken = relog.body.access_token;
    expect((await listedByEmail(kept.email)).banned).toBe(false);
    expect((await listedByEmail(banned.email)).banned).toBe(true);
    expect((await admin('GET', `/admin/auth/users?q=${encodeURIComponent(gone.email)}`)).body.pagination.total).toBe(0);
    expectError(await t.request('GET', '/api/v1/auth/me', { token: banned.token }), 401, 'unauthorized');
    expect((await t.request('GET', '/api/v1/auth/me', { token: kept.token })).status).toBe(200);
  });
});
