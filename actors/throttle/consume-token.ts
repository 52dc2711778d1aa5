import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The consume token a check returns and a refund presents. It carries what
 * the refund needs (the check's sequence number in its subject, the cost
 * consumed, the end of its refund window) and an HMAC over them with the
 * subject actor's own secret, so the subject keeps O(1) state per check: it
 * trusts the token's cost because only it could have signed it, and it
 * remembers only the tokens already refunded (until their window ends).
 *
 * Form: `ct_<seq>.<cost>.<refundable_until_ms>.<mac>` (numbers in base 36,
 * mac = the first 16 bytes of HMAC-SHA256, base64url).
 */
export interface ConsumeTokenClaims {
  seq: number;
  cost: number;
  refundable_until_ms: number;
}

const PREFIX = 'ct_';
const PART = /^[0-9a-z]{1,12}$/;

function mac(secret: string, claims: ConsumeTokenClaims): Buffer {
  return createHmac('sha256', secret).update(`${claims.seq}.${claims.cost}.${claims.refundable_until_ms}`).digest().subarray(0, 16);
}

export function signConsumeToken(secret: string, claims: ConsumeTokenClaims): string {
  const parts = [claims.seq, claims.cost, claims.refundable_until_ms].map((n) => n.toString(36));
  return `${PREFIX}${parts.join('.')}.${mac(secret, claims).toString('base64url')}`;
}

/** The claims of a well-formed token, unverified (null when malformed). */
export function readConsumeToken(token: string): (ConsumeTokenClaims & { mac: string }) | null {
  if (!token.startsWith(PREFIX)) return null;
  const parts = token.slice(PREFIX.length).split('.');
  if (parts.length !== 4 || !parts.slice(0, 3).every((part) => PART.test(part)) || !/^[A-Za-z0-9_-]{22}$/.test(parts[3])) return null;
  const [seq, cost, refundable_until_ms] = parts.slice(0, 3).map((part) => parseInt(part, 36));
  if (![seq, cost, refundable_until_ms].every(Number.isSafeInteger)) return null;
  return { seq, cost, refundable_until_ms, mac: parts[3] };
}

/** True when `secret` signed these claims. */
export function verifyConsumeToken(secret: string, claims: ConsumeTokenClaims & { mac: string }): boolean {
  const given = Buffer.from(claims.mac, 'base64url');
  const expected = mac(secret, claims);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
