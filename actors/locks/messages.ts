/**
 * The locks area's public surface: the actor kind, how a key is built, the
 * messages the lock actor takes and the views it answers with. Other layers
 * (http/, bench/, tests of other areas) import this file only.
 */

export const LOCK_KIND = 'lock';

/** Actor key of a lock: tenant, namespace and key, unambiguously joined (a JSON array). */
export function lockActorKey(tenant: string, namespace: string, key: string): string {
  return JSON.stringify([tenant, namespace, key]);
}

/** What every lock actor key of the tenant starts with (for partition reads: the administrators' list). */
export function lockTenantPrefix(tenant: string): string {
  return `[${JSON.stringify(tenant)},`;
}

/** What every lock actor key of the tenant's namespace starts with. */
export function lockNamespacePrefix(tenant: string, namespace: string): string {
  return `[${JSON.stringify(tenant)},${JSON.stringify(namespace)},`;
}

/** The key part of a lock actor key. */
export function lockKeyOf(actorKey: string): string {
  return (JSON.parse(actorKey) as [string, string, string])[2];
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

/** A lock's stored state (what a partition read returns for it): the holder, possibly expired, and the fence counter. */
export interface StoredLock {
  holder: LockHolder | null;
  last_fence_token: number;
}

/** The view of a stored lock at `now_ms`: a holder whose time is up is no holder. */
export function viewOfStoredLock(stored: StoredLock, now_ms: number): LockView {
  const holder = stored.holder && stored.holder.expires_at_ms > now_ms ? stored.holder : null;
  return { holder, last_fence_token: stored.last_fence_token, now_ms };
}
