import { describe, expect, it } from 'vitest';
import { isValidChallenge, isValidVerifier, s256Challenge, verifyPkce } from '../../actors/oauth/pkce.js';

// RFC 7636 appendix B.
const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

describe('PKCE (RFC 7636)', () => {
  it('computes the appendix B S256 challenge', () => {
    expect(s256Challenge(VERIFIER)).toBe(CHALLENGE);
  });

  it('verifies S256 and plain, and refuses a wrong verifier', () => {
    expect(verifyPkce(VERIFIER, CHALLENGE, 'S256')).toBe(true);
    expect(verifyPkce(VERIFIER, VERIFIER, 'plain')).toBe(true);
    expect(verifyPkce(VERIFIER, CHALLENGE, 'plain')).toBe(false);
    expect(verifyPkce(VERIFIER.slice(0, -1) + 'l', CHALLENGE, 'S256')).toBe(false);
    expect(verifyPkce(VERIFIER, VERIFIER, 'S256')).toBe(false);
  });

  it('refuses verifiers outside 43..128 characters of the unreserved alphabet', () => {
    expect(isValidVerifier('a'.repeat(42))).toBe(false);
    expect(isValidVerifier('a'.repeat(43))).toBe(true);
    expect(isValidVerifier('a'.repeat(128))).toBe(true);
    expect(isValidVerifier('a'.repeat(129))).toBe(false);
    expect(isValidVerifier('a'.repeat(42) + '+')).toBe(false);
    expect(verifyPkce('short', 'short', 'plain')).toBe(false);
    expect(isValidChallenge(CHALLENGE)).toBe(true);
    expect(isValidChallenge('x')).toBe(false);
  });
});
