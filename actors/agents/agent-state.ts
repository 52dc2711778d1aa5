import { ServiceError, type DeferredReply, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { flowCall, type FlowAnswer } from '../flow-call.js';
import { canRead } from './access.js';
import {
  AGENT_DIRECTORY_KIND,
  AGENT_KIND,
  agentDirectoryKey,
  agentPolicy as policy,
  type AgentCaller,
  type AgentChanges,
  type AgentFields,
  type AgentMessage,
  type AgentReply,
  type AgentRevisionSummary,
  type AgentSummaryEntry,
  type AgentView,
  type DirectoryCall,
} from './messages.js';

/**
 * One agent definition: pure domain logic of the `agent` actor (storage
 * `records`, key = agent id).
 *
 * Records: `def` the current definition, `r:<version>` each previous one
 * (the newest revisions_kept_max), `pending` a change waiting for the
 * tenant's directory.
 *
 * The directory owns the tenant's keys, so every change is two-phase: the
 * agent records the proposed definition as `pending`, asks the directory
 * (a flow-call of step `index`) to take its summary (claiming the key), and
 * applies the change only when the directory agrees; a refusal (the key is
 * taken, the tenant is full) drops it and the caller gets the refusal. The
 * reply waits for the answer, so a list or a resolve right after sees the
 * change. One change at a time: another arriving meanwhile gets 409
 * agent_change_in_progress (the wait is one outbox round trip).
 */
export const DEF_SUBKEY = 'def';
export const PENDING_SUBKEY = 'pending';
export const REVISION_PREFIX = 'r:';

export interface PendingChange {
  kind: 'create' | 'update' | 'delete';
  flow_id: string;
  /** The ask to answer; null when the change came by tell, or after a restart (the caller got 503 flow_interrupted). */
  request_id: string | null;
  /** The definition to apply (null for a delete). */
  proposed: AgentView | null;
}

export interface AgentState {
  readonly id: string;
  def: AgentView | null;
  pending: PendingChange | null;
  /** Previous definitions by version, oldest first. */
  revisions: Map<number, AgentView>;
}

type Result = TurnResult<AgentState, AgentReply | undefined>;

export function revisionSubkey(version: number): string {
  return REVISION_PREFIX + String(version).padStart(10, '0');
}

export function loadAgent(key: string, records: Iterable<[string, unknown]>): AgentState {
  const state: AgentState = { id: key, def: null, pending: null, revisions: new Map() };
  for (const [subkey, value] of records) {
    if (subkey === DEF_SUBKEY) state.def = value as AgentView;
    else if (subkey === PENDING_SUBKEY) state.pending = { ...(value as PendingChange), request_id: null };
    else if (subkey.startsWith(REVISION_PREFIX)) {
      const revision = value as AgentView;
      state.revisions.set(revision.version, revision);
    }
  }
  return state;
}

export function summaryOf(view: AgentView): AgentSummaryEntry {
  return {
    agent_id: view.agent_id,
    key: view.key,
    display_name: view.display_name,
    description: view.description,
    profile_url: view.profile_url,
    status: view.status,
    visibility: view.visibility,
    org_id: view.org_id,
    owner_id: view.owner_id,
    created_at_ms: view.created_at_ms,
    updated_at_ms: view.updated_at_ms,
    version: view.version,
  };
}

export function stepAgent(state: AgentState, message: AgentMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'create':
      return create(state, message, context);
    case 'get':
      return { state, reply: current(state) };
    case 'update':
      return update(state, message, context);
    case 'delete':
      return remove(state, message.caller, context);
    case 'revisions':
      requireWriter(current(state), message.caller);
      return { state, reply: revisions(state) };
    case 'revision':
      requireWriter(current(state), message.caller);
      return { state, reply: { revision: revision(state, message.version) } };
    case 'flow-answer':
      return directoryAnswered(state, message);
    default:
      return { state };
  }
}

function current(state: AgentState): AgentView {
  if (!state.def) throw new ServiceError('not_found', 'No such agent.');
  return state.def;
}

/** The owner and platform admins change an agent and read its audit trail; a reader who may see it gets 403, anyone else 404. */
function requireWriter(def: AgentView, caller: AgentCaller): void {
  if (caller.admin || def.owner_id === caller.user_id) return;
  if (canRead(def, caller).kind !== 'allowed') throw new ServiceError('not_found', 'No such agent.');
  throw new ServiceError('forbidden', "Only the agent's owner or a platform admin may change it.");
}

function requireIdle(state: AgentState): void {
  if (state.pending) throw new ServiceError('agent_change_in_progress', 'Another change to this agent is being applied; retry.');
}

/** Records the proposed change and asks the directory to take it; the reply waits for its answer. */
function propose(state: AgentState, pending: Omit<PendingChange, 'flow_id' | 'request_id'>, call: DirectoryCall, tenant: string, context: TurnContext): Result {
  const flow_id = context.newId('agf_');
  state.pending = { ...pending, flow_id, request_id: context.request_id };
  const { request_id: _unused, ...stored } = state.pending;
  return {
    state,
    writes: [{ subkey: PENDING_SUBKEY, value: stored }],
    sends: [flowCall(AGENT_DIRECTORY_KIND, agentDirectoryKey(tenant), call, { kind: AGENT_KIND, key: state.id, flow_id, step: 'index' })],
    defer: context.request_id !== null,
  };
}

function create(state: AgentState, message: Extract<AgentMessage, { op: 'create' }>, context: TurnContext): Result {
  if (state.def || state.pending) throw new ServiceError('conflict', 'An agent with this id exists.');
  const view: AgentView = {
    ...message.fields,
    agent_id: state.id,
    tenant: message.tenant,
    org_id: message.org_id,
    owner_id: message.caller.user_id,
    version: 1,
    created_at_ms: context.now,
    updated_at_ms: context.now,
    updated_by: message.caller.user_id,
  };
  return propose(state, { kind: 'create', proposed: view }, { op: 'upsert', entry: summaryOf(view) }, view.tenant, context);
}

/** The definition's own fields of a change: never its id, tenant, owner, version or times. */
const CHANGEABLE: ReadonlySet<string> = new Set([
  'key', 'display_name', 'description', 'profile_url', 'status', 'visibility', 'prompt_text',
  'agent_toml', 'compaction_toml', 'intent_toml', 'memory_toml', 'rag_toml', 'shield_toml', 'procedures',
] satisfies (keyof AgentFields)[]);

function changeableOf(changes: AgentChanges): AgentChanges {
  return Object.fromEntries(Object.entries(changes).filter(([name, value]) => value !== undefined && CHANGEABLE.has(name))) as AgentChanges;
}

function update(state: AgentState, message: Extract<AgentMessage, { op: 'update' }>, context: TurnContext): Result {
  const def = current(state);
  requireWriter(def, message.caller);
  requireIdle(state);
  const proposed: AgentView = {
    ...def,
    ...changeableOf(message.changes),
    version: def.version + 1,
    // Strictly later than the version it replaces, even within one millisecond.
    updated_at_ms: Math.max(context.now, def.updated_at_ms + 1),
    updated_by: message.caller.user_id,
  };
  return propose(state, { kind: 'update', proposed }, { op: 'upsert', entry: summaryOf(proposed) }, def.tenant, context);
}

function remove(state: AgentState, caller: AgentCaller, context: TurnContext): Result {
  const def = current(state);
  requireWriter(def, caller);
  requireIdle(state);
  return propose(state, { kind: 'delete', proposed: null }, { op: 'remove', agent_id: def.agent_id, version: def.version + 1 }, def.tenant, context);
}

function directoryAnswered(state: AgentState, answer: FlowAnswer): Result {
  const pending = state.pending;
  if (!pending || answer.flow_id !== pending.flow_id || answer.step !== 'index') return { state };
  state.pending = null;
  const writes: RecordWrite[] = [{ subkey: PENDING_SUBKEY, value: undefined }];
  const replies: DeferredReply[] = [];
  const answerWith = (reply: DeferredReply['reply']) => {
    if (pending.request_id) replies.push({ request_id: pending.request_id, reply });
  };
  if (!answer.ok) {
    if (pending.request_id) replies.push({ request_id: pending.request_id, error: answer.error });
    return { state, writes, replies };
  }
  switch (pending.kind) {
    case 'create':
      state.def = pending.proposed!;
      writes.push({ subkey: DEF_SUBKEY, value: state.def });
      answerWith(state.def);
      break;
    case 'update': {
      const previous = state.def!;
      state.revisions.set(previous.version, previous);
      writes.push({ subkey: revisionSubkey(previous.version), value: previous });
      while (state.revisions.size > policy.revisions_kept_max) {
        const oldest = state.revisions.keys().next().value as number;
        state.revisions.delete(oldest);
        writes.push({ subkey: revisionSubkey(oldest), value: undefined });
      }
      state.def = pending.proposed!;
      writes.push({ subkey: DEF_SUBKEY, value: state.def });
      answerWith(state.def);
      break;
    }
    case 'delete':
      writes.push({ subkey: DEF_SUBKEY, value: undefined });
      for (const version of state.revisions.keys()) writes.push({ subkey: revisionSubkey(version), value: undefined });
      state.def = null;
      state.revisions.clear();
      answerWith({ deleted: true });
      break;
  }
  return { state, writes, replies };
}

function revisions(state: AgentState): { revisions: AgentRevisionSummary[]; current_version: number } {
  const def = current(state);
  const list = [def, ...[...state.revisions.values()].reverse()].map((view) => ({
    version: view.version,
    updated_at_ms: view.updated_at_ms,
    updated_by: view.updated_by,
    key: view.key,
    status: view.status,
  }));
  return { revisions: list, current_version: def.version };
}

function revision(state: AgentState, version: number): AgentView {
  const def = current(state);
  if (version === def.version) return def;
  const found = state.revisions.get(version);
  if (!found) throw new ServiceError('not_found', `Agent ${def.agent_id} has no kept version ${version}.`);
  return found;
}
