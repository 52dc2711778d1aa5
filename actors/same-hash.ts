import { timingSafeEqual } from 'node:crypto';

/**
 * Constant-time equality of two stored hashes (hex or base64url strings), the
 * same comparison as the private `sameHash` of the api-key, oauth-client and
 * scim actors, for actors that compare a presented secret's hash.
 */
export function sameHash(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
