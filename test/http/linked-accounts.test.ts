import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { s256Challenge } from '../../actors/oauth/messages.js';
import { parseOAuthProviders } from '../../http/auth/oauth-providers.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { freePort } from '../../cluster/free-port.js';

/**
 * Linked accounts against the node's own OAuth server as the provider: the
 * node links a code issued by itself, through its token endpoint and
 * /api/v1/auth/me as the userinfo endpoint. The provider's client is
 * registered on a first run, then the node restarts with OAUTH_PROVIDERS
 * naming it (the port is fixed so the endpoints stay valid).
 */
const REDIRECT = 'http://127.0.0.1:9/link-callback';
const VERIFIER = 'v'.repeat(30) + '-._~'.repeat(4);
const ADMIN_EMAIL = 'link-admin@example.com';
const ADMIN_PASSWORD = 'admin password 123';

let t: TestNode;
let port: number;
let dataDir: string;

function providersFor(client_id: string, client_secret: string) {
  const base = `http://127.0.0.1:${port}`;
  return parseOAuthProviders(
    JSON.stringify({
      self: {
        display_name: 'Platform (self)',
        authorization_endpoint: `${base}/oauth/authorize`,
        token_endpoint: `${base}/oauth/token`,
        userinfo_endpoint: `${base}/api/v1/auth/me`,
        client_id,
        client_secret,
      },
      // Nothing listens on port 9: the provider is unreachable.
      down: { display_name: 'Down', token_endpoint: 'http://127.0.0.1:9/token', userinfo_endpoint: 'http://127.0.0.1:9/me', client_id: 'x', client_secret: 'y' },
    }),
  );
}

let client: { client_id: string; client_secret: string };

async function start() {
  t = await startTestNode({
    clock: 'manual',
    dataDir,
    config: { port, adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD, oauthProviders: providersFor(client.client_id, client.client_secret) },
  });
}

beforeAll(async () => {
  port = await freePort();
  const first = await startTestNode({ clock: 'manual', config: { port } });
  dataDir = first.dataDir;
  const registered = await first.request('POST', '/oauth/register', {
    body: { client_name: 'Account linking', redirect_uris: [REDIRECT], grant_types: ['authorization_code'], token_endpoint_auth_method: 'client_secret_basic', scope: 'auth:read' },
  });
  expect(registered.status).toBe(201);
  client = { client_id: registered.body.client_id, client_secret: registered.body.client_secret };
  await first.stop();
  await start();
});
afterAll(async () => t.destroy());

/** An authorization code for `token`'s user, issued to the linking client. */
async function codeFor(token: string): Promise<string> {
  const params = new URLSearchParams({
    response_type: 'code', client_id: client.client_id, redirect_uri: REDIRECT, scope: 'auth:read',
    code_challenge: s256Challenge(VERIFIER), code_challenge_method: 'S256', state: 'st',
  });
  const start = await t.request('GET', `/oauth/authorize?${params}`);
  expect(start.status).toBe(200);
  const done = await t.request('POST', '/oauth/authorize/complete', { token, body: { login_state: start.body.login_state } });
  expect(done.status).toBe(200);
  return new URL(done.body.redirect_to).searchParams.get('code')!;
}

const link = (token: string, body: Record<string, unknown>) => t.request('POST', '/api/v1/auth/account/link', { token, body });

describe('linked external accounts', () => {
  it('links the account of a provider user, lists it, refuses it to a second user, unlinks it', async () => {
    const alice = await t.newUser('alice');
    const bob = await t.newUser('bob'); // the account at the provider
    const carol = await t.newUser('carol');

    expect((await t.request('GET', '/api/v1/auth/accounts', { token: alice.token })).body).toEqual({ accounts: [] });

    const linked = await link(alice.token, { provider: 'self', code: await codeFor(bob.token), redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(linked.status).toBe(200);
    expect(linked.body).toEqual({
      id: expect.stringMatching(/^lnk_/),
      linked_at: expect.any(String),
      provider: 'self',
      provider_display_name: 'Platform (self)',
      provider_email: bob.email,
    });
    expect(new Date(linked.body.linked_at).getTime()).toBe(t.clock.now());

    const listed = await t.request('GET', '/api/v1/auth/accounts', { token: alice.token });
    expect(listed.status).toBe(200);
    expect(listed.body.accounts).toEqual([linked.body]);

    // The code is single-use: linking it again fails at the provider.
    const reused = await link(alice.token, { provider: 'self', code: 'x', redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(reused.status).toBe(400);
    expect(reused.body.code).toBe('link_failed');

    // Linking the same external account again is a no-op for its holder...
    const again = await link(alice.token, { provider: 'self', code: await codeFor(bob.token), redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(linked.body.id);
    // ...a 409 for anyone else...
    const stolen = await link(carol.token, { provider: 'self', code: await codeFor(bob.token), redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(stolen.status).toBe(409);
    expect(stolen.body.code).toBe('account_already_linked');
    expect((await t.request('GET', '/api/v1/auth/accounts', { token: carol.token })).body.accounts).toEqual([]);
    // ...and a second account of the same provider for the holder is a 409 too.
    const second = await link(alice.token, { provider: 'self', code: await codeFor(carol.token), redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(second.status).toBe(409);
    expect(second.body.code).toBe('account_already_linked');

    // Unlink: then the external account is free for another user.
    const unlinked = await t.request('POST', '/api/v1/auth/account/unlink', { token: alice.token, body: { provider: 'self' } });
    expect(unlinked.status).toBe(200);
    expect(unlinked.body.message).toMatch(/unlinked/);
    const unlinkAgain = await t.request('POST', '/api/v1/auth/account/unlink', { token: alice.token, body: { provider: 'self' } });
    expect(unlinkAgain.status).toBe(404);
    expect(unlinkAgain.body.code).toBe('not_found');
    expect((await t.request('GET', '/api/v1/auth/accounts', { token: alice.token })).body.accounts).toEqual([]);

    const carolLinks = await link(carol.token, { provider: 'self', code: await codeFor(bob.token), redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(carolLinks.status).toBe(200);
    expect(carolLinks.body.provider_email).toBe(bob.email);

    // The admin user detail shows the identities.
    const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    expect(login.status).toBe(200);
    const detail = await t.request('GET', `/admin/auth/users/${carol.user_id}`, { token: login.body.access_token });
    expect(detail.status).toBe(200);
    expect(detail.body.identities).toEqual([carolLinks.body]);

    // Links survive a restart.
    await t.stop();
    await start();
    const token = (await t.request('POST', '/api/v1/auth/login', { body: { login: carol.email, password: carol.password } })).body.access_token;
    expect((await t.request('GET', '/api/v1/auth/accounts', { token })).body.accounts).toEqual([carolLinks.body]);
  });

  it('reports provider failures as 400 link_failed, never 5xx', async () => {
    const user = await t.newUser('linkfail');
    const bogus = await link(user.token, { provider: 'self', code: 'not-a-real-code', redirect_uri: REDIRECT, code_verifier: VERIFIER });
    expect(bogus.status).toBe(400);
    expect(bogus.body.code).toBe('link_failed');
    expect(bogus.body.message).toMatch(/invalid_grant/);

    const provider = await t.newUser('prov');
    const wrongVerifier = await link(user.token, { provider: 'self', code: await codeFor(provider.token), redirect_uri: REDIRECT, code_verifier: 'w'.repeat(43) });
    expect(wrongVerifier.status).toBe(400);
    expect(wrongVerifier.body.code).toBe('link_failed');

    const wrongRedirect = await link(user.token, { provider: 'self', code: await codeFor(provider.token), redirect_uri: 'http://127.0.0.1:9/other', code_verifier: VERIFIER });
    expect(wrongRedirect.status).toBe(400);
    expect(wrongRedirect.body.code).toBe('link_failed');

    const down = await link(user.token, { provider: 'down', code: 'c', redirect_uri: REDIRECT });
    expect(down.status).toBe(400);
    expect(down.body.code).toBe('link_failed');
    expect(down.body.message).toMatch(/could not be reached/);

    expect((await t.request('GET', '/api/v1/auth/accounts', { token: user.token })).body.accounts).toEqual([]);
  });

  it('validates the request and needs a user session', async () => {
    const user = await t.newUser('linkval');
    const unknown = await link(user.token, { provider: 'nope', code: 'c', redirect_uri: REDIRECT });
    expect(unknown.status).toBe(400);
    expect(unknown.body.code).toBe('BAD_REQUEST');
    expect(unknown.body.details[0].field).toBe('body.provider');
    const missing = await link(user.token, { provider: 'self', redirect_uri: REDIRECT });
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe('BAD_REQUEST');
    const unlinkMissing = await t.request('POST', '/api/v1/auth/account/unlink', { token: user.token, body: {} });
    expect(unlinkMissing.status).toBe(400);

    expect((await t.request('GET', '/api/v1/auth/accounts')).status).toBe(401);
    expect((await t.request('POST', '/api/v1/auth/account/link', { body: { provider: 'self', code: 'c', redirect_uri: REDIRECT } })).status).toBe(401);
    // API keys never manage credentials.
    const key = await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body: { name: 'k', scopes: ['*'] } });
    expect(key.status).toBe(201);
    const withKey = await t.request('GET', '/api/v1/auth/accounts', { token: key.body.key });
    expect(withKey.status).toBe(403);
    expect(withKey.body.code).toBe('insufficient_scope');
  });
});

describe('OAUTH_PROVIDERS parsing', () => {
  const valid = { display_name: 'X', token_endpoint: 'https://x.example/token', userinfo_endpoint: 'https://x.example/me', client_id: 'id', client_secret: 's' };
  it('accepts a valid configuration and applies defaults', () => {
    expect(parseOAuthProviders(undefined)).toEqual({});
    expect(parseOAuthProviders('')).toEqual({});
    expect(parseOAuthProviders(JSON.stringify({ x: valid })).x).toMatchObject({ token_endpoint_auth_method: 'client_secret_basic', authorization_endpoint: null });
    const { client_secret: _s, ...publicClient } = valid;
    expect(parseOAuthProviders(JSON.stringify({ x: publicClient })).x.token_endpoint_auth_method).toBe('none');
  });
  it('refuses bad configurations with a message naming the field', () => {
    expect(() => parseOAuthProviders('{')).toThrow(/JSON object/);
    expect(() => parseOAuthProviders('[]')).toThrow(/JSON object/);
    expect(() => parseOAuthProviders(JSON.stringify({ 'Bad Name': valid }))).toThrow(/provider name/);
    expect(() => parseOAuthProviders(JSON.stringify({ x: { ...valid, token_endpoint: 'ftp://x' } }))).toThrow(/x.token_endpoint/);
    expect(() => parseOAuthProviders(JSON.stringify({ x: { ...valid, userinfo_endpoint: undefined } }))).toThrow(/x.userinfo_endpoint is required/);
    expect(() => parseOAuthProviders(JSON.stringify({ x: { ...valid, client_id: '' } }))).toThrow(/x.client_id/);
    expect(() => parseOAuthProviders(JSON.stringify({ x: { ...valid, token_endpoint_auth_method: 'private_key_jwt' } }))).toThrow(/auth_method/);
    expect(() => parseOAuthProviders(JSON.stringify({ x: { ...valid, client_secret: undefined, token_endpoint_auth_method: 'client_secret_post' } }))).toThrow(/client_secret is required/);
  });
});
