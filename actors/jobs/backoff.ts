import { jobPolicy, type RetryPolicy } from './messages.js';

/**
 * The retry schedule of a job, a pure function: after failed attempt n
 * (1-based) the job waits backoff_seconds * 2^(n-1), at most
 * retry_wait_seconds_max, times a jitter factor in [0.5, 1) ("equal
 * jitter"). The factor comes from a hash of the job id and the attempt, never
 * from Math.random, so many jobs failing together spread out and a replayed
 * turn waits the same.
 */
export function retryDelayMs(policy: RetryPolicy, attempt: number, job_id: string): number {
  const exponential_s = Math.min(jobPolicy.retry_wait_seconds_max, policy.backoff_seconds * 2 ** Math.max(0, attempt - 1));
  return Math.round(exponential_s * 1000 * (0.5 + 0.5 * unitHash(`${job_id}#${attempt}`)));
}

/** FNV-1a of the text with a final avalanche, as a number in [0, 1). */
export function unitHash(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b) >>> 0;
  hash ^= hash >>> 13;
  return (hash >>> 0) / 0x1_0000_0000;
}
