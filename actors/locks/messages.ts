/**
 * The locks area's public surface: the actor kind, how a key is built, the
 * messages the lock actor takes and the views it answers with. Other layers
 * (http/, bench/, tests of other areas) import this file only.
 */

export const LOCK_KIND = 'lock';

/** Actor key of a lock: tenant, namespace and key, unambiguously joined. */
export function lockActorKey(tenant: string, namespace: string, key: string): string {
  return JSON.stringify([tenant, namespace, key]);
}

export interface LockHolder {
  lock_id: string;
  owner_id: string;
  acquired_at_ms: number;
  expires_at_ms: number;
  ttl_seconds: number;
  fence_token: number;
  metadata: unknown;
}

export type LockMessage =
  | { op: 'acquire'; owner_id: string; ttl_seconds: number; metadata?: unknown }
  | { op: 'extend'; lock_id: string; owner_id: string; ttl_seconds?: number }
  | { op: 'release'; lock_id: string; owner_id: string }
  | { op: 'status' };

/** Every reply of the lock actor: the holder (null when free) and the last fence token issued. */
export interface LockView {
  holder: LockHolder | null;
  last_fence_token: number;
  now_ms: number;
}

/**
 * The lock directory: one actor per tenant listing every (namespace, key) the tenant has
 * locked at least once, for the administrators' list (GET /admin/locks). A lock tells it once,
 * at its first acquisition (through the outbox), so taking and releasing a known lock costs the
 * directory nothing; the list asks each lock on the page for its live holder.
 */
export const LOCK_DIRECTORY_KIND = 'lock-directory';

export function lockDirectoryKey(tenant: string): string {
  return JSON.stringify([tenant]);
}

/** Keys a tenant's directory lists; past it, new keys are counted in `unlisted_keys` only. */
export const LOCK_DIRECTORY_KEYS_MAX = 1_000_000;

export type LockDirectoryMessage =
  | { op: 'add'; namespace: string; key: string }
  | { op: 'namespaces'; offset: number; limit: number }
  | { op: 'keys'; namespace: string; offset: number; limit: number };

export interface LockNamespacesView {
  total: number;
  namespaces: { namespace: string; key_count: number }[];
  unlisted_keys: number;
}

export interface LockKeysView {
  total: number;
  keys: string[];
}
