import type { SnapshotActorDefinition } from '../../runtime/index.js';
import { initialLockState, stepLock, type LockMessage, type LockState, type LockView } from './state.js';

export const LOCK_KIND = 'lock';

/** Actor key of a lock: tenant, namespace and key, unambiguously joined. */
export function lockActorKey(tenant: string, namespace: string, key: string): string {
  return JSON.stringify([tenant, namespace, key]);
}

export const lockActor: SnapshotActorDefinition<LockState, LockMessage, LockView> = {
  kind: LOCK_KIND,
  storage: 'snapshot',
  initial: initialLockState,
  step: stepLock,
};
