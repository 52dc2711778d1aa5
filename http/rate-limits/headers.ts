import type { Limit } from '../../actors/rate-limits/messages.js';

/**
 * The RateLimit header fields of draft-ietf-httpapi-ratelimit-headers-10/-11
 * (Structured Field lists, one item per policy, the policy name a String):
 *
 *   RateLimit-Policy: "default";q=1000;w=60
 *   RateLimit: "default";r=998;t=59
 *
 * q is the quota (max_requests), w the window in seconds, r what is left of
 * the quota, t the seconds until the quota has room again (refused) or until
 * the window is next empty (admitted).
 */
export function policyHeader(policy: string, limit: Limit): string {
  return `"${policy}";q=${limit.max_requests};w=${limit.window_seconds}`;
}

/** `"<policy>";r=` per policy name, made once. */
const prefixes = new Map<string, string>();
/** `;t=<n>` for every n below this, made once. */
const SUFFIXES = 1024;
const suffixes = Array.from({ length: SUFFIXES }, (_, t) => `;t=${t}`);
/** "0".."999", and the same zero-padded to three digits, made once. */
const DIGITS = Array.from({ length: 1000 }, (_, n) => String(n));
const DIGITS3 = Array.from({ length: 1000 }, (_, n) => String(n).padStart(3, '0'));

/**
 * The decimal form of a non-negative integer, joined from strings made once.
 * Not `String(n)`: V8 keeps the string of every number it converts in its
 * number-string cache, an old-generation table, so each response's new r
 * would outlive its request, be copied by the next young-generation
 * collections and moved to the old generation. Measured on the rate-limit
 * bench's route (`--trace-gc-nvp`, 300,000 requests, one caller): 79-109 KB
 * promoted per scavenge against 23-57 KB without the limiter, and 40-65 KB
 * with this (docs/performance.md, "Rate limits").
 */
export function decimal(n: number): string {
  if (!Number.isSafeInteger(n) || n < 0) return String(n);
  if (n < 1000) return DIGITS[n]!;
  let low = DIGITS3[n % 1000]!;
  let rest = Math.floor(n / 1000);
  while (rest >= 1000) {
    low = DIGITS3[rest % 1000]! + low;
    rest = Math.floor(rest / 1000);
  }
  return DIGITS[rest]! + low;
}

/**
 * RateLimit's value, on every limited response. Only r is new with each
 * request (t changes once a second): the rest comes from strings made once,
 * and r's digits too (decimal above).
 */
export function rateLimitHeader(policy: string, remaining: number, reset_seconds: number): string {
  let prefix = prefixes.get(policy);
  if (prefix === undefined) prefixes.set(policy, (prefix = `"${policy}";r=`));
  const t = Math.max(0, reset_seconds);
  return prefix + decimal(Math.max(0, remaining)) + (t < SUFFIXES ? suffixes[t]! : `;t=${t}`);
}
