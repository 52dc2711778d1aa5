import { ServiceError, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { flowCall, relayAnswer } from '../flow-call.js';
import { API_KEY_KIND, USER_API_KEYS_KIND, type ApiKeyMessage, type IndexPage, type UserApiKeysMessage } from './messages.js';

/**
 * The per-user index of API keys (kind `user-api-keys`, key = user id): one
 * record per key, `{created_at_ms}`, so listing a user's keys costs one actor
 * and not a scan. `records` storage: adding or removing a key writes one
 * record.
 *
 * It coordinates creating and deleting the user's keys (flows, record
 * `f:<flow id>` while one is in flight): `create` checks the cap and reserves
 * the entry in one turn, then creates the key actor (a flow-call,
 * actors/flow-call.ts); a refusal from the key removes the entry again
 * (compensation). `delete` asks the key actor to delete itself (it checks the
 * owner) and removes the entry when its flow-answer says it did. Either way the asker gets its answer from the turn that
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

/** Records a flow (its record written with this turn), calls the key actor and defers the ask that started it. */
function started(state: UserApiKeysState, context: TurnContext, flow: KeyFlow, call: ApiKeyMessage, writes: RecordWrite[]): TurnResult<UserApiKeysState, unknown> {
  const flow_id = context.newId('akf_');
  flowsOf(state).set(flow_id, flow);
  return {
    state,
    writes: [...writes, { subkey: `f:${flow_id}`, value: flow }],
    sends: [flowCall(API_KEY_KIND, flow.api_key_id, call, { kind: USER_API_KEYS_KIND, key: context.key, flow_id, step: flow.op })],
    defer: true,
  };
}

export function stepUserApiKeys(
  state: UserApiKeysState,
  message: UserApiKeysMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<UserApiKeysState, unknown> {
  switch (message.op) {
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
      const create: ApiKeyMessage = { op: 'create', user_id: context.key, ...message.key };
      return started(state, context, { op: 'create', api_key_id: message.api_key_id, request_id: context.request_id }, create, writes);
    }

    case 'delete': {
      const flows = flowsOf(state);
      if (flows.size >= KEY_FLOWS_MAX) throw new ServiceError('server_busy', 'Too many API key changes in flight; try again.');
      return started(state, context, { op: 'delete', api_key_id: message.api_key_id, request_id: context.request_id }, { op: 'delete', user_id: context.key }, []);
    }

    case 'flow-answer': {
      const flows = flowsOf(state);
      const flow = flows.get(message.flow_id);
      if (!flow || message.step !== flow.op) return { state };
      flows.delete(message.flow_id);
      const writes: RecordWrite[] = [{ subkey: `f:${message.flow_id}`, value: undefined }];
      // The key refused a create (an id clash), or deleted itself: the entry goes.
      const entryGone = flow.op === 'delete' ? message.ok : !message.ok;
      if (entryGone && state.entries.delete(flow.api_key_id)) writes.push({ subkey: flow.api_key_id, value: undefined });
      if (flow.request_id === null) return { state, writes };
      return { state, writes, replies: [relayAnswer(flow.request_id, message)] };
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
