import { ServiceError, type AlarmMessage, type DeferredReply, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { API_KEY_KIND, type ApiKeyMessage, type IndexPage, type UserApiKeysMessage } from './messages.js';

/**
 * The per-user index of API keys (kind `user-api-keys`, key = user id): one
 * record per key, `{created_at_ms}`, so listing a user's keys costs one actor
 * and not a scan. `records` storage: adding or removing a key writes one
 * record.
 *
 * It coordinates creating and deleting the user's keys (flows, record
 * `f:<flow id>` while one is in flight): `create` checks the cap and reserves
 * the entry in one turn, then creates the key actor through the outbox; a
 * refusal from the key removes the entry again (compensation). `delete` asks
 * the key actor to delete itself (it checks the owner) and removes the entry
 * when it answers. Either way the asker gets its answer from the turn that
 * ends the flow, so a list right after shows the change.
 */
export interface IndexEntry {
  api_key_id: string;
  created_at_ms: number;
}

/** A create or delete in flight: the ask that started it (null if told). */
export interface KeyFlow {
  op: 'create' | 'delete';
  api_key_id: string;
  request_id: string | null;
}

export interface UserApiKeysState {
  entries: Map<string, IndexEntry>;
  /** Flows in flight by flow id (absent in states built before flows). */
  flows?: Map<string, KeyFlow>;
}

/** Flows in flight per user; beyond, a new one is refused busy (each ends within one outbox round trip). */
export const KEY_FLOWS_MAX = 64;

export function loadUserApiKeys(_key: string, records: Iterable<[string, unknown]>): UserApiKeysState {
  const entries = new Map<string, IndexEntry>();
  const flows = new Map<string, KeyFlow>();
  for (const [subkey, value] of records) {
    if (subkey.startsWith('f:')) {
      flows.set(subkey.slice(2), value as KeyFlow);
      continue;
    }
    const entry = value as { created_at_ms: number };
    entries.set(subkey, { api_key_id: subkey, created_at_ms: entry.created_at_ms });
  }
  return { entries, flows };
}

/** Newest first; ties by id, so pages are stable. */
function ordered(state: UserApiKeysState): IndexEntry[] {
  return [...state.entries.values()].sort(
    (a, b) => b.created_at_ms - a.created_at_ms || (a.api_key_id < b.api_key_id ? -1 : a.api_key_id > b.api_key_id ? 1 : 0),
  );
}

function flowsOf(state: UserApiKeysState): Map<string, KeyFlow> {
  if (!state.flows) state.flows = new Map();
  return state.flows;
}

/** Records a flow (its record written with this turn) and defers the ask that started it. */
function started(state: UserApiKeysState, flow_id: string, flow: KeyFlow, writes: RecordWrite[]): TurnResult<UserApiKeysState, unknown> {
  flowsOf(state).set(flow_id, flow);
  return { state, writes: [...writes, { subkey: `f:${flow_id}`, value: flow }], defer: true };
}

export function stepUserApiKeys(
  state: UserApiKeysState,
  message: UserApiKeysMessage | AlarmMessage,
  context: TurnContext,
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

    case 'create': {
      const flows = flowsOf(state);
      if (flows.size >= KEY_FLOWS_MAX) throw new ServiceError('server_busy', 'Too many API key changes in flight; try again.');
      const writes: RecordWrite[] = [];
      // The cap is checked and the place taken in this one turn: no burst passes it.
      if (!state.entries.has(message.api_key_id)) {
        if (state.entries.size >= message.limit) {
          throw new ServiceError('api_key_limit_reached', `A user may hold at most ${message.limit} API keys; delete one first.`);
        }
        const entry = { api_key_id: message.api_key_id, created_at_ms: context.now };
        state.entries.set(entry.api_key_id, entry);
        writes.push({ subkey: entry.api_key_id, value: { created_at_ms: entry.created_at_ms } });
      }
      const flow_id = context.newId('akf_');
      const create: ApiKeyMessage = { op: 'create', user_id: context.key, flow_id, ...message.key };
      return { ...started(state, flow_id, { op: 'create', api_key_id: message.api_key_id, request_id: context.request_id }, writes), sends: [{ kind: API_KEY_KIND, key: message.api_key_id, message: create }] };
    }

    case 'delete': {
      const flows = flowsOf(state);
      if (flows.size >= KEY_FLOWS_MAX) throw new ServiceError('server_busy', 'Too many API key changes in flight; try again.');
      const flow_id = context.newId('akf_');
      const remove: ApiKeyMessage = { op: 'delete', user_id: context.key, flow_id };
      return { ...started(state, flow_id, { op: 'delete', api_key_id: message.api_key_id, request_id: context.request_id }, []), sends: [{ kind: API_KEY_KIND, key: message.api_key_id, message: remove }] };
    }

    case 'key-answer': {
      const flows = flowsOf(state);
      const flow = flows.get(message.flow_id);
      if (!flow) return { state };
      flows.delete(message.flow_id);
      const writes: RecordWrite[] = [{ subkey: `f:${message.flow_id}`, value: undefined }];
      // The key refused a create (an id clash), or deleted itself: the entry goes.
      const entryGone = flow.op === 'delete' ? message.error === undefined : message.error !== undefined;
      if (entryGone && state.entries.delete(flow.api_key_id)) writes.push({ subkey: flow.api_key_id, value: undefined });
      if (flow.request_id === null) return { state, writes };
      const reply: DeferredReply = message.error ? { request_id: flow.request_id, error: message.error } : { request_id: flow.request_id, reply: message.view };
      return { state, writes, replies: [reply] };
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
