import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PASSWORD_RESET_RESEND_MS, PASSWORD_RESET_TTL_MS, PASSWORD_RESETS_PER_ADDRESS_MAX, REFRESH_REUSE_GRACE_MS, THROTTLE_WINDOW_MS } from '../../actors/accounts/messages.js';
import { CapturingMailTransport } from '../../http/auth/mail.js';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';
import { eventually } from '../helpers/runtime.js';

/**
 * Password change and reset, and the refresh reuse grace (docs/api/accounts.md).
 * One node with a manual clock and a capturing mail transport; it trusts
 * 127.0.0.1 as a proxy, so X-Forwarded-For gives a request its client address.
 */
const ADMIN_EMAIL = 'root@example.com';
const ADMIN_PASSWORD = 'admin password 123';
const NEW_PASSWORD = 'a brand new password';

let t: TestNode;
let mail: CapturingMailTransport;
const clock = () => t.clock as ManualClock;
let addressCounter = 0;
/** A client address of its own for each use, so throttle counts of one test do not reach another. */
const freshAddress = () => `198.51.100.${++addressCounter}`;
const from = (address?: string): Record<string, string> => (address ? { 'x-forwarded-for': address } : {});


const login = (name: string, password: string, address?: string) => t.request('POST', '/api/v1/auth/login', { body: { login: name, password }, headers: from(address) });
const me = (token: string) => t.request('GET', '/api/v1/auth/me', { token });
const refresh = (refresh_token: string) => t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token } });
const change = (token: string, current_password: string, new_password: string) => t.request('POST', '/api/v1/auth/password/change', { token, body: { current_password, new_password } });
const requestReset = (email: string, address?: string, redirect_url?: string) =>
  t.request('POST', '/api/v1/auth/password/reset/request', { body: { email, ...(redirect_url ? { redirect_url } : {}) }, headers: from(address) });
const confirmReset = (token: string, new_password: string, address?: string) =>
  t.request('POST', '/api/v1/auth/password/reset/confirm', { body: { token, new_password }, headers: from(address) });

const mailsTo = (email: string) => mail.sent.filter((m) => m.to === email);
async function resetLink(email: string, count: number): Promise<URL> {
  return eventually(() => {
    const sent = mailsTo(email);
    expect(sent).toHaveLength(count);
    expect(sent.at(-1)!.text).toContain(sent.at(-1)!.link);
    return new URL(sent.at(-1)!.link!);
  });
}

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { trustProxy: ['127.0.0.1'], adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD } });
  mail = new CapturingMailTransport();
  t.node.services.mail = mail;
});
afterAll(async () => {
  await t?.destroy();
});
// Fresh throttle windows and resend intervals for every test (access tokens are made inside each test).
beforeEach(() => clock().advance(THROTTLE_WINDOW_MS + 60_000));

describe('POST /api/v1/auth/password/change', () => {
  it('ends every other session at once and keeps the caller\'s; the old password stops working', async () => {
    const user = await t.newUser('pwc');
    const other = (await login(user.username, user.password)).body;
    expect((await me(other.access_token)).status).toBe(200);

    const changed = await change(user.token, user.password, NEW_PASSWORD);
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body).toEqual({ message: expect.any(String) });
    // The other session: its access token (just checked, so cached) and its refresh token, at once.
    expectError(await me(other.access_token), 401, 'unauthorized');
    expectError(await refresh(other.refresh_token), 401, 'invalid_refresh_token');
    // The caller's session goes on, refresh included.
    expect((await me(user.token)).status).toBe(200);
    expect((await refresh(user.refresh_token)).status).toBe(200);
    expectError(await login(user.username, user.password), 401, 'invalid_credentials');
    expect((await login(user.username, NEW_PASSWORD)).status).toBe(200);
  });

  it('a wrong current password is 401 and counted like a wrong login from the caller\'s address', async () => {
    const user = await t.newUser('pwc');
    for (let i = 0; i < 5; i++) expectError(await change(user.token, 'not the password', NEW_PASSWORD), 401, 'invalid_credentials');
    // The account from this address is locked now: the right password waits too, and so does a login from here.
    const locked = await change(user.token, user.password, NEW_PASSWORD);
    expectError(locked, 429, 'rate_limited');
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
    expectError(await login(user.username, user.password), 429, 'rate_limited');
    clock().advance(Number(locked.headers.get('retry-after')) * 1000);
    expect((await change(user.token, user.password, NEW_PASSWORD)).status).toBe(200);
  });

  it('validates the new password like registration; refused for impersonation sessions and API keys', async () => {
    const user = await t.newUser('pwc');
    expectError(await change(user.token, user.password, 'short'), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', '/api/v1/auth/password/change', { body: { current_password: 'x', new_password: NEW_PASSWORD } }), 401, 'unauthorized');

    const admin = (await login(ADMIN_EMAIL, ADMIN_PASSWORD)).body.access_token;
    const imp = await t.request('POST', `/admin/auth/users/${user.user_id}/impersonate`, { token: admin });
    expect(imp.status, imp.text).toBe(200);
    expectError(await change(imp.body.access_token, user.password, NEW_PASSWORD), 403, 'impersonation_forbidden');

    const key = await t.request('POST', '/api/v1/auth/api-keys', { token: user.token, body: { name: 'k', scopes: ['*'] } });
    expect(key.status, key.text).toBe(201);
    expectError(await change(key.body.key, user.password, NEW_PASSWORD), 403, 'insufficient_scope');
    // Nothing changed.
    expect((await login(user.username, user.password)).status).toBe(200);
  });
});

describe('POST /api/v1/auth/password/reset/request', () => {
  it('answers 202 for an unknown e-mail and sends nothing; a known one gets a single link a minute', async () => {
    const user = await t.newUser('pwr');
    const unknown = await requestReset('nobody-at-all@example.com', freshAddress());
    expect(unknown.status, unknown.text).toBe(202);
    const known = await requestReset(user.email.toUpperCase(), freshAddress());
    expect(known.status).toBe(202);
    expect(known.body).toEqual(unknown.body);
    const link = await resetLink(user.email, 1);
    expect(`${link.origin}${link.pathname}`).toBe(`${t.url}/api/v1/auth/password/reset/confirm`);
    expect(link.searchParams.get('token')).toMatch(new RegExp(`^prt\\.${user.user_id}\\.`));
    expect(mailsTo('nobody-at-all@example.com')).toEqual([]);

    // Within the minute: 202, nothing sent, the first link stays valid.
    expect((await requestReset(user.email, freshAddress())).status).toBe(202);
    clock().advance(PASSWORD_RESET_RESEND_MS);
    expect((await requestReset(user.email, freshAddress())).status).toBe(202);
    const second = await resetLink(user.email, 2);
    // The new link replaced the first.
    expectError(await confirmReset(link.searchParams.get('token')!, NEW_PASSWORD), 400, 'invalid_reset_token');
    expect((await confirmReset(second.searchParams.get('token')!, NEW_PASSWORD)).status).toBe(200);
  });

  it('throttles per client address: 10 requests per 15 minutes, then 429', async () => {
    const address = freshAddress();
    for (let i = 0; i < PASSWORD_RESETS_PER_ADDRESS_MAX; i++) expect((await requestReset(`nobody${i}@example.com`, address)).status).toBe(202);
    const limited = await requestReset('nobody@example.com', address);
    expectError(limited, 429, 'rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await requestReset('nobody@example.com', freshAddress())).status).toBe(202);
  });

  it('redirect_url: an allowed origin carries the token; another origin is refused 400 before anything else', async () => {
    const user = await t.newUser('pwr');
    expectError(await requestReset(user.email, freshAddress(), 'https://evil.example/steal'), 400, 'BAD_REQUEST');
    expectError(await requestReset(user.email, freshAddress(), 'javascript:alert(1)'), 400, 'BAD_REQUEST');
    expect((await requestReset(user.email, freshAddress(), `${t.url}/app/reset?x=1`)).status).toBe(202);
    const link = await resetLink(user.email, 1);
    expect(link.pathname).toBe('/app/reset');
    expect(link.searchParams.get('x')).toBe('1');
    expect(link.searchParams.get('token')).toMatch(/^prt\./);
  });
});

describe('POST /api/v1/auth/password/reset/confirm', () => {
  it('sets the password, ends every session, verifies the e-mail and lifts the lockout of the confirming address; single use', async () => {
    const user = await t.newUser('pwr');
    const second = (await login(user.username, user.password)).body;
    const address = freshAddress();
    // Locked out from this address.
    for (let i = 0; i < 5; i++) expectError(await login(user.username, 'wrong password', address), 401, 'invalid_credentials');
    expectError(await login(user.username, user.password, address), 429, 'rate_limited');

    expect((await requestReset(user.email, address)).status).toBe(202);
    const token = (await resetLink(user.email, 1)).searchParams.get('token')!;
    const done = await confirmReset(token, NEW_PASSWORD, address);
    expect(done.status, done.text).toBe(200);
    expect(done.body).toEqual({ message: expect.any(String) });

    for (const session of [user, { token: second.access_token, refresh_token: second.refresh_token }]) {
      expectError(await me(session.token), 401, 'unauthorized');
      expectError(await refresh(session.refresh_token), 401, 'invalid_refresh_token');
    }
    expectError(await login(user.username, user.password, address), 401, 'invalid_credentials');
    const signedIn = await login(user.username, NEW_PASSWORD, address);
    expect(signedIn.status, signedIn.text).toBe(200);
    expect(signedIn.body.user.email_verified).toBe(true);
    expectError(await confirmReset(token, 'yet another password'), 400, 'invalid_reset_token');
  });

  it('expires after 30 minutes; a malformed or unknown token is 400, and bad tokens are throttled per address', async () => {
    const user = await t.newUser('pwr');
    expect((await requestReset(user.email, freshAddress())).status).toBe(202);
    const token = (await resetLink(user.email, 1)).searchParams.get('token')!;
    clock().advance(PASSWORD_RESET_TTL_MS);
    expectError(await confirmReset(token, NEW_PASSWORD), 400, 'invalid_reset_token');
    expect((await login(user.username, user.password)).status).toBe(200);

    expectError(await confirmReset('not-a-token', NEW_PASSWORD), 400, 'invalid_reset_token');
    const address = freshAddress();
    for (let i = 0; i < PASSWORD_RESETS_PER_ADDRESS_MAX; i++) expectError(await confirmReset(`prt.${user.user_id}.guess${i}`, NEW_PASSWORD, address), 400, 'invalid_reset_token');
    expectError(await confirmReset(`prt.${user.user_id}.guess`, NEW_PASSWORD, address), 429, 'rate_limited');
    expectError(await confirmReset(token, 'short'), 400, 'BAD_REQUEST');
  });
});

describe('refresh reuse grace', () => {
  it('two concurrent refreshes of one token by one client: one 200, the other 401, and the session lives on', async () => {
    const user = await t.newUser('grace');
    const [a, b] = await Promise.all([refresh(user.refresh_token), refresh(user.refresh_token)]);
    expect([a.status, b.status].sort()).toEqual([200, 401]);
    const [won, lost] = a.status === 200 ? [a, b] : [b, a];
    expect(lost.body.code).toBe('invalid_refresh_token');
    expect((await me(won.body.access_token)).status).toBe(200);
    expect((await me(user.token)).status).toBe(200);
    const next = await refresh(won.body.refresh_token);
    expect(next.status, next.text).toBe(200);
    expect((await me(next.body.access_token)).status).toBe(200);
  });

  it('a reuse after the window ends the whole session (reuse detection)', async () => {
    const user = await t.newUser('grace');
    const rotated = await refresh(user.refresh_token);
    expect(rotated.status).toBe(200);
    clock().advance(REFRESH_REUSE_GRACE_MS);
    expectError(await refresh(user.refresh_token), 401, 'invalid_refresh_token');
    expectError(await me(rotated.body.access_token), 401, 'unauthorized');
    expectError(await refresh(rotated.body.refresh_token), 401, 'invalid_refresh_token');
  });
});
