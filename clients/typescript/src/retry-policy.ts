/** When and how long the client waits before sending a request again. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 4). 1 turns retries off. */
  maxAttempts?: number;
  /** A `Retry-After` longer than this is not waited for: the error is thrown instead (default 30 s). */
  maxDelayMs?: number;
  /** The first backoff when the answer gave no `Retry-After` (a lost connection); doubled each attempt (default 200 ms). */
  baseDelayMs?: number;
  /** How to wait; tests pass one that records the delays. */
  sleep?: (ms: number) => Promise<void>;
}

export const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `Retry-After` in milliseconds: delta-seconds (what this service sends) or
 * an HTTP date. Null when absent or unreadable.
 */
export function retryAfterMs(header: string | null, now = Date.now()): number | null {
  if (header === null) return null;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/** Exponential backoff with full jitter, for retries without a `Retry-After`. */
export function backoffMs(attempt: number, baseDelayMs: number, maxDelayMs: number): number {
  const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
  return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
}
