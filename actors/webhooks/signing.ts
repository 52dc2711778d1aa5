import { createHmac } from 'node:crypto';

/**
 * Standard Webhooks signing and the retry schedule: pure functions (HMAC is
 * deterministic; jitter comes from a hash of the event id and attempt, never
 * from Math.random).
 */

export const SECRET_PREFIX = 'whsec_';

/** `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` keyed with the base64-decoded part of the secret after whsec_. */
export function signature(secret: string, webhook_id: string, timestamp_s: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  const mac = createHmac('sha256', key).update(`${webhook_id}.${timestamp_s}.${body}`).digest('base64');
  return `v1,${mac}`;
}

/** The signature header: one signature per secret, space-separated (the current secret's first). */
export function signatureHeader(secrets: string[], webhook_id: string, timestamp_s: number, body: string): string {
  return secrets.map((secret) => signature(secret, webhook_id, timestamp_s, body)).join(' ');
}

/** FNV-1a of the text, as a number in [0, 1). */
export function unitHash(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  // One more avalanche round so near-identical inputs spread.
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b) >>> 0;
  hash ^= hash >>> 13;
  return (hash >>> 0) / 0x1_0000_0000;
}

/**
 * The wait before the retry that follows failed attempt `attempt` (1-based):
 * exponential (base * 2^(attempt-1), at most max_ms), with "equal jitter":
 * a factor in [0.5, 1) drawn from the seed, so retries of many events spread
 * out, yet the same event and attempt always wait the same.
 */
export function backoffMs(attempt: number, base_ms: number, max_ms: number, seed: string): number {
  const exponential = Math.min(max_ms, base_ms * 2 ** Math.max(0, attempt - 1));
  return Math.round(exponential * (0.5 + 0.5 * unitHash(`${seed}#${attempt}`)));
}
