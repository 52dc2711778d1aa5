import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { base32Decode, totp } from '../../actors/accounts/messages.js';
import { s256Challenge } from '../../actors/oauth/messages.js';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';

/** POST /admin/auth/users/{id}/impersonate, with and without target two-factor. */
const ADMIN_EMAIL = 'root@example.com';
const ADMIN_PASSWORD = 'admin password 123';

let t: TestNode;
let adminToken: string;
let adminId: string;
const clock = () => t.clock as ManualClock;


const impersonate = (id: string, token = adminToken) => t.request('POST', `/admin/auth/users/${id}/impersonate`, { token });

async function sessionsOf(user_id: string) {
  const res = await t.request('GET', `/admin/auth/sessions?user_id=${user_id}`, { token: adminToken });
  expect(res.status, res.text).toBe(200);
  return res.body.sessions as { id: string; impersonated_by: string | null; active: boolean }[];
}

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
});
// Tests move the clock past the access token lifetime: a fresh admin token each time.
beforeEach(async () => {
  const res = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  expect(res.status, res.text).toBe(200);
  adminToken = res.body.access_token;
  adminId = res.body.user.id;
});
afterAll(async () => {
  await t?.destroy();
});

describe('impersonation', () => {
  it('returns tokens of the target whose session records impersonated_by', async () => {
    const user = await t.newUser('imp');
    const res = await impersonate(user.user_id);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ requires_2fa: false, token_type: 'Bearer', user: { id: user.user_id } });
    const me = await t.request('GET', '/api/v1/auth/me', { token: res.body.access_token });
    expect(me.body.id).toBe(user.user_id);
    const sessions = await sessionsOf(user.user_id);
    const marked = sessions.filter((s) => s.impersonated_by === adminId);
    expect(marked).toHaveLength(1);
    expect(sessions.filter((s) => s.impersonated_by === null)).toHaveLength(1); // the user's own session
  });

  it('an impersonation acts as a user even when its target is made an admin since: no admin routes, no impersonation in turn', async () => {
    const user = await t.newUser('promoted');
    const other = await t.newUser('bystander');
    const res = await impersonate(user.user_id);
    expect(res.status, res.text).toBe(200);
    const patched = await t.request('PATCH', `/admin/auth/users/${user.user_id}`, { token: adminToken, body: { role: 'admin' } });
    expect(patched.status, patched.text).toBe(200);
    const as = res.body.access_token as string;
    expectError(await t.request('GET', '/admin/auth/users', { token: as }), 403, 'forbidden');
    expectError(await t.request('POST', `/admin/auth/users/${other.user_id}/ban`, { token: as, body: { reason: 'x' } }), 403, 'forbidden');
    expectError(await impersonate(other.user_id, as), 403, 'forbidden');
    // Its own reads still work, as the user's.
    expect((await t.request('GET', '/api/v1/auth/me', { token: as })).body.id).toBe(user.user_id);
  });

  it('an impersonation session ends after an hour, refreshes included', async () => {
    const user = await t.newUser('imp');
    const res = await impersonate(user.user_id);
    clock().advance(30 * 60_000);
    const refreshed = await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: res.body.refresh_token } });
    expect(refreshed.status, refreshed.text).toBe(200);
    clock().advance(31 * 60_000);
    const late = await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: refreshed.body.refresh_token } });
    expectError(late, 401, 'invalid_refresh_token');
  });

  it('a target with two-factor needs its code through /api/v1/auth/2fa/verify, which records impersonated_by', async () => {
    const user = await t.newUser('imp2fa');
    const setup = await t.request('POST', '/api/v1/auth/2fa/totp/setup', { token: user.token });
    const code = () => totp(base32Decode(setup.body.secret)!, clock().now());
    expect((await t.request('POST', '/api/v1/auth/2fa/totp/verify-setup', { token: user.token, body: { code: code() } })).status).toBe(200);
    clock().advance(60_000);
    const res = await impersonate(user.user_id);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ requires_2fa: true, two_factor_token: expect.any(String), user: { id: user.user_id } });
    expect(res.body.access_token).toBeUndefined();
    const verified = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: res.body.two_factor_token, code: code() } });
    expect(verified.status, verified.text).toBe(200);
    expect(verified.body.user.id).toBe(user.user_id);
    // The user's own two-factor login is not marked.
    clock().advance(60_000);
    const own = await t.request('POST', '/api/v1/auth/login', { body: { login: user.username, password: user.password } });
    const ownVerified = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: own.body.two_factor_token, code: code() } });
    expect(ownVerified.status, ownVerified.text).toBe(200);
    const sessions = await sessionsOf(user.user_id);
    expect(sessions.filter((s) => s.impersonated_by === adminId)).toHaveLength(1);
    expect(sessions.filter((s) => s.impersonated_by === null)).toHaveLength(2);
  });

  it('refusals: no token 401, non-admin 403, self 409, unknown 404, another admin 403, banned 403', async () => {
    const user = await t.newUser('impr');
    expectError(await t.request('POST', `/admin/auth/users/${user.user_id}/impersonate`), 401, 'unauthorized');
    expectError(await impersonate(user.user_id, user.token), 403, 'forbidden');
    expectError(await impersonate(adminId), 409, 'conflict');
    expectError(await impersonate('usr_nobody'), 404, 'not_found');
    const other = await t.newUser('impa');
    const promoted = await t.request('PATCH', `/admin/auth/users/${other.user_id}`, { token: adminToken, body: { role: 'admin' } });
    expect(promoted.status, promoted.text).toBe(200);
    expectError(await impersonate(other.user_id), 403, 'forbidden');
    const banned = await t.request('POST', `/admin/auth/users/${user.user_id}/ban`, { token: adminToken, body: { reason: 'spam' } });
    expect(banned.status).toBe(200);
    expectError(await impersonate(user.user_id), 403, 'forbidden');
  });

  it('an impersonation session reads, but cannot create or change credentials (403 impersonation_forbidden)', async () => {
    const user = await t.newUser('impc');
    const own = await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body: { name: 'own', scopes: ['*'] } });
    expect(own.status, own.text).toBe(201);
    const imp = (await impersonate(user.user_id)).body.access_token as string;

    // Reads stay allowed.
    expect((await t.request('GET', '/api/v1/auth/me', { token: imp })).status).toBe(200);
    const keys = await t.request('GET', '/api/v1/auth/api-keys', { token: imp });
    expect(keys.status).toBe(200);
    expect(keys.body.api_keys).toHaveLength(1);
    expect((await t.request('GET', '/api/v1/auth/2fa/status', { token: imp })).status).toBe(200);

    // A pending OAuth authorization and a pending CLI login, as an attacker would prepare them.
    const client_id = (await t.request('POST', '/oauth/register', { body: { redirect_uris: ['http://127.0.0.1:9/cb'], token_endpoint_auth_method: 'none' } })).body.client_id;
    const start = await fetch(`${t.url}/oauth/authorize?${new URLSearchParams({
      response_type: 'code', client_id, redirect_uri: 'http://127.0.0.1:9/cb', code_challenge: s256Challenge('v'.repeat(43)), code_challenge_method: 'S256',
    })}`, { redirect: 'manual' });
    expect(start.status).toBe(200);
    const login_state = ((await start.json()) as { login_state: string }).login_state;
    const cli = await t.request('POST', '/api/v1/auth/cli/session');
    expect(cli.status).toBe(201);

    const refused: [string, string, unknown][] = [
      ['POST', '/api/v1/auth/api-keys', { name: 'imp', scopes: ['*'] }],
      ['PATCH', `/api/v1/auth/api-keys/${own.body.api_key_id}`, { scopes: ['auth:read'] }],
      ['DELETE', `/api/v1/auth/api-keys/${own.body.api_key_id}`, undefined],
      ['POST', '/oauth/authorize/complete', { login_state }],
      ['POST', '/oauth/register', { grant_types: ['client_credentials'], scope: 'locks:read' }],
      ['POST', `/api/v1/auth/cli/session/${cli.body.id}/complete`, undefined],
      ['POST', '/api/v1/auth/2fa/totp/setup', undefined],
      ['POST', '/api/v1/auth/2fa/totp/verify-setup', { code: '123456' }],
      ['POST', '/api/v1/auth/2fa/totp/disable', { code: '123456' }],
      ['POST', '/api/v1/auth/2fa/backup/regenerate', { code: '123456' }],
      ['POST', '/api/v1/auth/account/link', { provider: 'github', code: 'c', redirect_uri: 'https://app.example/cb' }],
      ['POST', '/api/v1/auth/account/unlink', { provider: 'github' }],
      ['POST', '/api/v1/auth/email/verify/send', {}],
    ];
    for (const [method, path, body] of refused) {
      const res = await t.request(method, path, { token: imp, body });
      expect(res.status, `${method} ${path}: ${res.text}`).toBe(403);
      expect(res.body.code, `${method} ${path}`).toBe('impersonation_forbidden');
    }
    // Nothing changed: the one key is intact, the CLI login is still pending, two-factor is off.
    const after = await t.request('GET', `/api/v1/auth/api-keys/${own.body.api_key_id}`, { token: user.token });
    expect(after.body).toMatchObject({ scopes: ['*'], revoked: false });
    expect((await t.request('GET', `/api/v1/auth/cli/session/${cli.body.id}`, { token: user.token })).body.status).toBe('pending');
    expect((await t.request('GET', '/api/v1/auth/2fa/status', { token: user.token })).body.enabled).toBe(false);
    // The user's own session may do the same things.
    expect((await t.request('POST', `/api/v1/auth/cli/session/${cli.body.id}/complete`, { token: user.token })).status).toBe(204);
    expect((await t.request('POST', '/oauth/authorize/complete', { token: user.token, body: { login_state } })).status).toBe(200);
  });

  it('the session stops working at once when its admin is banned, demoted or deleted', async () => {
    for (const revoke of ['ban', 'demote', 'delete'] as const) {
      const other = await t.newUser('impadm');
      expect((await t.request('PATCH', `/admin/auth/users/${other.user_id}`, { token: adminToken, body: { role: 'admin' } })).status).toBe(200);
      const target = await t.newUser('impt');
      const res = await impersonate(target.user_id, other.token);
      expect(res.status, res.text).toBe(200);
      const imp = res.body.access_token as string;
      // Twice: a second request must not be answered from a cached check either.
      expect((await t.request('GET', '/api/v1/auth/me', { token: imp })).status).toBe(200);
      expect((await t.request('GET', '/api/v1/auth/me', { token: imp })).status).toBe(200);
      const done =
        revoke === 'ban'
          ? await t.request('POST', `/admin/auth/users/${other.user_id}/ban`, { token: adminToken, body: { reason: 'rogue' } })
          : revoke === 'demote'
            ? await t.request('PATCH', `/admin/auth/users/${other.user_id}`, { token: adminToken, body: { role: 'user' } })
            : await t.request('DELETE', `/admin/auth/users/${other.user_id}`, { token: adminToken });
      expect(done.status, done.text).toBe(200);
      expectError(await t.request('GET', '/api/v1/auth/me', { token: imp }), 401, 'unauthorized');
      expectError(await t.request('GET', '/api/v1/distributed-state/imp/x/lock', { token: imp }), 401, 'unauthorized');
      // The target's own session is not affected.
      expect((await t.request('GET', '/api/v1/auth/me', { token: target.token })).status, revoke).toBe(200);
    }
  });
});
