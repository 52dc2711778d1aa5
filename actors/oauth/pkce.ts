import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * PKCE (RFC 7636). A verifier is 43 to 128 characters of [A-Za-z0-9-._~];
 * S256 sends BASE64URL(SHA256(verifier)) as the challenge, plain sends the
 * verifier itself. Pure functions, shared by the oauth-client actor and tests.
 */
export type PkceMethod = 'S256' | 'plain';

const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;

export function isValidVerifier(verifier: string): boolean {
  return VERIFIER.test(verifier);
}

/** A challenge has the verifier's alphabet and length (an S256 challenge is 43 characters). */
export function isValidChallenge(challenge: string): boolean {
  return VERIFIER.test(challenge);
}

export function s256Challenge(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

function sameString(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** Whether `verifier` answers `challenge` under `method` (timing-safe). */
export function verifyPkce(verifier: string, challenge: string, method: PkceMethod): boolean {
  if (!isValidVerifier(verifier)) return false;
  return sameString(method === 'S256' ? s256Challenge(verifier) : verifier, challenge);
}
