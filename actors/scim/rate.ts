/**
 * The per-organization rate of SCIM creations: a token bucket kept by the
 * organization's scim-directory actor (record `b:create`) and taken in the
 * turn that starts a provisioning, so concurrent requests cannot both take
 * the last token. Pure: time is the turn's `now`.
 */
export interface TokenBucket {
  /** Tokens left at `at_ms` (fractional while refilling). */
  tokens: number;
  at_ms: number;
}

export interface BucketRule {
  /** Tokens added per second. */
  per_second: number;
  /** The most tokens the bucket holds (the burst). */
  burst: number;
}

export type Take = { ok: true; bucket: TokenBucket } | { ok: false; bucket: TokenBucket; retry_after_ms: number };

/** The bucket as it stands at `now_ms` (a missing bucket is full). */
export function refill(bucket: TokenBucket | null, rule: BucketRule, now_ms: number): TokenBucket {
  if (bucket === null) return { tokens: rule.burst, at_ms: now_ms };
  // A clock that went back adds nothing (and takes nothing).
  const elapsed_ms = Math.max(0, now_ms - bucket.at_ms);
  return { tokens: Math.min(rule.burst, bucket.tokens + (elapsed_ms * rule.per_second) / 1000), at_ms: Math.max(now_ms, bucket.at_ms) };
}

/** Takes one token, or says how long until one is there. */
export function takeToken(bucket: TokenBucket | null, rule: BucketRule, now_ms: number): Take {
  const current = refill(bucket, rule, now_ms);
  if (current.tokens >= 1) return { ok: true, bucket: { tokens: current.tokens - 1, at_ms: current.at_ms } };
  return { ok: false, bucket: current, retry_after_ms: Math.ceil(((1 - current.tokens) * 1000) / rule.per_second) };
}
