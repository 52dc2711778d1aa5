import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { loadLockDirectory, stepLockDirectory, type LockDirectoryState } from './directory-state.js';
import { LOCK_DIRECTORY_KIND, LOCK_KIND, type LockDirectoryMessage, type LockKeysView, type LockMessage, type LockNamespacesView, type LockView } from './messages.js';
import { initialLockState, stepLock, type LockState } from './state.js';

/** The lock actor: one per (tenant, namespace, key), a snapshot of its holder and fence counter. */
export const lockActor: SnapshotActorDefinition<LockState, LockMessage, LockView> = {
  kind: LOCK_KIND,
  storage: 'snapshot',
  initial: initialLockState,
  step: stepLock,
};

/** One per tenant: the (namespace, key) pairs the tenant ever locked, for the admin list. */
export const lockDirectoryActor: RecordsActorDefinition<LockDirectoryState, LockDirectoryMessage, LockNamespacesView | LockKeysView | undefined> = {
  kind: LOCK_DIRECTORY_KIND,
  storage: 'records',
  load: loadLockDirectory,
  step: stepLockDirectory,
};
