import type { FlowAnswer, FlowCall } from '../flow-call.js';

/**
 * The agents area's public surface (spec doc 2 §2 Agent, §4.7;
 * docs/api/agents.md): a registry of versioned agent definitions, one actor
 * per agent and one directory per tenant that owns the keys and answers
 * lists and key lookups. Other layers import this file only.
 */

/** One actor per agent (key = agent id): the current definition and its previous revisions. */
export const AGENT_KIND = 'agent';
/** One actor per tenant (key = agentDirectoryKey(tenant)): key -> agent id, and the summaries lists read. */
export const AGENT_DIRECTORY_KIND = 'agent-directory';

export function agentDirectoryKey(tenant: string): string {
  return JSON.stringify([tenant]);
}

/** Every bound of the area; docs/api/agents.md documents each (change both together). */
export const agentPolicy = {
  key_pattern: '^[a-z0-9][a-z0-9._-]{0,127}$',
  key_length_max: 128,
  display_name_length_max: 200,
  description_length_max: 2_000,
  profile_url_length_max: 2_048,
  /** prompt_text and each TOML payload, in characters. */
  text_length_max: 65_536,
  /** procedures, serialised. */
  procedures_bytes_max: 65_536,
  /** Previous definitions kept per agent (the newest); older ones are dropped. */
  revisions_kept_max: 50,
  /** Agents per tenant. */
  agents_per_tenant_max: 10_000,
  /** Keys per POST /agents/resolve. */
  resolve_keys_max: 100,
  page_size_max: 100,
} as const;

export const AGENT_STATUSES = ['active', 'disabled'] as const;
export type AgentStatus = (typeof AGENT_STATUSES)[number];
export const AGENT_VISIBILITIES = ['private', 'organization'] as const;
export type AgentVisibility = (typeof AGENT_VISIBILITIES)[number];

/** The TOML payloads an agent carries; each is parsed and refused when invalid. */
export const TOML_FIELDS = ['agent_toml', 'compaction_toml', 'intent_toml', 'memory_toml', 'rag_toml', 'shield_toml'] as const;
export type TomlField = (typeof TOML_FIELDS)[number];

/** The fields a client sets (create and PUT); the server owns the rest. */
export interface AgentFields {
  key: string;
  display_name: string;
  description: string;
  profile_url: string;
  status: AgentStatus;
  visibility: AgentVisibility;
  prompt_text: string;
  agent_toml: string;
  compaction_toml: string;
  intent_toml: string;
  memory_toml: string;
  rag_toml: string;
  shield_toml: string;
  procedures: unknown;
}

/** One definition as stored and answered (epoch-ms; the edge renders RFC 3339). */
export interface AgentView extends AgentFields {
  agent_id: string;
  tenant: string;
  /** The organization the agent belongs to (the credential's), or null for a personal agent. */
  org_id: string | null;
  owner_id: string;
  /** 1 at creation, +1 on every update. */
  version: number;
  created_at_ms: number;
  updated_at_ms: number;
  /** Who made this version. */
  updated_by: string;
}

/** What the directory keeps per agent: the AgentSummary fields, for lists and key lookups. */
export interface AgentSummaryEntry {
  agent_id: string;
  key: string;
  display_name: string;
  description: string;
  profile_url: string;
  status: AgentStatus;
  visibility: AgentVisibility;
  org_id: string | null;
  owner_id: string;
  created_at_ms: number;
  updated_at_ms: number;
  /** The agent's version: an older upsert arriving late is ignored. */
  version: number;
}

/** A previous definition, kept for audit. */
export interface AgentRevisionSummary {
  version: number;
  updated_at_ms: number;
  updated_by: string;
  key: string;
  status: AgentStatus;
}

/** Who asks: the owner rule is checked by the agent actor. */
export interface AgentCaller {
  user_id: string;
  tenant: string;
  admin: boolean;
}

export type AgentChanges = Partial<AgentFields>;

export type AgentMessage =
  | { op: 'create'; tenant: string; org_id: string | null; caller: AgentCaller; fields: AgentFields }
  /** The raw definition; the edge decides who may read it (canRead). */
  | { op: 'get' }
  | { op: 'update'; caller: AgentCaller; changes: AgentChanges }
  | { op: 'delete'; caller: AgentCaller }
  /** The audit trail: the owner and platform admins only. */
  | { op: 'revisions'; caller: AgentCaller }
  | { op: 'revision'; caller: AgentCaller; version: number }
  | FlowAnswer;

export type AgentReply = AgentView | { deleted: true } | { revisions: AgentRevisionSummary[]; current_version: number } | { revision: AgentView };

export interface AgentListQuery {
  /** The caller: private agents are listed to their owner (and platform admins) only. */
  viewer: { user_id: string; admin: boolean };
  q?: string;
  sort_by?: 'created_at' | 'display_name' | 'key' | 'updated_at';
  sort_order?: 'asc' | 'desc';
  visibility?: AgentVisibility;
  status?: AgentStatus;
  filters: AgentListFilter[];
  page: number;
  page_size: number;
}

export const AGENT_FILTER_FIELDS = ['key', 'display_name', 'status', 'visibility', 'owner_id', 'created_at', 'updated_at'] as const;
export const AGENT_FILTER_OPERATORS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'contains', 'in'] as const;
export interface AgentListFilter {
  field: (typeof AGENT_FILTER_FIELDS)[number];
  operator: (typeof AGENT_FILTER_OPERATORS)[number];
  value: string;
}

export type DirectoryCall =
  /** Claims the entry's key for its agent (409 agent_key_taken when another agent holds it) and stores the summary. */
  | { op: 'upsert'; entry: AgentSummaryEntry }
  | { op: 'remove'; agent_id: string; version: number };

export type AgentDirectoryMessage =
  | DirectoryCall
  | FlowCall<DirectoryCall>
  | { op: 'list'; query: AgentListQuery }
  | { op: 'lookup'; keys: string[] };

export interface AgentListView {
  total: number;
  agents: AgentSummaryEntry[];
}

/** key -> summary for the keys the directory holds (absent keys are left out). */
export interface AgentLookupView {
  found: AgentSummaryEntry[];
}

export { canRead, type ReadAccess } from './access.js';
export { checkToml, type TomlProblem } from './toml-payloads.js';
