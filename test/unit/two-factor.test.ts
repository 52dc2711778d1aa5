import { describe, expect, it } from 'vitest';
import { beginSetup, challengeFailures, completeSetup, emptyTwoFactor, recordChallenge, verifyCode } from '../../actors/accounts/two-factor.js';
import { base32Decode, totp } from '../../actors/accounts/totp.js';

const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
const now = 1_800_000_000_000;
const code = (at: number) => totp(base32Decode(SECRET)!, at);

function enabled() {
  return completeSetup(beginSetup(emptyTwoFactor(), SECRET, ['h1', 'h2']), code(now), now);
}

describe('two-factor rules', () => {
  it('enables with a code for the pending secret and moves the backup hashes in', () => {
    const state = enabled();
    expect(state).toMatchObject({ enabled: true, secret_b32: SECRET, pending_secret_b32: null, backup_hashes: ['h1', 'h2'] });
    expect(() => beginSetup(state, SECRET, [])).toThrow(/already enabled/);
  });

  it('never accepts a step at or below the last accepted one', () => {
    const state = enabled();
    // The set-up code's step is spent.
    expect(verifyCode(state, { code: code(now), code_hash: 'x' }, now, false).ok).toBe(false);
    expect(verifyCode(state, { code: code(now - 30_000), code_hash: 'x' }, now, false).ok).toBe(false);
    const later = verifyCode(state, { code: code(now + 30_000), code_hash: 'x' }, now + 30_000, false);
    expect(later.ok).toBe(true);
  });

  it('spends a backup code only where backup codes are allowed', () => {
    const state = enabled();
    expect(verifyCode(state, { code: 'abc', code_hash: 'h2' }, now, false).ok).toBe(false);
    const spent = verifyCode(state, { code: 'abc', code_hash: 'h2' }, now, true);
    expect(spent.ok && spent.state.backup_hashes).toEqual(['h1']);
  });

  it('counts challenge failures and keeps a bounded list', () => {
    let state = enabled();
    state = recordChallenge(state, 'c1', 1);
    state = recordChallenge(state, 'c1', 2);
    expect(challengeFailures(state, 'c1')).toBe(2);
    expect(challengeFailures(state, 'unknown')).toBe(0);
    for (let i = 0; i < 30; i++) state = recordChallenge(state, `n${i}`, -1);
    expect(state.challenges).toHaveLength(20);
    expect(challengeFailures(state, 'n29')).toBe(-1);
  });
});
