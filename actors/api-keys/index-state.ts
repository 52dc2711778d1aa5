import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { API_KEY_KIND, type IndexPage, type UserApiKeysMessage } from './messages.js';

/**
 * The per-user index of API keys (kind `user-api-keys`, key = user id): one
 * record per key, `{created_at_ms}`, so listing a user's keys costs one actor
 * and not a scan. `records` storage: adding or removing a key writes one
 * record. The edge adds a key here BEFORE creating the key actor (so the cap
 * holds and a list right after create shows it); the key actor's delete turn
 * sends `remove` through the outbox (crash safe), and the edge also asks for
 * it directly so a list right after delete no longer shows the key. Both
 * operations are idempotent.
 */
export interface IndexEntry {
  api_key_id: string;
  created_at_ms: number;
}

export interface UserApiKeysState {
  entries: Map<string, IndexEntry>;
}

export function loadUserApiKeys(_key: string, records: Iterable<[string, unknown]>): UserApiKeysState {
  const entries = new Map<string, IndexEntry>();
  for (const [subkey, value] of records) {
    const entry = value as { created_at_ms: number };
    entries.set(subkey, { api_key_id: subkey, created_at_ms: entry.created_at_ms });
  }
  return { entries };
}

/** Newest first; ties by id, so pages are stable. */
function ordered(state: UserApiKeysState): IndexEntry[] {
  return [...state.entries.values()].sort(
    (a, b) => b.created_at_ms - a.created_at_ms || (a.api_key_id < b.api_key_id ? -1 : a.api_key_id > b.api_key_id ? 1 : 0),
  );
}

export function stepUserApiKeys(
  state: UserApiKeysState,
  message: UserApiKeysMessage | AlarmMessage,
  _context: TurnContext,
): TurnResult<UserApiKeysState, unknown> {
  switch (message.op) {
    case 'add': {
      if (state.entries.has(message.api_key_id)) return { state, reply: { added: false } };
      if (state.entries.size >= message.limit) {
        throw new ServiceError('api_key_limit_reached', `A user may hold at most ${message.limit} API keys; delete one first.`);
      }
      const entry = { api_key_id: message.api_key_id, created_at_ms: message.created_at_ms };
      state.entries.set(entry.api_key_id, entry);
      return { state, reply: { added: true }, writes: [{ subkey: entry.api_key_id, value: { created_at_ms: entry.created_at_ms } }] };
    }

    case 'remove': {
      if (!state.entries.delete(message.api_key_id)) return { state, reply: { removed: false } };
      return { state, reply: { removed: true }, writes: [{ subkey: message.api_key_id, value: undefined }] };
    }

    case 'list': {
      const all = ordered(state);
      const start = (message.page - 1) * message.page_size;
      const reply: IndexPage = { api_key_ids: all.slice(start, start + message.page_size).map((e) => e.api_key_id), total: all.length };
      return { state, reply };
    }

    case 'count':
      return { state, reply: { total: state.entries.size } };

    case '$alarm':
      return { state };

    default:
      throw new ServiceError('BAD_REQUEST', `Unknown user-api-keys operation ${(message as { op?: unknown }).op as string}.`);
  }
}
