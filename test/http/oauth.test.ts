import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { s256Challenge } from '../../actors/oauth/messages.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

let t: TestNode;
let as: oauth.AuthorizationServer;
const insecure = { [oauth.allowInsecureRequests]: true };
const REDIRECT = 'http://127.0.0.1:9/callback';
const VERIFIER = 'a'.repeat(20) + 'B-._~'.repeat(5);
const ADMIN = { adminEmail: 'root@example.com', adminPassword: 'admin password 123' };

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: ADMIN });
  const issuer = new URL(t.url);
  as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { ...insecure, algorithm: 'oauth2' }));
});
afterAll(async () => t.destroy());

const clock = () => t.clock as ManualClock;

async function register(body: Record<string, unknown>, token?: string) {
  const res = await t.request('POST', '/oauth/register', { body, token });
  expect(res.status).toBe(201);
  return res.body;
}

/** GET /oauth/authorize without following redirects. */
async function authorize(params: Record<string, string>) {
  const response = await fetch(`${t.url}/oauth/authorize?${new URLSearchParams(params)}`, { redirect: 'manual' });
  const text = await response.text();
  return { status: response.status, location: response.headers.get('location'), body: text ? JSON.parse(text) : undefined };
}

async function form(body: Record<string, string>, headers: Record<string, string> = {}) {
  const response = await fetch(`${t.url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(body).toString(),
  });
  return { status: response.status, body: (await response.json()) as any, headers: response.headers };
}

/** Authorize and complete as `user` for a public client: returns the code. */
async function codeFor(client_id: string, token: string, verifier = VERIFIER): Promise<string> {
  const start = await authorize({
    response_type: 'code', client_id, redirect_uri: REDIRECT, code_challenge: s256Challenge(verifier), code_challenge_method: 'S256', state: 's1',
  });
  expect(start.status).toBe(200);
  const done = await t.request('POST', '/oauth/authorize/complete', { token, body: { login_state: start.body.login_state } });
  expect(done.status).toBe(200);
  return new URL(done.body.redirect_to).searchParams.get('code')!;
}

describe('OAuth 2.0 end to end with oauth4webapi', () => {
  it('publishes metadata and the JWKS', async () => {
    expect(as.issuer).toBe(t.url);
    expect(as.token_endpoint).toBe(`${t.url}/oauth/token`);
    expect(as.code_challenge_methods_supported).toContain('S256');
    const jwks = await t.request('GET', '/.well-known/jwks.json');
    expect(jwks.status).toBe(200);
    expect(jwks.body.keys).toHaveLength(1);
    expect(jwks.body.keys[0]).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
    expect(jwks.body.keys[0]).not.toHaveProperty('d');
  });

  it('appears in the OpenAPI document, the token endpoint as a form', async () => {
    const doc = (await t.request('GET', '/openapi.json')).body;
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining([
      '/oauth/register', '/oauth/authorize', '/oauth/authorize/complete', '/oauth/token', '/.well-known/oauth-authorization-server', '/.well-known/jwks.json',
    ]));
    expect(Object.keys(doc.paths['/oauth/token'].post.requestBody.content)).toEqual(['application/x-www-form-urlencoded']);
    expect(doc.paths['/oauth/authorize/complete'].post.security).toEqual([{ bearerAuth: [] }]);
  });

  it('register -> authorize -> login -> complete -> code with PKCE -> /auth/me -> refresh', async () => {
    const registered = await oauth.processDynamicClientRegistrationResponse(
      await oauth.dynamicClientRegistrationRequest(as, {
        client_name: 'Public app', redirect_uris: [REDIRECT], grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'none',
      }, insecure),
    );
    expect(registered.client_id).toMatch(/^oc_/);
    expect(registered).not.toHaveProperty('client_secret');
    const client: oauth.Client = { client_id: registered.client_id };

    const verifier = oauth.generateRandomCodeVerifier();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      response_type: 'code', client_id: client.client_id, redirect_uri: REDIRECT, scope: 'auth:read locks:read',
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state: 'xyz',
    }).toString();
    const start = await fetch(url, { redirect: 'manual' });
    expect(start.status).toBe(200);
    const step = (await start.json()) as any;
    expect(step).toMatchObject({ client_name: 'Public app', scope: 'auth:read locks:read', expires_in: 600 });

    // The user logs in, then approves.
    const user = await t.newUser('oauth');
    const login = await t.request('POST', '/api/v1/auth/login', { body: { login: user.email, password: user.password } });
    expect(login.status).toBe(200);
    const idem = { 'idempotency-key': `complete-${step.login_state.slice(-12)}` };
    const done = await t.request('POST', '/oauth/authorize/complete', { token: login.body.access_token, body: { login_state: step.login_state }, headers: idem });
    expect(done.status).toBe(200);
    expect(done.body.redirect_to.startsWith(`${REDIRECT}?`)).toBe(true);
    // The code is a credential: a replay under the same Idempotency-Key says the request ran, and repeats no code.
    const replay = await t.request('POST', '/oauth/authorize/complete', { token: login.body.access_token, body: { login_state: step.login_state }, headers: idem });
    expect(replay.status, replay.text).toBe(409);
    expect(replay.body.code).toBe('idempotency_replay_withheld');

    const params = oauth.validateAuthResponse(as, client, new URL(done.body.redirect_to), 'xyz');
    const tokens = await oauth.processAuthorizationCodeResponse(
      as, client, await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, REDIRECT, verifier, insecure),
    );
    expect(tokens.token_type).toBe('bearer');
    expect(tokens.scope).toBe('auth:read locks:read');
    expect(tokens.expires_in).toBeGreaterThan(0);
    expect(tokens.refresh_token).toBeTruthy();

    const me = await t.request('GET', '/api/v1/auth/me', { token: tokens.access_token });
    expect(me.status).toBe(200);
    expect(me.body.id ?? me.body.user?.id).toBe(user.user_id);
    // The granted scope is enforced: reads of locks yes, writes and credential management no.
    expect((await t.request('GET', '/api/v1/distributed-state/oauth/user/lock', { token: tokens.access_token })).status).toBe(200);
    const write = await t.request('POST', '/api/v1/distributed-state/oauth/user/lock', { token: tokens.access_token, body: { owner_id: 'app' } });
    expect(write.status).toBe(403);
    expect(write.body.code).toBe('insufficient_scope');
    expect((await t.request('GET', '/api/v1/auth/api-keys', { token: tokens.access_token })).status).toBe(403);
    expect((await t.request('POST', '/oauth/authorize/complete', { token: tokens.access_token, body: { login_state: step.login_state } })).status).toBe(403);

    const refreshed = await oauth.processRefreshTokenResponse(
      as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token!, insecure),
    );
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    expect(refreshed.scope).toBe('auth:read locks:read');
    expect((await t.request('GET', '/api/v1/auth/me', { token: refreshed.access_token })).status).toBe(200);

    // The old refresh token is spent (rotation).
    const again = await form({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: client.client_id });
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_grant');
  });

  it('client_credentials: a token for the client itself, limited to its registered scopes', async () => {
    const owner = await t.newUser('oauthowner');
    const registered = await oauth.processDynamicClientRegistrationResponse(
      await oauth.dynamicClientRegistrationRequest(as, {
        client_name: 'Service', grant_types: ['client_credentials'], token_endpoint_auth_method: 'client_secret_basic', scope: 'auth:read locks:read locks:write',
      }, { ...insecure, initialAccessToken: owner.token }),
    );
    expect(registered.client_secret).toBeTruthy();
    const client: oauth.Client = { client_id: registered.client_id };
    const auth = oauth.ClientSecretBasic(registered.client_secret as string);
    const tokens = await oauth.processClientCredentialsResponse(
      as, client, await oauth.clientCredentialsGrantRequest(as, client, auth, { scope: 'locks:write' }, insecure),
    );
    expect(tokens.scope).toBe('locks:write');
    expect(tokens.refresh_token).toBeUndefined();

    const lock = await t.request('POST', '/api/v1/distributed-state/oauth/res/lock', {
      token: tokens.access_token, body: { owner_id: 'svc', ttl_seconds: 30 },
    });
    expect([200, 201]).toContain(lock.status);
    // Not granted: the read scope; never: the user-only auth routes.
    const read = await t.request('GET', '/api/v1/distributed-state/oauth/res/lock', { token: tokens.access_token });
    expect(read.status).toBe(403);
    expect(read.body.code).toBe('insufficient_scope');
    expect((await t.request('GET', '/api/v1/auth/me', { token: tokens.access_token })).status).toBe(403);

    // Wrong secret, and a scope beyond the registration.
    const wrong = await form({ grant_type: 'client_credentials' }, {
      authorization: `Basic ${Buffer.from(`${registered.client_id}:nope`).toString('base64')}`,
    });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toBe('invalid_client');
    const tooMuch = await form({ grant_type: 'client_credentials', scope: 'presence:write' }, {
      authorization: `Basic ${Buffer.from(`${registered.client_id}:${registered.client_secret as string}`).toString('base64')}`,
    });
    expect(tooMuch.status).toBe(400);
    expect(tooMuch.body.error).toBe('invalid_scope');
    const userOnly = await form({ grant_type: 'client_credentials', scope: 'auth:read' }, {
      authorization: `Basic ${Buffer.from(`${registered.client_id}:${registered.client_secret as string}`).toString('base64')}`,
    });
    expect(userOnly.body.error).toBe('invalid_scope');

    // The owner's account banned: the client gets no new token.
    const admin = (await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.adminEmail, password: ADMIN.adminPassword } })).body.access_token;
    expect((await t.request('POST', `/admin/auth/users/${owner.user_id}/ban`, { token: admin, body: { reason: 'left' } })).status).toBe(200);
    const afterBan = await form({ grant_type: 'client_credentials', scope: 'locks:write' }, {
      authorization: `Basic ${Buffer.from(`${registered.client_id}:${registered.client_secret as string}`).toString('base64')}`,
    });
    expect(afterBan.status).toBe(401);
    expect(afterBan.body.error).toBe('invalid_client');
  });

  it('client_secret_post for the code flow, and the method must match the registration', async () => {
    const reg = await register({ redirect_uris: [REDIRECT], token_endpoint_auth_method: 'client_secret_post' });
    const user = await t.newUser('oauthpost');
    const code = await codeFor(reg.client_id, user.token);
    const basic = await form({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: VERIFIER }, {
      authorization: `Basic ${Buffer.from(`${reg.client_id}:${reg.client_secret}`).toString('base64')}`,
    });
    expect(basic.status).toBe(401);
    const code2 = await codeFor(reg.client_id, user.token);
    const ok = await form({ grant_type: 'authorization_code', code: code2, redirect_uri: REDIRECT, code_verifier: VERIFIER, client_id: reg.client_id, client_secret: reg.client_secret });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('cache-control')).toBe('no-store');
    expect(ok.body.refresh_token).toBeUndefined(); // refresh_token grant not registered
  });
});

describe('OAuth 2.0 errors', () => {
  let client_id: string;
  let user: Awaited<ReturnType<TestNode['newUser']>>;
  beforeAll(async () => {
    client_id = (await register({ redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] })).client_id;
    user = await t.newUser('oautherr');
  });

  it('registration refuses bad redirect URIs and inconsistent metadata', async () => {
    for (const body of [
      { redirect_uris: ['http://example.com/cb'] },
      { redirect_uris: ['https://example.com/cb#frag'] },
      { redirect_uris: ['myapp://cb'] },
      { redirect_uris: ['https:///cb'] },
      { redirect_uris: ['https:cb.example/cb'] },
      { redirect_uris: [] },
      { grant_types: ['client_credentials'], token_endpoint_auth_method: 'none' },
      { grant_types: ['password'], redirect_uris: [REDIRECT] },
      { redirect_uris: [REDIRECT], token_endpoint_auth_method: 'private_key_jwt' },
      { redirect_uris: [REDIRECT], scope: 'admin' },
    ]) {
      const res = await t.request('POST', '/oauth/register', { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('BAD_REQUEST');
    }
    const loopback = await t.request('POST', '/oauth/register', { body: { redirect_uris: ['http://localhost:3000/cb', 'https://app.example/cb'] } });
    expect(loopback.status).toBe(201);
    expect(loopback.body.token_endpoint_auth_method).toBe('client_secret_basic');
    expect(loopback.body.client_secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('an unknown client or unregistered redirect_uri is a 400, never a redirect', async () => {
    const challenge = s256Challenge(VERIFIER);
    const unknown = await authorize({ response_type: 'code', client_id: 'oc_' + '0'.repeat(32), redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256' });
    expect(unknown.status).toBe(400);
    expect(unknown.location).toBeNull();
    const wrong = await authorize({ response_type: 'code', client_id, redirect_uri: 'http://127.0.0.1:9/other', code_challenge: challenge, code_challenge_method: 'S256' });
    expect(wrong.status).toBe(400);
    expect(wrong.location).toBeNull();
  });

  it('plain PKCE, a missing challenge and a bad response_type redirect back with error and state', async () => {
    const cases: [Record<string, string>, string][] = [
      [{ response_type: 'code', code_challenge: VERIFIER, code_challenge_method: 'plain' }, 'invalid_request'],
      [{ response_type: 'code', code_challenge: VERIFIER }, 'invalid_request'],
      [{ response_type: 'code' }, 'invalid_request'],
      [{ response_type: 'token', code_challenge: s256Challenge(VERIFIER), code_challenge_method: 'S256' }, 'unsupported_response_type'],
      [{ response_type: 'code', code_challenge: s256Challenge(VERIFIER), code_challenge_method: 'S256', scope: 'presence:write admin' }, 'invalid_scope'],
    ];
    for (const [params, error] of cases) {
      const res = await authorize({ client_id, redirect_uri: REDIRECT, state: 'st', ...params });
      expect(res.status).toBe(302);
      const location = new URL(res.location!);
      expect(`${location.origin}${location.pathname}`).toBe(REDIRECT);
      expect(location.searchParams.get('error')).toBe(error);
      expect(location.searchParams.get('state')).toBe('st');
    }
  });

  it('redirect_uri at the token endpoint: required (invalid_request, the code kept) when the authorization request named it, optional when it did not', async () => {
    // codeFor names redirect_uri: leaving it out is a malformed request, and the code is still good after.
    const named = await codeFor(client_id, user.token);
    const missing = await form({ grant_type: 'authorization_code', client_id, code: named, code_verifier: VERIFIER });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe('invalid_request');
    expect((await form({ grant_type: 'authorization_code', client_id, code: named, redirect_uri: REDIRECT, code_verifier: VERIFIER })).status).toBe(200);
    // Left out at authorize (the client registered one): the exchange without it succeeds (RFC 6749 §4.1.3).
    const start = await authorize({ response_type: 'code', client_id, code_challenge: s256Challenge(VERIFIER), code_challenge_method: 'S256' });
    expect(start.status).toBe(200);
    const done = await t.request('POST', '/oauth/authorize/complete', { token: user.token, body: { login_state: start.body.login_state } });
    const code = new URL(done.body.redirect_to).searchParams.get('code')!;
    const exchanged = await form({ grant_type: 'authorization_code', client_id, code, code_verifier: VERIFIER });
    expect(exchanged.status, JSON.stringify(exchanged.body)).toBe(200);
  });

  it('a wrong verifier, a wrong redirect_uri and a reused code are invalid_grant', async () => {
    const wrongVerifier = await form({ grant_type: 'authorization_code', client_id, code: await codeFor(client_id, user.token), redirect_uri: REDIRECT, code_verifier: 'b'.repeat(43) });
    expect(wrongVerifier.status).toBe(400);
    expect(wrongVerifier.body).toEqual({ error: 'invalid_grant', error_description: expect.stringContaining('code_verifier') });

    const wrongRedirect = await form({ grant_type: 'authorization_code', client_id, code: await codeFor(client_id, user.token), redirect_uri: 'http://127.0.0.1:9/other', code_verifier: VERIFIER });
    expect(wrongRedirect.body.error).toBe('invalid_grant');

    const code = await codeFor(client_id, user.token);
    const first = await form({ grant_type: 'authorization_code', client_id, code, redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(first.status).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/me', { token: first.body.access_token })).status).toBe(200);
    const replay = await form({ grant_type: 'authorization_code', client_id, code, redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(replay.status).toBe(400);
    expect(replay.body.error).toBe('invalid_grant');
    // The replay ended the session the code had opened.
    expect((await t.request('GET', '/api/v1/auth/me', { token: first.body.access_token })).status).toBe(401);
  });

  it('a code expires after 60 s and a login_state after 10 min', async () => {
    const code = await codeFor(client_id, user.token);
    clock().advance(60_001);
    const late = await form({ grant_type: 'authorization_code', client_id, code, redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(late.body.error).toBe('invalid_grant');

    const start = await authorize({ response_type: 'code', client_id, redirect_uri: REDIRECT, code_challenge: s256Challenge(VERIFIER), code_challenge_method: 'S256' });
    clock().advance(601_000);
    const fresh = await t.newUser('oauthlate');
    const done = await t.request('POST', '/oauth/authorize/complete', { token: fresh.token, body: { login_state: start.body.login_state } });
    expect(done.status).toBe(400);
    const forged = await t.request('POST', '/oauth/authorize/complete', { token: fresh.token, body: { login_state: 'not-a-token' } });
    expect(forged.status).toBe(400);
    const anonymous = await t.request('POST', '/oauth/authorize/complete', { body: { login_state: start.body.login_state } });
    expect(anonymous.status).toBe(401);
  });

  it('token endpoint: unknown client, unsupported grant, missing parameters, JSON body, another client\'s refresh token', async () => {
    const unknown = await form({ grant_type: 'authorization_code', client_id: 'oc_' + '1'.repeat(32), code: 'x', redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(unknown.status).toBe(401);
    expect(unknown.body.error).toBe('invalid_client');
    expect((await form({ grant_type: 'password', client_id })).body.error).toBe('unsupported_grant_type');
    expect((await form({ grant_type: 'client_credentials', client_id })).body.error).toBe('unauthorized_client');
    const missing = await form({ grant_type: 'authorization_code', client_id, redirect_uri: REDIRECT });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe('invalid_request');
    const json = await t.request('POST', '/oauth/token', { body: { grant_type: 'client_credentials' } });
    expect(json.status).toBe(400);
    expect(json.body.error).toBe('invalid_request');
    // A session refresh token, or another client's refresh token, is refused.
    const other = await t.newUser('oauthrt');
    const session = await form({ grant_type: 'refresh_token', client_id, refresh_token: other.refresh_token });
    expect(session.body.error).toBe('invalid_grant');
    const second = (await register({ redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] })).client_id;
    const issued = await form({ grant_type: 'authorization_code', client_id: second, code: await codeFor(second, other.token), redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(issued.status).toBe(200);
    expect(issued.body.refresh_token).toMatch(/^ort\./);
    const foreign = await form({ grant_type: 'refresh_token', client_id, refresh_token: issued.body.refresh_token });
    expect(foreign.body.error).toBe('invalid_grant');
    // The client's refresh token is not a session refresh token: /api/v1/auth/refresh refuses it.
    expect((await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: issued.body.refresh_token } })).status).toBe(401);
    // Replaying a rotated-out refresh token ends the session.
    const rotated = await form({ grant_type: 'refresh_token', client_id: second, refresh_token: issued.body.refresh_token });
    expect(rotated.status).toBe(200);
    const replay = await form({ grant_type: 'refresh_token', client_id: second, refresh_token: issued.body.refresh_token });
    expect(replay.body.error).toBe('invalid_grant');
    expect((await t.request('GET', '/api/v1/auth/me', { token: rotated.body.access_token })).status).toBe(401);
    expect((await form({ grant_type: 'refresh_token', client_id: second, refresh_token: rotated.body.refresh_token })).body.error).toBe('invalid_grant');
  });

  it('refresh with a scope: narrower is granted; wider is invalid_scope and the refresh token keeps working', async () => {
    const scoped = (await register({
      redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], scope: 'auth:read locks:read',
    })).client_id;
    const owner = await t.newUser('oauthscope');
    const issued = await form({ grant_type: 'authorization_code', client_id: scoped, code: await codeFor(scoped, owner.token), redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(issued.status).toBe(200);
    expect(issued.body.scope).toBe('auth:read locks:read');

    const wider = await form({ grant_type: 'refresh_token', client_id: scoped, refresh_token: issued.body.refresh_token, scope: 'locks:read locks:write' });
    expect(wider.status).toBe(400);
    expect(wider.body.error).toBe('invalid_scope');
    // Nothing was rotated: the session lives on and the same refresh token still works.
    expect((await t.request('GET', '/api/v1/auth/me', { token: issued.body.access_token })).status).toBe(200);
    const narrower = await form({ grant_type: 'refresh_token', client_id: scoped, refresh_token: issued.body.refresh_token, scope: 'locks:read' });
    expect(narrower.status, JSON.stringify(narrower.body)).toBe(200);
    expect(narrower.body.scope).toBe('locks:read');
    const me = await t.request('GET', '/api/v1/auth/me', { token: narrower.body.access_token });
    expect(me.status).toBe(403);
    expect(me.body.code).toBe('insufficient_scope');
    expect((await t.request('GET', '/api/v1/distributed-state/oauth/scope/lock', { token: narrower.body.access_token })).status).toBe(200);
    // The grant keeps its original scope: the next refresh may ask for all of it again.
    const full = await form({ grant_type: 'refresh_token', client_id: scoped, refresh_token: narrower.body.refresh_token });
    expect(full.status).toBe(200);
    expect(full.body.scope).toBe('auth:read locks:read');
    expect((await t.request('GET', '/api/v1/auth/me', { token: full.body.access_token })).status).toBe(200);
  });

  it('clients, codes and refresh bindings survive a restart', async () => {
    const reg = await register({ grant_types: ['client_credentials'], scope: 'locks:read' }, user.token);
    const code = await codeFor(client_id, user.token);
    const issued = await form({ grant_type: 'authorization_code', client_id, code: await codeFor(client_id, user.token), redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(issued.status).toBe(200);
    const dataDir = t.dataDir;
    const now = clock().now();
    await t.stop();
    t = await startTestNode({ clock: 'manual', dataDir, config: ADMIN });
    clock().advance(now - clock().now());
    const res = await form({ grant_type: 'client_credentials' }, {
      authorization: `Basic ${Buffer.from(`${reg.client_id}:${reg.client_secret}`).toString('base64')}`,
    });
    expect(res.status).toBe(200);
    expect(res.body.scope).toBe('locks:read');
    const redeemed = await form({ grant_type: 'authorization_code', client_id, code, redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(redeemed.status).toBe(200);
    const refreshed = await form({ grant_type: 'refresh_token', client_id, refresh_token: issued.body.refresh_token });
    expect(refreshed.status).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/me', { token: refreshed.body.access_token })).status).toBe(200);
  });
});

async function adminToken(): Promise<string> {
  const res = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.adminEmail, password: ADMIN.adminPassword } });
  expect(res.status, res.text).toBe(200);
  return res.body.access_token;
}

/** A public client with the refresh_token grant, and tokens of a fresh user through the code flow. */
async function codeFlowTokens(prefix: string) {
  const client_id = (await register({ redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] })).client_id;
  const user = await t.newUser(prefix);
  const issued = await form({ grant_type: 'authorization_code', client_id, code: await codeFor(client_id, user.token), redirect_uri: REDIRECT, code_verifier: VERIFIER });
  expect(issued.status).toBe(200);
  expect((await t.request('GET', '/api/v1/auth/me', { token: issued.body.access_token })).status).toBe(200);
  return { client_id, user, access_token: issued.body.access_token as string, refresh_token: issued.body.refresh_token as string };
}

describe('OAuth client registration needs a user for client_credentials; an admin deletes clients', () => {
  it('a client_credentials client needs a session bearer, which becomes its owner; other clients register openly', async () => {
    const body = { grant_types: ['client_credentials'], scope: 'locks:read' };
    const anonymous = await t.request('POST', '/oauth/register', { body });
    expect(anonymous.status, anonymous.text).toBe(401);
    expect(anonymous.body.code).toBe('unauthorized');
    const user = await t.newUser('oauthreg');
    expect((await t.request('POST', '/oauth/register', { body, token: 'not-a-token' })).status).toBe(401);
    const key = await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body: { name: 'k', scopes: ['*'] } });
    const byKey = await t.request('POST', '/oauth/register', { body, token: key.body.key });
    expect(byKey.status).toBe(403);
    expect(byKey.body.code).toBe('forbidden');
    const ok = await t.request('POST', '/oauth/register', { body, token: user.token });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body).not.toHaveProperty('owner_user_id');
    // An authorization-code client, public or confidential, needs no bearer (RFC 7591 open registration).
    expect((await t.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT] } })).status).toBe(201);
    expect((await t.request('POST', '/oauth/register', { body: { redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' } })).status).toBe(201);
    // A banned user's bearer no longer registers one.
    const admin = await adminToken();
    expect((await t.request('POST', `/admin/auth/users/${user.user_id}/ban`, { token: admin, body: { reason: 'abuse' } })).status).toBe(200);
    expect((await t.request('POST', '/oauth/register', { body, token: user.token })).status).toBe(401);
  });

  it('DELETE /admin/oauth/clients/{id} cuts off client tokens, codes and refresh tokens at once and ends its sessions', async () => {
    const owner = await t.newUser('oauthdel');
    const service = await register({ grant_types: ['client_credentials'], scope: 'locks:read locks:write' }, owner.token);
    const basic = { authorization: `Basic ${Buffer.from(`${service.client_id}:${service.client_secret}`).toString('base64')}` };
    const cc = await form({ grant_type: 'client_credentials' }, basic);
    expect(cc.status).toBe(200);
    expect((await t.request('GET', '/api/v1/distributed-state/oauth/del/lock', { token: cc.body.access_token })).status).toBe(200);
    const app = await codeFlowTokens('oauthdelu');
    const pendingCode = await codeFor(app.client_id, app.user.token);

    const admin = await adminToken();
    // Only a platform admin; an unknown or malformed id is 404.
    const notAdmin = await t.request('DELETE', `/admin/oauth/clients/${service.client_id}`, { token: owner.token });
    expect(notAdmin.status).toBe(403);
    expect(notAdmin.body.code).toBe('forbidden');
    expect((await t.request('DELETE', `/admin/oauth/clients/${service.client_id}`)).status).toBe(401);
    expect((await t.request('DELETE', `/admin/oauth/clients/oc_${'0'.repeat(32)}`, { token: admin })).status).toBe(404);
    expect((await t.request('DELETE', '/admin/oauth/clients/nope', { token: admin })).status).toBe(404);

    const deleted = await t.request('DELETE', `/admin/oauth/clients/${service.client_id}`, { token: admin });
    expect(deleted.status, deleted.text).toBe(200);
    const refused = await t.request('GET', '/api/v1/distributed-state/oauth/del/lock', { token: cc.body.access_token });
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('unauthorized');
    expect((await form({ grant_type: 'client_credentials' }, basic)).body.error).toBe('invalid_client');
    expect((await t.request('DELETE', `/admin/oauth/clients/${service.client_id}`, { token: admin })).status).toBe(404);

    const appDeleted = await t.request('DELETE', `/admin/oauth/clients/${app.client_id}`, { token: admin });
    expect(appDeleted.status, appDeleted.text).toBe(200);
    expect(appDeleted.body.message).toContain('1 session ended');
    expect((await t.request('GET', '/api/v1/auth/me', { token: app.access_token })).status).toBe(401);
    expect((await form({ grant_type: 'refresh_token', client_id: app.client_id, refresh_token: app.refresh_token })).body.error).toBe('invalid_client');
    expect((await form({ grant_type: 'authorization_code', client_id: app.client_id, code: pendingCode, redirect_uri: REDIRECT, code_verifier: VERIFIER })).body.error)
      .toBe('invalid_client');
    const start = await authorize({ response_type: 'code', client_id: app.client_id, redirect_uri: REDIRECT, code_challenge: s256Challenge(VERIFIER), code_challenge_method: 'S256' });
    expect(start.status).toBe(400);
    // The user's own session is untouched.
    expect((await t.request('GET', '/api/v1/auth/me', { token: app.user.token })).status).toBe(200);
  });
});

describe('OAuth user tokens (authorization code flow) end with their session', () => {
  it('a ban cuts off the access token and the refresh token at once', async () => {
    const app = await codeFlowTokens('oauthban');
    const banned = await t.request('POST', `/admin/auth/users/${app.user.user_id}/ban`, { token: await adminToken(), body: { reason: 'abuse' } });
    expect(banned.status).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/me', { token: app.access_token })).status).toBe(401);
    expect((await form({ grant_type: 'refresh_token', client_id: app.client_id, refresh_token: app.refresh_token })).body.error).toBe('invalid_grant');
    // An unban does not bring the grant back (the ban ended the session).
    await t.request('POST', `/admin/auth/users/${app.user.user_id}/unban`, { token: await adminToken() });
    expect((await t.request('GET', '/api/v1/auth/me', { token: app.access_token })).status).toBe(401);
    expect((await form({ grant_type: 'refresh_token', client_id: app.client_id, refresh_token: app.refresh_token })).body.error).toBe('invalid_grant');
  });

  it('a logout with the OAuth access token ends the grant: access and refresh tokens stop working', async () => {
    const app = await codeFlowTokens('oauthout');
    const out = await t.request('POST', '/api/v1/auth/logout', { token: app.access_token });
    expect(out.status, out.text).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/me', { token: app.access_token })).status).toBe(401);
    expect((await form({ grant_type: 'refresh_token', client_id: app.client_id, refresh_token: app.refresh_token })).body.error).toBe('invalid_grant');
    // Only the grant's session ended: the user's own session works on.
    expect((await t.request('GET', '/api/v1/auth/me', { token: app.user.token })).status).toBe(200);
    // The user's own logout ends the user's session, not a grant's.
    const other = await codeFlowTokens('oauthout2');
    expect((await t.request('POST', '/api/v1/auth/logout', { token: other.user.token })).status).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/me', { token: other.access_token })).status).toBe(200);
  });

  it('deleting the user cuts off the access token and the refresh token at once', async () => {
    const app = await codeFlowTokens('oauthgone');
    const gone = await t.request('DELETE', `/admin/auth/users/${app.user.user_id}`, { token: await adminToken() });
    expect(gone.status).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/me', { token: app.access_token })).status).toBe(401);
    expect((await form({ grant_type: 'refresh_token', client_id: app.client_id, refresh_token: app.refresh_token })).body.error).toBe('invalid_grant');
  });
});
