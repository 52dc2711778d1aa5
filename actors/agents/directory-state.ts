import { ServiceError, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import {
  agentPolicy as policy,
  type AgentDirectoryMessage,
  type AgentListFilter,
  type AgentListQuery,
  type AgentListView,
  type AgentLookupView,
  type AgentSummaryEntry,
  type DirectoryCall,
} from './messages.js';

/**
 * A tenant's agents: pure domain logic of the `agent-directory` actor
 * (storage `records`, key = agentDirectoryKey(tenant), one record
 * `a:<agent_id>` per agent holding its summary).
 *
 * It owns the tenant's keys: an upsert claims its entry's key in the same
 * turn that checks nobody else holds it, so two agents never share a key,
 * whatever the race. It answers lists (q, filters, sort, page) and key
 * lookups from the summaries, without asking the agents. Upserts carry the
 * agent's version; an older one arriving late is ignored.
 */
export const ENTRY_PREFIX = 'a:';

export interface DirectoryState {
  entries: Map<string, AgentSummaryEntry>;
  /** key -> agent id. */
  keys: Map<string, string>;
}

type Result = TurnResult<DirectoryState, unknown>;

export function loadDirectory(_key: string, records: Iterable<[string, unknown]>): DirectoryState {
  const state: DirectoryState = { entries: new Map(), keys: new Map() };
  for (const [subkey, value] of records) {
    if (!subkey.startsWith(ENTRY_PREFIX)) continue;
    const entry = value as AgentSummaryEntry;
    state.entries.set(entry.agent_id, entry);
    state.keys.set(entry.key, entry.agent_id);
  }
  return state;
}

export function stepDirectory(state: DirectoryState, message: AgentDirectoryMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'upsert':
    case 'remove':
      return apply(state, message);
    case 'flow-call':
      return answerFlowCall(stepDirectory, state, message as never, context);
    case 'list':
      return { state, reply: list(state, message.query) };
    case 'lookup':
      return { state, reply: lookup(state, message.keys) };
    default:
      return { state };
  }
}

function apply(state: DirectoryState, call: DirectoryCall): Result {
  if (call.op === 'remove') {
    const entry = state.entries.get(call.agent_id);
    if (!entry || entry.version >= call.version) return { state, reply: { removed: false } };
    state.entries.delete(call.agent_id);
    if (state.keys.get(entry.key) === entry.agent_id) state.keys.delete(entry.key);
    return { state, reply: { removed: true }, writes: [{ subkey: ENTRY_PREFIX + call.agent_id, value: undefined }] };
  }
  const { entry } = call;
  const current = state.entries.get(entry.agent_id);
  if (current && current.version >= entry.version) return { state, reply: { applied: false } };
  const holder = state.keys.get(entry.key);
  if (holder !== undefined && holder !== entry.agent_id) {
    throw new ServiceError('agent_key_taken', `Another agent of this tenant has the key ${JSON.stringify(entry.key)}.`, {
      details: [{ field: 'body.key', message: 'is taken' }],
    });
  }
  if (!current && state.entries.size >= policy.agents_per_tenant_max) {
    throw new ServiceError('agent_limit_reached', `A tenant may have at most ${policy.agents_per_tenant_max} agents; delete one first.`);
  }
  if (current && current.key !== entry.key) state.keys.delete(current.key);
  state.entries.set(entry.agent_id, entry);
  state.keys.set(entry.key, entry.agent_id);
  const writes: RecordWrite[] = [{ subkey: ENTRY_PREFIX + entry.agent_id, value: entry }];
  return { state, reply: { applied: true }, writes };
}

function lookup(state: DirectoryState, keys: string[]): AgentLookupView {
  const found: AgentSummaryEntry[] = [];
  for (const key of keys) {
    const agent_id = state.keys.get(key);
    const entry = agent_id === undefined ? undefined : state.entries.get(agent_id);
    if (entry) found.push(entry);
  }
  return { found };
}

function badFilter(filter: AgentListFilter, message: string): ServiceError {
  const item = `${filter.field}:${filter.operator}:${filter.value}`;
  return new ServiceError('BAD_REQUEST', `filter ${JSON.stringify(item)}: ${message}`, { details: [{ field: 'querystring.filter', message }] });
}

function matches(entry: AgentSummaryEntry, filter: AgentListFilter): boolean {
  const { field, operator, value } = filter;
  const timestamp = field === 'created_at' || field === 'updated_at';
  const actual: string | number = timestamp ? Math.floor((field === 'created_at' ? entry.created_at_ms : entry.updated_at_ms) / 1000) : entry[field];
  const parse = (raw: string): string | number => {
    if (!timestamp) return raw;
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) throw badFilter(filter, `${field} takes epoch seconds`);
    return n;
  };
  switch (operator) {
    case 'in':
      return value.split('|').map(parse).includes(actual);
    case 'contains':
      if (timestamp) throw badFilter(filter, 'contains applies to text fields only');
      return String(actual).toLowerCase().includes(value.toLowerCase());
    case 'eq':
      return actual === parse(value);
    case 'ne':
      return actual !== parse(value);
    case 'lt':
      return actual < parse(value);
    case 'lte':
      return actual <= parse(value);
    case 'gt':
      return actual > parse(value);
    case 'gte':
      return actual >= parse(value);
  }
}

function list(state: DirectoryState, query: AgentListQuery): AgentListView {
  const q = query.q?.toLowerCase();
  const { viewer } = query;
  const matched = [...state.entries.values()].filter(
    (entry) =>
      (entry.visibility === 'organization' || viewer.admin || entry.owner_id === viewer.user_id) &&
      (query.visibility === undefined || entry.visibility === query.visibility) &&
      (query.status === undefined || entry.status === query.status) &&
      (!q || entry.display_name.toLowerCase().includes(q) || entry.description.toLowerCase().includes(q)) &&
      query.filters.every((filter) => matches(entry, filter)),
  );
  const sort_by = query.sort_by ?? 'created_at';
  const direction = query.sort_order === 'desc' ? -1 : 1;
  const keyOf = (entry: AgentSummaryEntry): string | number =>
    sort_by === 'display_name' ? entry.display_name.toLowerCase() : sort_by === 'key' ? entry.key : sort_by === 'updated_at' ? entry.updated_at_ms : entry.created_at_ms;
  matched.sort((a, b) => {
    const x = keyOf(a);
    const y = keyOf(b);
    if (x !== y) return (x < y ? -1 : 1) * direction;
    return a.agent_id < b.agent_id ? -direction : direction;
  });
  const start = (query.page - 1) * query.page_size;
  return { total: matched.length, agents: matched.slice(start, start + query.page_size) };
}
