import * as crypto from 'node:crypto';
import { timingSafeEqual } from 'node:crypto';

/**
 * The consume token a check returns and a refund presents. It carries what
 * the refund needs (the check's sequence number in its subject, the cost
 * consumed, the end of its refund window) and a MAC over them with the
 * subject actor's own secret (128 random bits), so the subject keeps O(1)
 * state per check: it trusts the token's cost because only it could have
 * signed it, and it remembers only the tokens already refunded (until their
 * window ends).
 *
 * Form: `ct_<seq>.<cost>.<refundable_until_ms>.<mac>` (numbers in base 36,
 * mac = the first 16 bytes of SHA-256("<claims>.<secret>"), base64url). The
 * secret comes last, so the hash cannot be extended to other claims (and the
 * claims are parsed strictly); one SHA-256 of a short string is a tenth of
 * the cost of an HMAC object per check on this hot path.
 */
export interface ConsumeTokenClaims {
  seq: number;
  cost: number;
  refundable_until_ms: number;
}

const PREFIX = 'ct_';
const PART = /^[0-9a-z]{1,12}$/;
const MAC = /^[A-Za-z0-9_-]{22}$/;

/** crypto.hash (one call, no Hash object) where the runtime has it; createHash otherwise. */
const sha256 = (text: string): Buffer =>
  typeof (crypto as { hash?: unknown }).hash === 'function'
    ? (crypto as unknown as { hash(algorithm: string, data: string, encoding: 'buffer'): Buffer }).hash('sha256', text, 'buffer')
    : crypto.createHash('sha256').update(text).digest();

function claimsText(claims: ConsumeTokenClaims): string {
  return `${claims.seq.toString(36)}.${claims.cost.toString(36)}.${claims.refundable_until_ms.toString(36)}`;
}

function mac(secret: string, text: string): Buffer {
  return sha256(`${text}.${secret}`).subarray(0, 16);
}

export function signConsumeToken(secret: string, claims: ConsumeTokenClaims): string {
  const text = claimsText(claims);
  return `${PREFIX}${text}.${mac(secret, text).toString('base64url')}`;
}

/** The claims of a well-formed token, unverified (null when malformed). */
export function readConsumeToken(token: string): (ConsumeTokenClaims & { mac: string }) | null {
  if (!token.startsWith(PREFIX)) return null;
  const parts = token.slice(PREFIX.length).split('.');
  if (parts.length !== 4 || !parts.slice(0, 3).every((part) => PART.test(part)) || !MAC.test(parts[3])) return null;
  const [seq, cost, refundable_until_ms] = parts.slice(0, 3).map((part) => parseInt(part, 36));
  if (![seq, cost, refundable_until_ms].every(Number.isSafeInteger)) return null;
  return { seq, cost, refundable_until_ms, mac: parts[3] };
}

/** True when `secret` signed these claims. */
export function verifyConsumeToken(secret: string, claims: ConsumeTokenClaims & { mac: string }): boolean {
  const given = Buffer.from(claims.mac, 'base64url');
  const expected = mac(secret, claimsText(claims));
  return given.length === expected.length && timingSafeEqual(given, expected);
}
