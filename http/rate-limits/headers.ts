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

/**
 * RateLimit's value, on every limited response. Only r is new with each
 * request (t changes once a second): the rest comes from strings made once,
 * so a response costs one number's digits and two joins. (Against a template
 * literal the bench could not tell the difference beyond its spread:
 * docs/performance.md, "Rate limits".)
 */
export function rateLimitHeader(policy: string, remaining: number, reset_seconds: number): string {
  let prefix = prefixes.get(policy);
  if (prefix === undefined) prefixes.set(policy, (prefix = `"${policy}";r=`));
  const t = Math.max(0, reset_seconds);
  return prefix + Math.max(0, remaining) + (t < SUFFIXES ? suffixes[t]! : `;t=${t}`);
}
