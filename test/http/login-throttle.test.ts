import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { base32Decode, totp } from '../../actors/account/totp.js';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/** Login throttling per account (5 failures / 15 min) and per address (20 / 15 min). */
let t: TestNode;
const clock = () => t.clock as ManualClock;
const login = (l: string, password: string) => t.request('POST', '/api/v1/auth/login', { body: { login: l, password } });

function expectLimited(res: TestResponse) {
  expect(res.status, res.text).toBe(429);
  expect(res.body.code).toBe('rate_limited');
  const retry = Number(res.headers.get('retry-after'));
  expect(retry).toBeGreaterThan(0);
  expect(retry).toBeLessThanOrEqual(15 * 60);
  return retry;
}

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
});
afterAll(async () => {
  await t?.destroy();
});
// Every test starts with fresh windows (the address window included).
beforeEach(() => clock().advance(16 * 60_000));

describe('per account', () => {
  it('five failures lock the account for the rest of the window, even with the right password', async () => {
    const user = await t.newUser('thr');
    for (let i = 0; i < 5; i++) expect((await login(user.username, 'wrong password')).status).toBe(401);
    expectLimited(await login(user.username, user.password));
    // The e-mail is the same account.
    expectLimited(await login(user.email, user.password));
    clock().advance(10 * 60_000);
    const retry = expectLimited(await login(user.username, user.password));
    expect(retry).toBeLessThanOrEqual(5 * 60);
    clock().advance(retry * 1000);
    expect((await login(user.username, user.password)).status).toBe(200);
  });

  it('a successful login clears the account count', async () => {
    const user = await t.newUser('thr');
    for (let i = 0; i < 4; i++) expect((await login(user.username, 'wrong password')).status).toBe(401);
    expect((await login(user.username, user.password)).status).toBe(200);
    for (let i = 0; i < 4; i++) expect((await login(user.username, 'wrong password')).status).toBe(401);
    expect((await login(user.username, user.password)).status).toBe(200);
  });

  it('unknown logins are counted too, with the same 401 first', async () => {
    for (let i = 0; i < 5; i++) expect((await login('nobody-here', 'x')).status).toBe(401);
    expectLimited(await login('nobody-here', 'x'));
    expectLimited(await login('NOBODY-HERE', 'x'));
  });

  it('wrong two-factor codes are counted per user across challenges (10), apart from the password count', async () => {
    const user = await t.newUser('thr2fa');
    const setup = await t.request('POST', '/api/v1/auth/2fa/totp/setup', { token: user.token });
    const code = () => totp(base32Decode(setup.body.secret)!, clock().now());
    expect((await t.request('POST', '/api/v1/auth/2fa/totp/verify-setup', { token: user.token, body: { code: code() } })).status).toBe(200);
    clock().advance(60_000);
    const wrong = () => (code() === '000000' ? '111111' : '000000');
    for (let round = 0; round < 2; round++) {
      const step = await login(user.username, user.password);
      expect(step.body.requires_2fa).toBe(true);
      for (let i = 0; i < 5; i++) {
        const res = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: step.body.two_factor_token, code: wrong() } });
        expect(res.status, res.text).toBe(401);
      }
    }
    // A correct password does not clear the second-step count.
    const third = await login(user.username, user.password);
    expect(third.status).toBe(200);
    expectLimited(await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: third.body.two_factor_token, code: code() } }));
    clock().advance(15 * 60_000);
    const fourth = await login(user.username, user.password);
    const ok = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: fourth.body.two_factor_token, code: code() } });
    expect(ok.status, ok.text).toBe(200);
  });
});

describe('per address', () => {
  it('twenty failures from one address lock every login from it', async () => {
    const user = await t.newUser('thrip');
    for (let i = 0; i < 20; i++) expect((await login(`ghost${i}`, 'x')).status).toBe(401);
    expectLimited(await login(user.username, user.password));
    clock().advance(15 * 60_000);
    expect((await login(user.username, user.password)).status).toBe(200);
  });
});

describe('restart', () => {
  it('the lock survives a restart and ends with its window', async () => {
    const user = await t.newUser('thrrs');
    for (let i = 0; i < 5; i++) expect((await login(user.username, 'wrong password')).status).toBe(401);
    const dataDir = t.dataDir;
    const manual = clock();
    await t.stop();
    t = await startTestNode({ clock: manual, dataDir });
    expectLimited(await login(user.username, user.password));
    manual.advance(15 * 60_000);
    expect((await login(user.username, user.password)).status).toBe(200);
  });
});
