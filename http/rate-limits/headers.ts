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

export function rateLimitHeader(policy: string, remaining: number, reset_seconds: number): string {
  return `"${policy}";r=${Math.max(0, remaining)};t=${Math.max(0, reset_seconds)}`;
}
