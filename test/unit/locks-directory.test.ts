import { describe, expect, it } from 'vitest';
import { LOCK_DIRECTORY_KIND, lockActorKey, lockDirectoryKey, type LockKeysView, type LockNamespacesView } from '../../actors/locks/messages.js';
import { loadLockDirectory, stepLockDirectory, type LockDirectoryState } from '../../actors/locks/directory-state.js';
import { initialLockState, stepLock } from '../../actors/locks/state.js';
import { fixedContext } from '../helpers/step.js';

/** The tenant's lock directory (what GET /admin/locks lists) and the lock's one message to it. */
const T0 = Date.UTC(2026, 0, 1);
const directoryContext = fixedContext(T0, LOCK_DIRECTORY_KIND, lockDirectoryKey('t'));

function add(state: LockDirectoryState, namespace: string, key: string) {
  return stepLockDirectory(state, { op: 'add', namespace, key }, directoryContext);
}

describe('lock directory', () => {
  it('lists namespaces and their keys in order, each key once', () => {
    let state = loadLockDirectory(lockDirectoryKey('t'), []);
    const writes = [];
    for (const [namespace, key] of [['jobs', 'b'], ['jobs', 'a'], ['billing', 'x'], ['jobs', 'b']] as const) {
      const result = add(state, namespace, key);
      state = result.state;
      writes.push(...(result.writes ?? []));
    }
    expect(writes).toHaveLength(3);
    const namespaces = stepLockDirectory(state, { op: 'namespaces', offset: 0, limit: 10 }, directoryContext).reply as LockNamespacesView;
    expect(namespaces).toEqual({ total: 2, namespaces: [{ namespace: 'billing', key_count: 1 }, { namespace: 'jobs', key_count: 2 }], unlisted_keys: 0 });
    const keys = stepLockDirectory(state, { op: 'keys', namespace: 'jobs', offset: 1, limit: 10 }, directoryContext).reply as LockKeysView;
    expect(keys).toEqual({ total: 2, keys: ['b'] });

    // Rebuilt from its records, the directory answers the same.
    const reloaded = loadLockDirectory(lockDirectoryKey('t'), writes.map((w) => [w.subkey, w.value] as [string, unknown]).reverse());
    expect(stepLockDirectory(reloaded, { op: 'keys', namespace: 'jobs', offset: 0, limit: 10 }, directoryContext).reply).toEqual({ total: 2, keys: ['a', 'b'] });
  });

  it('a lock tells the directory at its first acquisition only', () => {
    const context = (now: number) => fixedContext(now, 'lock', lockActorKey('t', 'jobs', 'k1'));
    const first = stepLock(initialLockState(), { op: 'acquire', owner_id: 'a', ttl_seconds: 5 }, context(T0));
    expect(first.sends).toEqual([{ kind: LOCK_DIRECTORY_KIND, key: lockDirectoryKey('t'), message: { op: 'add', namespace: 'jobs', key: 'k1' } }]);
    const released = stepLock(first.state, { op: 'release', lock_id: first.state.holder!.lock_id, owner_id: 'a' }, context(T0 + 1));
    const again = stepLock(released.state, { op: 'acquire', owner_id: 'b', ttl_seconds: 5 }, context(T0 + 2));
    expect(again.sends).toBeUndefined();
    expect(again.state.holder!.fence_token).toBe(2);
    // A lock stored before the directory existed (no `listed`) tells it at its next acquisition.
    const older = stepLock({ holder: null, last_fence_token: 7 }, { op: 'acquire', owner_id: 'c', ttl_seconds: 5 }, context(T0));
    expect(older.sends).toHaveLength(1);
  });
});
