import type { AlarmMessage, TurnContext, TurnResult } from '../../runtime/index.js';
import type { PresenceDirectoryMessage, PresenceDirectoryView } from './messages.js';

/**
 * A tenant's presence directory (`presence-directory`, storage `records`): one record per
 * context id, so administrators can list contexts without a scan of storage. Adding is
 * idempotent (a repeated or late `add` changes nothing); contexts are never deleted, so
 * neither are their entries. In memory: the ids in sorted order, rebuilt at load.
 */
export interface PresenceDirectoryState {
  context_ids: string[];
}

const CONTEXT_PREFIX = 'c:';

export function loadPresenceDirectory(_key: string, records: Iterable<[string, unknown]>): PresenceDirectoryState {
  const context_ids: string[] = [];
  for (const [subkey] of records) if (subkey.startsWith(CONTEXT_PREFIX)) context_ids.push(subkey.slice(CONTEXT_PREFIX.length));
  context_ids.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return { context_ids };
}

/** Where `id` is, or would go, in the sorted ids. */
function positionOf(ids: string[], id: string): number {
  let low = 0;
  let high = ids.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (ids[middle]! < id) low = middle + 1;
    else high = middle;
  }
  return low;
}

export function stepPresenceDirectory(
  state: PresenceDirectoryState,
  message: PresenceDirectoryMessage | AlarmMessage,
  _context: TurnContext,
): TurnResult<PresenceDirectoryState, PresenceDirectoryView | undefined> {
  switch (message.op) {
    case 'add': {
      const at = positionOf(state.context_ids, message.context_id);
      if (state.context_ids[at] === message.context_id) return { state };
      state.context_ids.splice(at, 0, message.context_id);
      return { state, writes: [{ subkey: CONTEXT_PREFIX + message.context_id, value: 1 }] };
    }
    case 'list':
      return { state, reply: { total: state.context_ids.length, context_ids: state.context_ids.slice(message.offset, message.offset + message.limit) } };
    case '$alarm':
      return { state };
  }
}
