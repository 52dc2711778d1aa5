import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BACKOFF_BASE_MS, base32Decode, FAILURE_MEMORY_MS, totp } from '../../actors/accounts/messages.js';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/**
 * Login throttling (docs/api/accounts.md, Login throttling): password guesses
 * are counted per account and address (5 free, then exponential locks), per
 * account from any address (20, not applied to an address the account knows
 * nor to an account with two-factor on) and per address against any account
 * (20, not applied to an address the account knows). The node trusts
 * 127.0.0.1 as a proxy, so X-Forwarded-For gives each request its address;
 * users register from 127.0.0.1 (no header), which their accounts then know.
 */
let t: TestNode;
const clock = () => t.clock as ManualClock;
const ATTACKER = '203.0.113.66';
const login = (l: string, password: string, from?: string) =>
  t.request('POST', '/api/v1/auth/login', { body: { login: l, password }, headers: from ? { 'x-forwarded-for': from } : {} });

function expectLimited(res: TestResponse, atMostSeconds = 15 * 60) {
  expect(res.status, res.text).toBe(429);
  expect(res.body.code).toBe('rate_limited');
  const retry = Number(res.headers.get('retry-after'));
  expect(retry).toBeGreaterThan(0);
  expect(retry).toBeLessThanOrEqual(atMostSeconds);
  return retry;
}

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { trustProxy: ['127.0.0.1'] } });
});
afterAll(async () => {
  await t?.destroy();
});
// Every test starts with its counts forgotten (remembered 6 hours) and fresh windows.
beforeEach(() => clock().advance(FAILURE_MEMORY_MS + 60_000));

describe('per account and address', () => {
  it("five wrong passwords from one address lock that address out of the account, with a doubling delay; the owner's address still gets in", async () => {
    const user = await t.newUser('thr');
    for (let i = 0; i < 5; i++) expect((await login(user.username, 'wrong password', ATTACKER)).status).toBe(401);
    const first = expectLimited(await login(user.username, user.password, ATTACKER), BACKOFF_BASE_MS / 1000);
    // The e-mail is the same account.
    expectLimited(await login(user.email, user.password, ATTACKER));
    // The owner, from the address the account knows, is not locked out by the attacker.
    expect((await login(user.username, user.password)).status).toBe(200);
    clock().advance(first * 1000);
    // One more wrong guess once the lock ends: the next lock is twice as long.
    expect((await login(user.username, 'wrong password', ATTACKER)).status).toBe(401);
    const second = expectLimited(await login(user.username, user.password, ATTACKER));
    expect(second).toBe((2 * BACKOFF_BASE_MS) / 1000);
    clock().advance(second * 1000);
    expect((await login(user.username, user.password, ATTACKER)).status).toBe(200);
  });

  it('a successful login clears the count of its address', async () => {
    const user = await t.newUser('thr');
    for (let i = 0; i < 4; i++) expect((await login(user.username, 'wrong password', ATTACKER)).status).toBe(401);
    expect((await login(user.username, user.password, ATTACKER)).status).toBe(200);
    for (let i = 0; i < 4; i++) expect((await login(user.username, 'wrong password', ATTACKER)).status).toBe(401);
    expect((await login(user.username, user.password, ATTACKER)).status).toBe(200);
  });

  it('unknown logins are counted too, with the same 401 first', async () => {
    for (let i = 0; i < 5; i++) expect((await login('nobody-here', 'x', ATTACKER)).status).toBe(401);
    expectLimited(await login('nobody-here', 'x', ATTACKER));
    expectLimited(await login('NOBODY-HERE', 'x', ATTACKER));
  });

  it('an attacker failing 1,000 logins against a victim does not stop the victim signing in from its own address with password and 2FA', async () => {
    const victim = await t.newUser('victim');
    const setup = await t.request('POST', '/api/v1/auth/2fa/totp/setup', { token: victim.token });
    const code = () => totp(base32Decode(setup.body.secret)!, clock().now());
    expect((await t.request('POST', '/api/v1/auth/2fa/totp/verify-setup', { token: victim.token, body: { code: code() } })).status).toBe(200);
    clock().advance(60_000);
    let checked = 0;
    let refused = 0;
    // 1,000 guesses in rounds of 50 at once, a round every 10 s: the locks grow and most guesses are refused before any hashing.
    for (let round = 0; round < 20; round++) {
      const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => login(victim.username, `guess-${round}-${i}`, ATTACKER)));
      for (const res of answers) {
        if (res.status === 401) checked++;
        else if (res.status === 429) refused++;
        else throw new Error(`unexpected ${res.status} ${res.text}`);
      }
      clock().advance(10_000);
    }
    expect(checked + refused).toBe(1000);
    expect(checked).toBeLessThanOrEqual(5 + 10);
    const step = await login(victim.username, victim.password);
    expect(step.status, step.text).toBe(200);
    expect(step.body.requires_2fa).toBe(true);
    const done = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: step.body.two_factor_token, code: code() } });
    expect(done.status, done.text).toBe(200);
    expect(done.body.access_token).toEqual(expect.any(String));
  }, 120_000);

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

describe('per account, from any address', () => {
  it('twenty failures from twenty addresses lock the account from new addresses, not from one it knows', async () => {
    const user = await t.newUser('thrdist');
    for (let i = 0; i < 20; i++) expect((await login(user.username, 'wrong password', `198.51.100.${i + 1}`)).status).toBe(401);
    expectLimited(await login(user.username, user.password, '198.51.100.200'));
    expect((await login(user.username, user.password)).status).toBe(200);
  });

  it('an account with two-factor on is not locked account-wide: the right password reaches the second step', async () => {
    const user = await t.newUser('thrdist2fa');
    const setup = await t.request('POST', '/api/v1/auth/2fa/totp/setup', { token: user.token });
    const code = totp(base32Decode(setup.body.secret)!, clock().now());
    expect((await t.request('POST', '/api/v1/auth/2fa/totp/verify-setup', { token: user.token, body: { code } })).status).toBe(200);
    for (let i = 0; i < 25; i++) expect((await login(user.username, 'wrong password', `198.51.100.${i + 1}`)).status).toBe(401);
    const step = await login(user.username, user.password, '198.51.100.201');
    expect(step.status, step.text).toBe(200);
    expect(step.body.requires_2fa).toBe(true);
  });
});

describe('per address, against any account', () => {
  it('twenty failures from one address slow it down for accounts that do not know it; an account that signed in from it still gets in', async () => {
    const regular = await t.newUser('thrip');
    expect((await login(regular.username, regular.password, ATTACKER)).status).toBe(200);
    const stranger = await t.newUser('thripnew');
    for (let i = 0; i < 20; i++) expect((await login(`ghost${i}`, 'x', ATTACKER)).status).toBe(401);
    expectLimited(await login(stranger.username, stranger.password, ATTACKER));
    expect((await login(regular.username, regular.password, ATTACKER)).status).toBe(200);
    clock().advance(BACKOFF_BASE_MS);
    expect((await login(stranger.username, stranger.password, ATTACKER)).status).toBe(200);
  });
});

/** Counts the statuses of a set of responses: { 401: n, 429: m, ... }. */
function statuses(responses: TestResponse[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const res of responses) counts[res.status] = (counts[res.status] ?? 0) + 1;
  return counts;
}

describe('concurrent bursts', () => {
  it('30 simultaneous wrong passwords for one account from one address: at most 5 are checked (401), the rest 429; 5 in all', async () => {
    const user = await t.newUser('thrburst');
    const burst = await Promise.all(Array.from({ length: 30 }, () => login(user.username, 'wrong password', ATTACKER)));
    const counts = statuses(burst);
    expect(Object.keys(counts).sort(), JSON.stringify(counts)).toEqual(Object.keys(counts).filter((s) => s === '401' || s === '429').sort());
    expect(counts[401]).toBeGreaterThanOrEqual(1);
    expect(counts[401]).toBeLessThanOrEqual(5);
    expect(counts[401] + counts[429]).toBe(30);
    for (const res of burst.filter((r) => r.status === 429)) expectLimited(res);
    // Whatever the burst left of the budget, the pair takes exactly 5 wrong passwords before its first lock.
    let checked = counts[401];
    for (let res = await login(user.email, 'wrong password', ATTACKER); res.status === 401; res = await login(user.email, 'wrong password', ATTACKER)) checked++;
    expect(checked).toBe(5);
    expectLimited(await login(user.username, user.password, ATTACKER));
  });

  it('30 simultaneous wrong logins from one address across accounts: at most 20 are checked, 20 in all', async () => {
    const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => login(`burst-ghost-${i}`, 'x', ATTACKER)));
    const counts = statuses(burst);
    expect(counts[401]).toBeGreaterThanOrEqual(1);
    expect(counts[401]).toBeLessThanOrEqual(20);
    expect(counts[401] + counts[429]).toBe(30);
    let checked = counts[401];
    for (let i = 0; ; i++) {
      const res = await login(`burst-later-${i}`, 'x', ATTACKER);
      if (res.status !== 401) {
        expectLimited(res);
        break;
      }
      checked++;
    }
    expect(checked).toBe(20);
  });

  it('30 simultaneous right passwords from one address (30 accounts) all get in: attempts wait for places, they are not refused', async () => {
    const users = await Promise.all(Array.from({ length: 30 }, () => t.newUser('thrmany')));
    const burst = await Promise.all(users.map((user) => login(user.username, user.password, ATTACKER)));
    expect(statuses(burst)).toEqual({ 200: 30 });
    // Nothing was counted against the address: 20 wrong logins still get their 401.
    for (let i = 0; i < 20; i++) expect((await login(`ghost-after-many-${i}`, 'x', ATTACKER)).status).toBe(401);
    expectLimited(await login('ghost-after-many-x', 'x', ATTACKER));
  });

  it('a right password hands the address its attempt back: successes do not use up the address budget', async () => {
    const user = await t.newUser('throk');
    for (let i = 0; i < 25; i++) expect((await login(user.username, user.password, ATTACKER)).status).toBe(200);
    for (let i = 0; i < 20; i++) expect((await login(`ghost-after-ok-${i}`, 'x', ATTACKER)).status).toBe(401);
    expectLimited(await login('ghost-after-ok-x', 'x', ATTACKER));
  });
});

describe('two-factor disable and backup regeneration', () => {
  async function enabledUser() {
    const user = await t.newUser('thr2fd');
    const setup = await t.request('POST', '/api/v1/auth/2fa/totp/setup', { token: user.token });
    const code = () => totp(base32Decode(setup.body.secret)!, clock().now());
    expect((await t.request('POST', '/api/v1/auth/2fa/totp/verify-setup', { token: user.token, body: { code: code() } })).status).toBe(200);
    clock().advance(60_000);
    const wrong = () => (code() === '000000' ? '111111' : '000000');
    return { ...user, code, wrong };
  }
  const disable = (token: string, code: string) => t.request('POST', '/api/v1/auth/2fa/totp/disable', { token, body: { code } });
  const regenerate = (token: string, code: string) => t.request('POST', '/api/v1/auth/2fa/backup/regenerate', { token, body: { code } });

  it('share the second-step count: 10 wrong codes, then 429 even for the right code, until the window ends', async () => {
    const user = await enabledUser();
    for (let i = 0; i < 5; i++) expect((await disable(user.token, user.wrong())).status).toBe(400);
    for (let i = 0; i < 5; i++) expect((await regenerate(user.token, user.wrong())).status).toBe(400);
    expectLimited(await disable(user.token, user.code()));
    expectLimited(await regenerate(user.token, user.code()));
    // The login's second step is the same count.
    const step = await login(user.username, user.password);
    expectLimited(await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: step.body.two_factor_token, code: user.code() } }));
    clock().advance(15 * 60_000);
    // The access token expired with the window: a fresh one from the refresh token.
    const refreshed = await t.request('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh_token } });
    expect(refreshed.status, refreshed.text).toBe(200);
    expect((await regenerate(refreshed.body.access_token, user.code())).status).toBe(200);
  });

  it('30 simultaneous wrong codes: at most 10 are judged (400), the rest 429; 10 in all', async () => {
    const user = await enabledUser();
    const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? disable : regenerate)(user.token, user.wrong())));
    const counts = statuses(burst);
    expect(counts[400]).toBeGreaterThanOrEqual(1);
    expect(counts[400]).toBeLessThanOrEqual(10);
    expect(counts[400] + counts[429]).toBe(30);
    let judged = counts[400];
    for (let res = await disable(user.token, user.wrong()); res.status === 400; res = await disable(user.token, user.wrong())) judged++;
    expect(judged).toBe(10);
    expect((await t.request('GET', '/api/v1/auth/2fa/status', { token: user.token })).body.enabled).toBe(true);
  });

  it('a right code clears the count; a refusal that judged no code (409) is not counted', async () => {
    const user = await enabledUser();
    for (let i = 0; i < 9; i++) expect((await regenerate(user.token, user.wrong())).status).toBe(400);
    expect((await regenerate(user.token, user.code())).status).toBe(200);
    clock().advance(30_000);
    for (let i = 0; i < 9; i++) expect((await disable(user.token, user.wrong())).status).toBe(400);
    expect((await disable(user.token, user.code())).status).toBe(200);
    // Not enabled any more: 409, and these do not count.
    for (let i = 0; i < 12; i++) expect((await disable(user.token, user.wrong())).status).toBe(409);
  });
});

describe('registration', () => {
  it('is throttled per address: every attempt counts (a duplicate too), 429 past the limit until the window ends', async () => {
    const r = await startTestNode({ clock: 'manual', config: { registrationsPerAddressMax: 3 } });
    try {
      const register = (name: string) =>
        r.request('POST', '/api/v1/auth/register', { body: { email: `${name}@example.com`, username: name, password: 'correct horse battery' } });
      expect((await register('reg_one')).status).toBe(201);
      expect((await register('reg_one')).status).toBe(409);
      // Invalid input never reaches the throttle (nor the KDF).
      expect((await r.request('POST', '/api/v1/auth/register', { body: { email: 'x@example.com', username: 'reg_x', password: 'short' } })).status).toBe(400);
      expect((await register('reg_two')).status).toBe(201);
      const limited = await register('reg_three');
      expect(limited.status, limited.text).toBe(429);
      expect(limited.body.code).toBe('rate_limited');
      const retry = Number(limited.headers.get('retry-after'));
      expect(retry).toBeGreaterThan(0);
      expect(retry).toBeLessThanOrEqual(15 * 60);
      // Login is not registration: its own counts.
      expect((await r.request('POST', '/api/v1/auth/login', { body: { login: 'reg_one', password: 'correct horse battery' } })).status).toBe(200);

      (r.clock as ManualClock).advance(retry * 1000);
      // A burst in a fresh window: exactly the limit get through.
      const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => register(`reg_burst_${i}`)));
      expect(statuses(burst)).toEqual({ 201: 3, 429: 7 });
    } finally {
      await r.destroy();
    }
  });
});

describe('restart', () => {
  it('the lock survives a restart and ends when its delay has passed', async () => {
    const user = await t.newUser('thrrs');
    for (let i = 0; i < 5; i++) expect((await login(user.username, 'wrong password', ATTACKER)).status).toBe(401);
    const dataDir = t.dataDir;
    const manual = clock();
    await t.stop();
    t = await startTestNode({ clock: manual, dataDir, config: { trustProxy: ['127.0.0.1'] } });
    expectLimited(await login(user.username, user.password, ATTACKER));
    manual.advance(BACKOFF_BASE_MS);
    expect((await login(user.username, user.password, ATTACKER)).status).toBe(200);
  });
});
