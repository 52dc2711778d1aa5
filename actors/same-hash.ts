import { timingSafeEqual } from 'node:crypto';

/**
 * Constant-time equality of two stored hashes (hex or base64url strings), for
 * every actor that compares a presented secret's hash with the one it keeps.
 */
export function sameHash(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
