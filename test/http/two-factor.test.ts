import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { base32Decode, totp } from '../../actors/accounts/messages.js';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

let t: TestNode;
beforeAll(async () => {
  t = await startTestNode({ clock: 'manual' });
});
afterAll(async () => t.destroy());

const clock = () => t.clock as ManualClock;
const codeFor = (secret: string) => totp(base32Decode(secret)!, clock().now());
/** Moves to the next 30 s step, so a fresh code exists. */
const nextStep = () => clock().advance(30_000);

async function enabledUser() {
  const user = await t.newUser('tfa');
  const setup = await t.request('POST', '/api/v1/auth/2fa/totp/setup', { token: user.token });
  expect(setup.status).toBe(200);
  const verify = await t.request('POST', '/api/v1/auth/2fa/totp/verify-setup', { token: user.token, body: { code: codeFor(setup.body.secret) } });
  expect(verify.status).toBe(200);
  return { ...user, secret: setup.body.secret as string, backup_codes: setup.body.backup_codes as string[] };
}

async function passwordStep(login: string, password: string) {
  const res = await t.request('POST', '/api/v1/auth/login', { body: { login, password } });
  expect(res.status).toBe(200);
  return res.body;
}

describe('TOTP two-factor', () => {
  it('sets up with a secret, an otpauth URI and ten backup codes, and is off until verified', async () => {
    const user = await t.newUser('tfa');
    const setup = await t.request('POST', '/api/v1/auth/2fa/totp/setup', { token: user.token });
    expect(setup.status).toBe(200);
    expect(setup.body.secret).toMatch(/^[A-Z2-7]{32}$/);
    expect(setup.body.qr_code_uri).toContain(`otpauth://totp/`);
    expect(setup.body.qr_code_uri).toContain(`secret=${setup.body.secret}`);
    expect(setup.body.backup_codes).toHaveLength(10);
    expect(new Set(setup.body.backup_codes).size).toBe(10);
    const status = await t.request('GET', '/api/v1/auth/2fa/status', { token: user.token });
    expect(status.body).toEqual({ enabled: false, backup_codes_remaining: 0 });
    // Still a plain login until verify-setup.
    expect((await passwordStep(user.email, user.password)).access_token).toBeTypeOf('string');
  });

  it('refuses a wrong set-up code and turns on with a right one', async () => {
    const user = await t.newUser('tfa');
    const setup = await t.request('POST', '/api/v1/auth/2fa/totp/setup', { token: user.token });
    const wrong = await t.request('POST', '/api/v1/auth/2fa/totp/verify-setup', { token: user.token, body: { code: '000000' === codeFor(setup.body.secret) ? '111111' : '000000' } });
    expect(wrong.status).toBe(400);
    expect(wrong.body.code).toBe('invalid_two_factor_code');
    const right = await t.request('POST', '/api/v1/auth/2fa/totp/verify-setup', { token: user.token, body: { code: codeFor(setup.body.secret) } });
    expect(right.status).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/2fa/status', { token: user.token })).body).toEqual({ enabled: true, backup_codes_remaining: 10 });
    expect((await t.request('GET', '/api/v1/auth/me', { token: user.token })).body.two_factor_enabled).toBe(true);
    const again = await t.request('POST', '/api/v1/auth/2fa/totp/setup', { token: user.token });
    expect(again.status).toBe(409);
  });

  it('login asks for the second step, which gives tokens for a TOTP code, never twice for the same code', async () => {
    const user = await enabledUser();
    nextStep();
    const first = await passwordStep(user.username, user.password);
    expect(first).toEqual({ requires_2fa: true, two_factor_token: expect.any(String) });
    expect(first.access_token).toBeUndefined();
    const code = codeFor(user.secret);
    const done = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: first.two_factor_token, code } });
    expect(done.status).toBe(200);
    expect(done.body.token_type).toBe('Bearer');
    expect((await t.request('GET', '/api/v1/auth/me', { token: done.body.access_token })).status).toBe(200);

    // The same code, even with a fresh challenge, is refused: each step is accepted once.
    const second = await passwordStep(user.username, user.password);
    const replay = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: second.two_factor_token, code } });
    expect(replay.status).toBe(401);
    // And a used challenge cannot be used again with a new code.
    nextStep();
    const reuse = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: first.two_factor_token, code: codeFor(user.secret) } });
    expect(reuse.status).toBe(401);
  });

  it('accepts each backup code once', async () => {
    const user = await enabledUser();
    const challenge = (await passwordStep(user.email, user.password)).two_factor_token;
    const backup = user.backup_codes[3];
    const ok = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: challenge, code: backup.toUpperCase() } });
    expect(ok.status).toBe(200);
    const challenge2 = (await passwordStep(user.email, user.password)).two_factor_token;
    const spent = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: challenge2, code: backup } });
    expect(spent.status).toBe(401);
    expect((await t.request('GET', '/api/v1/auth/2fa/status', { token: user.token })).body.backup_codes_remaining).toBe(9);
  });

  it('ends a challenge after five wrong codes and expires it after five minutes', async () => {
    const user = await enabledUser();
    const challenge = (await passwordStep(user.email, user.password)).two_factor_token;
    for (let i = 0; i < 5; i++) {
      const wrong = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: challenge, code: 'zzzzz-zzzzz' } });
      expect(wrong.status).toBe(401);
      expect(wrong.body.code).toBe('invalid_credentials');
    }
    nextStep();
    const late = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: challenge, code: codeFor(user.secret) } });
    expect(late.status).toBe(401);

    const fresh = (await passwordStep(user.email, user.password)).two_factor_token;
    clock().advance(301_000);
    const expired = await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: fresh, code: codeFor(user.secret) } });
    expect(expired.status).toBe(401);
  });

  it('regenerates backup codes with a TOTP code and disables with a backup code', async () => {
    const user = await enabledUser();
    nextStep();
    const refused = await t.request('POST', '/api/v1/auth/2fa/backup/regenerate', { token: user.token, body: { code: user.backup_codes[0] } });
    expect(refused.status).toBe(400);
    const regenerated = await t.request('POST', '/api/v1/auth/2fa/backup/regenerate', { token: user.token, body: { code: codeFor(user.secret) } });
    expect(regenerated.status).toBe(200);
    expect(regenerated.body.backup_codes).toHaveLength(10);
    expect(regenerated.body.backup_codes).not.toContain(user.backup_codes[0]);
    // Old codes are gone; new ones work.
    const oldCode = await t.request('POST', '/api/v1/auth/2fa/totp/disable', { token: user.token, body: { code: user.backup_codes[1] } });
    expect(oldCode.status).toBe(400);
    const disabled = await t.request('POST', '/api/v1/auth/2fa/totp/disable', { token: user.token, body: { code: regenerated.body.backup_codes[0] } });
    expect(disabled.status).toBe(200);
    expect((await t.request('GET', '/api/v1/auth/2fa/status', { token: user.token })).body).toEqual({ enabled: false, backup_codes_remaining: 0 });
    expect((await passwordStep(user.email, user.password)).access_token).toBeTypeOf('string');
    const twice = await t.request('POST', '/api/v1/auth/2fa/totp/disable', { token: user.token, body: { code: '123456' } });
    expect(twice.status).toBe(409);
  });

  it('refuses malformed bodies and forged challenge tokens', async () => {
    const user = await t.newUser('tfa');
    expect((await t.request('POST', '/api/v1/auth/2fa/totp/verify-setup', { token: user.token, body: {} })).status).toBe(400);
    expect((await t.request('POST', '/api/v1/auth/2fa/totp/verify-setup', { token: user.token, body: { code: 123456 } })).status).toBe(400);
    expect((await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: 'x.y.z', code: '123456' } })).status).toBe(401);
    // An access token is not a challenge token.
    expect((await t.request('POST', '/api/v1/auth/2fa/verify', { body: { two_factor_token: user.token, code: '123456' } })).status).toBe(401);
    expect((await t.request('GET', '/api/v1/auth/2fa/status')).status).toBe(401);
  });
});
