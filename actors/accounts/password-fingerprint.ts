import { createHash } from 'node:crypto';

/**
 * What a sign-in proved, bound to the password it proved: a digest of the
 * stored password hash (a digest of a hash: it tells nothing of the
 * password). A login's session opens, and its two-factor challenge completes,
 * only while the account's password is still the one the password step
 * checked: a login that raced a password change or reset (read the old hash,
 * checked it at the edge, then asked to open its session) is refused, as
 * "every session ends" on a change or reset promises (docs/api/accounts.md).
 */
export function passwordFingerprint(password_hash: string): string {
  return createHash('sha256').update('password-fingerprint/v1\0').update(password_hash).digest('base64url').slice(0, 22);
}
