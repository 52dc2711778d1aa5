import type { SnapshotActorDefinition } from '../../runtime/index.js';
import { LOCK_KIND, type LockMessage, type LockView } from './messages.js';
import { initialLockState, stepLock, type LockState } from './state.js';

/** The lock actor: one per (tenant, namespace, key), a snapshot of its holder and fence counter. */
export const lockActor: SnapshotActorDefinition<LockState, LockMessage, LockView> = {
  kind: LOCK_KIND,
  storage: 'snapshot',
  initial: initialLockState,
  step: stepLock,
};
