import type { AlarmMessage, RecordWrite, TurnContext, TurnResult } from '../../runtime/index.js';
import { LOCK_DIRECTORY_KEYS_MAX, type LockDirectoryMessage, type LockKeysView, type LockNamespacesView } from './messages.js';

/**
 * A tenant's lock directory (`lock-directory`, storage `records`): one record per
 * (namespace, key) ever locked, so administrators can list locks without a scan of storage.
 * Adding is idempotent (a repeated or late `add` changes nothing) and nothing is ever removed,
 * like the lock actors themselves, which keep their fence counter forever.
 *
 * In memory: namespace -> its keys in sorted order, rebuilt from the records at load.
 */
export interface LockDirectoryState {
  namespaces: Map<string, string[]>;
  key_count: number;
  unlisted_keys: number;
}

const KEY_PREFIX = 'k:';
const UNLISTED = 'unlisted';

export function loadLockDirectory(_key: string, records: Iterable<[string, unknown]>): LockDirectoryState {
  const state: LockDirectoryState = { namespaces: new Map(), key_count: 0, unlisted_keys: 0 };
  for (const [subkey, value] of records) {
    if (subkey === UNLISTED) {
      state.unlisted_keys = value as number;
      continue;
    }
    const [namespace, key] = JSON.parse(subkey.slice(KEY_PREFIX.length)) as [string, string];
    const keys = state.namespaces.get(namespace) ?? [];
    keys.push(key);
    state.namespaces.set(namespace, keys);
    state.key_count += 1;
  }
  for (const keys of state.namespaces.values()) keys.sort(compare);
  return state;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Where `key` is, or would go, in sorted `keys`. */
function positionOf(keys: string[], key: string): number {
  let low = 0;
  let high = keys.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (keys[middle]! < key) low = middle + 1;
    else high = middle;
  }
  return low;
}

export function stepLockDirectory(
  state: LockDirectoryState,
  message: LockDirectoryMessage | AlarmMessage,
  _context: TurnContext,
): TurnResult<LockDirectoryState, LockNamespacesView | LockKeysView | undefined> {
  switch (message.op) {
    case 'add': {
      const keys = state.namespaces.get(message.namespace) ?? [];
      const at = positionOf(keys, message.key);
      if (keys[at] === message.key) return { state };
      if (state.key_count >= LOCK_DIRECTORY_KEYS_MAX) {
        state.unlisted_keys += 1;
        return { state, writes: [{ subkey: UNLISTED, value: state.unlisted_keys }] };
      }
      keys.splice(at, 0, message.key);
      state.namespaces.set(message.namespace, keys);
      state.key_count += 1;
      const write: RecordWrite = { subkey: KEY_PREFIX + JSON.stringify([message.namespace, message.key]), value: 1 };
      return { state, writes: [write] };
    }
    case 'namespaces': {
      const names = [...state.namespaces.keys()].sort(compare);
      return {
        state,
        reply: {
          total: names.length,
          namespaces: names.slice(message.offset, message.offset + message.limit).map((namespace) => ({ namespace, key_count: state.namespaces.get(namespace)!.length })),
          unlisted_keys: state.unlisted_keys,
        },
      };
    }
    case 'keys': {
      const keys = state.namespaces.get(message.namespace) ?? [];
      return { state, reply: { total: keys.length, keys: keys.slice(message.offset, message.offset + message.limit) } };
    }
    case '$alarm':
      return { state };
  }
}
