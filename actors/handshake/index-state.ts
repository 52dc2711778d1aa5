import type { ActorSend, RecordWrite, TurnContext, TurnResult } from '../../runtime/index.js';
import { HANDSHAKE_SESSION_KIND, handshakePolicy, handshakeSessionKey, type IndexMessage, type ListQuery, type ListReply, type SessionMessage, type SessionView } from './messages.js';
import { isFinalSession } from './status-machine.js';

/**
 * A domain's sessions: pure logic of the `handshake-index` actor (storage
 * `records`, key = handshakeIndexKey(tenant, domain)), one record `s:<id>`
 * per session summary. Sessions send their summary through the outbox after
 * every change, so a list may lag a session by the outbox's delivery time.
 * The sweep asks every AGREED session whose deadline has passed to roll back
 * (each checks the deadline itself; the count is what the index saw).
 */
export const ENTRY_PREFIX = 's:';

export interface IndexState {
  entries: Map<string, SessionView>;
}

type Result = TurnResult<IndexState, unknown>;

export function loadIndex(_key: string, records: Iterable<[string, unknown]>): IndexState {
  const entries = new Map<string, SessionView>();
  for (const [subkey, value] of records) if (subkey.startsWith(ENTRY_PREFIX)) entries.set(subkey.slice(ENTRY_PREFIX.length), value as SessionView);
  return { entries };
}

export function stepIndex(state: IndexState, message: IndexMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'upsert':
      return upsert(state, message.entry);
    case 'list':
      return { state, reply: list(state, message.query) };
    case 'sweep':
      return sweep(state, context);
    default:
      return { state };
  }
}

function upsert(state: IndexState, entry: SessionView): Result {
  const known = state.entries.get(entry.session_id);
  // The outbox may deliver an older summary after a newer one: keep the newer.
  if (known && known.updated_at_ms > entry.updated_at_ms) return { state };
  const writes: RecordWrite[] = [];
  state.entries.delete(entry.session_id);
  state.entries.set(entry.session_id, entry);
  writes.push({ subkey: ENTRY_PREFIX + entry.session_id, value: entry });
  if (state.entries.size > handshakePolicy.index_sessions_max) {
    for (const [session_id, old] of state.entries) {
      if (state.entries.size <= handshakePolicy.index_sessions_max) break;
      if (!isFinalSession(old.status)) continue;
      state.entries.delete(session_id);
      writes.push({ subkey: ENTRY_PREFIX + session_id, value: undefined });
    }
  }
  return { state, writes };
}

const sortValue: Record<ListQuery['sort_by'], (entry: SessionView) => number> = {
  created_at: (entry) => entry.created_at_ms,
  updated_at: (entry) => entry.updated_at_ms,
  round: (entry) => entry.round,
};

export function list(state: IndexState, query: ListQuery): ListReply {
  const matching = [...state.entries.values()].filter(
    (entry) => (query.mine_of === null || entry.initiator.id === query.mine_of || entry.responder.id === query.mine_of) && (query.status === undefined || entry.status === query.status),
  );
  const value = sortValue[query.sort_by];
  const sign = query.sort_order === 'asc' ? 1 : -1;
  matching.sort((a, b) => sign * (value(a) - value(b)) || (a.session_id < b.session_id ? -1 : a.session_id > b.session_id ? 1 : 0));
  const start = (query.page - 1) * query.page_size;
  return { total: matching.length, sessions: matching.slice(start, start + query.page_size).map((entry) => ({ ...entry })) };
}

function sweep(state: IndexState, context: TurnContext): Result {
  const sends: ActorSend[] = [];
  for (const entry of state.entries.values()) {
    if (entry.status === 'AGREED' && entry.deadline_at_ms !== null && entry.deadline_at_ms <= context.now) {
      sends.push({ kind: HANDSHAKE_SESSION_KIND, key: handshakeSessionKey(entry.tenant, entry.domain, entry.session_id), message: { op: 'sweep' } satisfies SessionMessage });
    }
  }
  return { state, sends, reply: { cancelled: sends.length } };
}
