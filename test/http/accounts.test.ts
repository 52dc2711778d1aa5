import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/** Conventions "Getting a token": register, login, refresh, logout, me, over the real socket. */
let t: TestNode;
let counter = 0;

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
});
afterAll(async () => {
  await t?.destroy();
});

function fresh(prefix = 'u') {
  const username = `${prefix}${process.pid}_${++counter}`;
  return { email: `${username}@example.com`, username, password: 'correct horse battery' };
}

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}

function expectTokenBody(body: any) {
  expect(body).toEqual({
    user: {
      id: expect.stringMatching(/^[A-Za-z0-9_-]+$/),
      email: expect.any(String),
      username: expect.any(String),
      display_name: expect.any(String),
      role: 'user',
      email_verified: false,
      two_factor_enabled: false,
      banned: false,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/),
    },
    access_token: expect.any(String),
    refresh_token: expect.any(String),
    token_type: 'Bearer',
    expires_in: expect.any(Number),
  });
  expect(body.expires_in).toBeGreaterThan(0);
  expect(body.access_token).not.toBe(body.refresh_token);
}

describe('register', () => {
  it('201 with the token body; the access token works on /me', async () => {
    const input = { ...fresh(), display_name: 'Ada Lovelace' };
    const res = await t.request('POST', '/api/v1/auth/register', { body: input });
    expect(res.status, res.text).toBe(201);
    expectTokenBody(res.body);
    expect(res.body.user).toMatchObject({ email: input.email, username: input.username, display_name: 'Ada Lovelace' });
    expect(res.body.user.created_at).toBe(new Date(t.clock.now()).toISOString());
    expect(JSON.stringify(res.body)).not.toContain('password');
    const me = await t.request('GET', '/api/v1/auth/me', { token: res.body.access_token });
    expect(me.status).toBe(200);
    expect(me.body).toEqual(res.body.user);
  });

  it('display_name defaults to the username', async () => {
    const input = fresh();
    const res = await t.request('POST', '/api/v1/auth/register', { body: input });
    expect(res.status).toBe(201);
    expect(res.body.user.display_name).toBe(input.username);
  });

  it('409 for a duplicate e-mail (any case) and for a duplicate username (any case)', async () => {
    const input = fresh();
    expect((await t.request('POST', '/api/v1/auth/register', { body: input })).status).toBe(201);
    const sameEmail = await t.request('POST', '/api/v1/auth/register', {
      body: { ...fresh(), email: input.email.toUpperCase() },
    });
    expectError(sameEmail, 409, 'email_taken');
    const sameUsername = await t.request('POST', '/api/v1/auth/register', {
      body: { ...fresh(), username: input.username.toUpperCase() },
    });
    expectError(sameUsername, 409, 'username_taken');
  });

  it('concurrent registrations of one e-mail: exactly one wins', async () => {
    const email = fresh().email;
    const results = await Promise.all(
      Array.from({ length: 8 }, () => t.request('POST', '/api/v1/auth/register', { body: { ...fresh(), email } })),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of results.filter((r) => r.status !== 201)) expectError(r, 409, 'email_taken');
  });

  it('400 for a password shorter than 8 characters, with details naming the field', async () => {
    const res = await t.request('POST', '/api/v1/auth/register', { body: { ...fresh(), password: '1234567' } });
    expectError(res, 400, 'BAD_REQUEST');
    expect(res.body.details).toEqual([expect.objectContaining({ field: 'body.password' })]);
    expect((await t.request('POST', '/api/v1/auth/register', { body: { ...fresh(), password: '12345678' } })).status).toBe(201);
  });

  it('400 for a missing field, a bad e-mail and a bad username', async () => {
    const { email, username, password } = fresh();
    expectError(await t.request('POST', '/api/v1/auth/register', { body: { username, password } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/auth/register', { body: { email: 'not-an-email', username, password } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/auth/register', { body: { email, username: 'a b', password } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/auth/register', { body: { email, username: 'ab', password } }), 400, 'BAD_REQUEST');
  });
});

describe('login', () => {
  it('by e-mail or username (any case): 200 with the token body and a new session', async () => {
    const input = fresh();
    const registered = await t.request('POST', '/api/v1/auth/register', { body: input });
    for (const login of [input.email, input.username, input.email.toUpperCase(), input.username.toUpperCase()]) {
      const res = await t.request('POST', '/api/v1/auth/login', { body: { login, password: input.password } });
      expect(res.status, res.text).toBe(200);
      expectTokenBody(res.body);
      expect(res.body.user).toEqual(registered.body.user);
      expect(res.body.refresh_token).not.toBe(registered.body.refresh_token);
      const me = await t.request('GET', '/api/v1/auth/me', { token: res.body.access_token });
      expect(me.body.id).toBe(registered.body.user.id);
    }
  });

  it('401 with the same code and message for an unknown user and a wrong password', async () => {
    const input = fresh();
    await t.request('POST', '/api/v1/auth/register', { body: input });
    const wrongPassword = await t.request('POST', '/api/v1/auth/login', { body: { login: input.email, password: 'wrong password!' } });
    const unknownUser = await t.request('POST', '/api/v1/auth/login', { body: { login: `nobody${counter}@example.com`, password: input.password } });
    expectError(wrongPassword, 401, 'invalid_credentials');
    expectError(unknownUser, 401, 'invalid_credentials');
    expect(unknownUser.body).toEqual(wrongPassword.body);
  });

  it('400 for a missing password', async () => {
    expectError(await t.request('POST', '/api/v1/auth/login', { body: { login: 'someone' } }), 400, 'BAD_REQUEST');
  });
});

describe('refresh and logout', () => {
  it('refresh rotates: new tokens work, the old refresh token is 401', async () => {
    const user = await t.newUser('rot');
    const refreshed = await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh_token } });
    expect(refreshed.status, refreshed.text).toBe(200);
    expectTokenBody(refreshed.body);
    expect(refreshed.body.refresh_token).not.toBe(user.refresh_token);
    expect((await t.request('GET', '/api/v1/auth/me', { token: refreshed.body.access_token })).status).toBe(200);

    const twice = await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: refreshed.body.refresh_token } });
    expect(twice.status).toBe(200);
    const old = await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh_token } });
    expectError(old, 401, 'invalid_refresh_token');
  });

  it('reusing a just-rotated refresh token ends the session: every token of it stops working', async () => {
    const user = await t.newUser('reuse');
    const refreshed = await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh_token } });
    expect(refreshed.status).toBe(200);
    // From another client (the reuse grace covers only the client that rotated it: accounts-passwords.test.ts).
    const stolen = await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh_token }, headers: { 'user-agent': 'thief/1.0' } });
    expectError(stolen, 401, 'invalid_refresh_token');
    expectError(await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: refreshed.body.refresh_token } }), 401, 'invalid_refresh_token');
    expectError(await t.request('GET', '/api/v1/auth/me', { token: refreshed.body.access_token }), 401, 'unauthorized');
    expectError(await t.request('GET', '/api/v1/auth/me', { token: user.token }), 401, 'unauthorized');
  });

  it('401 for malformed and forged refresh tokens', async () => {
    const user = await t.newUser('forge');
    const [rt, uid, sid] = user.refresh_token.split('.');
    for (const refresh_token of ['garbage', 'rt.a.b', `${rt}.${uid}.${sid}.AAAA`, `${rt}.usr_nobody.${sid}.AAAA`, 'rt...x']) {
      expectError(await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token } }), 401, 'invalid_refresh_token');
    }
    // The forged attempts did not end the real session.
    expect((await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh_token } })).status).toBe(200);
  });

  it('logout cuts off the access token and the refresh token at once, and only that session', async () => {
    const user = await t.newUser('out');
    const other = await t.request('POST', '/api/v1/auth/login', { body: { login: user.username, password: user.password } });
    expect(other.status).toBe(200);
    // Warm the token cache so logout is checked against the session, not the signature.
    expect((await t.request('GET', '/api/v1/auth/me', { token: user.token })).status).toBe(200);
    const out = await t.request('POST', '/api/v1/auth/logout', { token: user.token });
    expect(out.status, out.text).toBe(200);
    expect(out.body).toEqual({ message: expect.any(String) });
    expectError(await t.request('GET', '/api/v1/auth/me', { token: user.token }), 401, 'unauthorized');
    expectError(await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh_token } }), 401, 'invalid_refresh_token');
    expectError(await t.request('POST', '/api/v1/auth/logout', { token: user.token }), 401, 'unauthorized');
    expect((await t.request('GET', '/api/v1/auth/me', { token: other.body.access_token })).status).toBe(200);
  });
});

describe('bearer tokens', () => {
  it('401 with the error shape for a missing, malformed or tampered token', async () => {
    const user = await t.newUser('bearer');
    expectError(await t.request('GET', '/api/v1/auth/me'), 401, 'unauthorized');
    expectError(await t.request('GET', '/api/v1/auth/me', { headers: { authorization: 'Basic abc' } }), 401, 'unauthorized');
    expectError(await t.request('GET', '/api/v1/auth/me', { token: 'not.a.jwt' }), 401, 'unauthorized');
    const [header, payload, signature] = user.token.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const forged = Buffer.from(JSON.stringify({ ...claims, sub: 'usr_someone_else' })).toString('base64url');
    expectError(await t.request('GET', '/api/v1/auth/me', { token: `${header}.${forged}.${signature}` }), 401, 'unauthorized');
    expectError(await t.request('GET', '/api/v1/auth/me', { token: 'x'.repeat(5000) }), 401, 'unauthorized');
  });

  it('an access token expires after expires_in seconds (manual clock); refresh still works', async () => {
    const user = await t.newUser('exp');
    const me = await t.request('GET', '/api/v1/auth/me', { token: user.token });
    expect(me.status).toBe(200);
    const login = await t.request('POST', '/api/v1/auth/login', { body: { login: user.username, password: user.password } });
    (t.clock as ManualClock).advance(login.body.expires_in * 1000 + 1000);
    expectError(await t.request('GET', '/api/v1/auth/me', { token: login.body.access_token }), 401, 'unauthorized');
    expectError(await t.request('GET', '/api/v1/auth/me', { token: user.token }), 401, 'unauthorized');
    const refreshed = await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: login.body.refresh_token } });
    expect(refreshed.status).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/me', { token: refreshed.body.access_token })).status).toBe(200);
  });
});

describe('across a restart', () => {
  it('access and refresh tokens survive a restart (the signing key is persisted); the bootstrap admin is created once', async () => {
    const admin = { email: 'root@example.com', password: 'admin password 1' };
    let node = await startTestNode({ clock: 'manual', config: { adminEmail: admin.email, adminPassword: admin.password } });
    try {
      const user = await node.newUser('restart');
      const adminLogin = await node.request('POST', '/api/v1/auth/login', { body: { login: admin.email, password: admin.password } });
      expect(adminLogin.status, adminLogin.text).toBe(200);
      expect(adminLogin.body.user.role).toBe('admin');
      await node.stop();
      node = await startTestNode({ clock: 'manual', dataDir: node.dataDir, config: { adminEmail: admin.email, adminPassword: 'a different one' } });
      const me = await node.request('GET', '/api/v1/auth/me', { token: user.token });
      expect(me.status, me.text).toBe(200);
      expect(me.body.id).toBe(user.user_id);
      expect((await node.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh_token } })).status).toBe(200);
      expect((await node.request('POST', '/api/v1/auth/login', { body: { login: user.email, password: user.password } })).status).toBe(200);
      // The admin existed, so the second start did not create another one or change its password.
      expect((await node.request('POST', '/api/v1/auth/login', { body: { login: admin.email, password: admin.password } })).status).toBe(200);
      expectError(await node.request('POST', '/api/v1/auth/login', { body: { login: admin.email, password: 'a different one' } }), 401, 'invalid_credentials');
    } finally {
      await node.destroy();
    }
  });
});
