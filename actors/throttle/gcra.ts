/**
 * The throttle's algorithm: GCRA (the generic cell rate algorithm, the
 * token bucket written as one timestamp), exact, in integers.
 *
 * A limit of `max_requests` per `window_ms` refills one unit every
 * T = window_ms / max_requests and holds at most max_requests units. The
 * bucket is one time, the TAT ("theoretical arrival time"): the moment it is
 * full again. A request of cost c fits when TAT' = max(TAT, now) + c·T stays
 * within `window_ms` of now; then TAT becomes TAT'. So at most max_requests
 * units pass in any burst, and the long-run rate is max_requests per window,
 * with no window edge where twice the limit passes (as with fixed windows).
 *
 * T is rarely a whole number of milliseconds (60 000 ms / 7), so the TAT is
 * kept exactly as `tat_ms + tat_frac / max_requests` with integer parts:
 * nothing is rounded, and no float decides a request. The products involved
 * (window_ms · max_requests, cost · window_ms) stay below 2^53 within the
 * policy's bounds (30 days, 1,000,000 requests).
 */
export interface Bucket {
  tat_ms: number;
  /** Numerator over max_requests, 0 <= tat_frac < max_requests. */
  tat_frac: number;
}

export interface Limit {
  max_requests: number;
  window_ms: number;
}

export const FULL_BUCKET: Bucket = { tat_ms: 0, tat_frac: 0 };

/** The bucket as of `now`: a TAT in the past means full, i.e. TAT = now. */
export function levelled(bucket: Bucket, now: number): Bucket {
  return bucket.tat_ms < now || (bucket.tat_ms === now && bucket.tat_frac === 0) ? { tat_ms: now, tat_frac: 0 } : bucket;
}

/**
 * The room left, scaled to an integer: (window_ms - (TAT - now)) · max_requests
 * (negative when a tightened limit left the bucket over-full).
 */
function slackScaled(bucket: Bucket, limit: Limit, now: number): number {
  // levelled() inlined: this runs several times per check, so it allocates nothing.
  if (bucket.tat_ms < now || (bucket.tat_ms === now && bucket.tat_frac === 0)) return limit.window_ms * limit.max_requests;
  return (limit.window_ms - (bucket.tat_ms - now)) * limit.max_requests - bucket.tat_frac;
}

/** Units that would pass now: a request of cost c passes exactly when c <= remaining. */
export function remaining(bucket: Bucket, limit: Limit, now: number): number {
  const slack = slackScaled(bucket, limit, now);
  return slack <= 0 ? 0 : Math.min(limit.max_requests, Math.floor(slack / limit.window_ms));
}

/** Milliseconds until the bucket is full again (0 when it is), rounded up. */
export function msUntilFull(bucket: Bucket, now: number): number {
  if (bucket.tat_ms < now || (bucket.tat_ms === now && bucket.tat_frac === 0)) return 0;
  return bucket.tat_ms - now + (bucket.tat_frac > 0 ? 1 : 0);
}

/** Milliseconds until a request of `cost` would pass (0 when it passes now), rounded up. */
export function msUntilFits(bucket: Bucket, limit: Limit, cost: number, now: number): number {
  const missing = cost * limit.window_ms - slackScaled(bucket, limit, now);
  return missing <= 0 ? 0 : Math.ceil(missing / limit.max_requests);
}

/** TAT moved by `cost` units: later (consume) for a positive cost, earlier (refund) for a negative one. */
function shifted(bucket: Bucket, limit: Limit, cost: number): Bucket {
  const whole = Math.floor(limit.window_ms / limit.max_requests);
  const part = limit.window_ms % limit.max_requests;
  const frac = bucket.tat_frac + cost * part;
  const carry = Math.floor(frac / limit.max_requests);
  return { tat_ms: bucket.tat_ms + cost * whole + carry, tat_frac: frac - carry * limit.max_requests };
}

/** Takes `cost` units if they fit: the new bucket, or null (and the bucket unchanged) when they do not. */
export function consume(bucket: Bucket, limit: Limit, cost: number, now: number): Bucket | null {
  if (cost > remaining(bucket, limit, now)) return null;
  return shifted(levelled(bucket, now), limit, cost);
}

/** Gives `cost` units back; the bucket never holds more than max_requests. */
export function refund(bucket: Bucket, limit: Limit, cost: number, now: number): Bucket {
  return levelled(shifted(bucket, limit, -cost), now);
}

/**
 * The same bucket under a changed limit: the units still owed carry over
 * (a subject that used 1 of 1 has 4 of 5 left when the plan is raised to 5),
 * and refill at the new rate. The conversion is exact in BigInt and rounds
 * up, never in the client's favour. It runs once per rule change, not per check.
 */
export function rescaled(bucket: Bucket, from: Limit, to: Limit, now: number): Bucket {
  const level = levelled(bucket, now);
  // Owed time under `from`, scaled by from.max_requests: units owed = owed / from.window_ms.
  const owed = BigInt(level.tat_ms - now) * BigInt(from.max_requests) + BigInt(level.tat_frac);
  if (owed === 0n) return level;
  // The same units under `to`, as time scaled by to.max_requests: units * to.window_ms.
  const numerator = owed * BigInt(to.window_ms);
  const denominator = BigInt(from.window_ms);
  const scaled = (numerator + denominator - 1n) / denominator;
  const max = BigInt(to.max_requests);
  return { tat_ms: now + Number(scaled / max), tat_frac: Number(scaled % max) };
}
