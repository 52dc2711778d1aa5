import type { FlowAnswer, FlowCall } from '../flow-call.js';

/**
 * The talent area's public surface (spec doc 2 §2 Talent, §4.4; docs/api/talent.md):
 * the actor kinds, how their keys are built, the definitions they hold, the
 * messages they take and the views they answer with. Other layers import
 * this file only.
 *
 * Kinds:
 * - `talent-curve` (tenant, curve_id): one XP curve, immutable once created.
 * - `talent-tree` (tenant, tree_id): every version of one tree definition.
 * - `talent-tree-index` (tenant): the tenant's trees for the list, as records.
 * - `talent-user` (tenant, user_id): one user's wallet (balances, XP per
 *   curve, XP event ids) and allocations per tree, with the copy of each tree
 *   version and curve it checks them against.
 * - `talent-analytics` (tenant, tree_id): ranks per node and archetype
 *   populations, kept from the allocation deltas the user actors send.
 */
export const TALENT_CURVE_KIND = 'talent-curve';
export const TALENT_TREE_KIND = 'talent-tree';
export const TALENT_TREE_INDEX_KIND = 'talent-tree-index';
export const TALENT_USER_KIND = 'talent-user';
export const TALENT_ANALYTICS_KIND = 'talent-analytics';

export const talentCurveKey = (tenant: string, curve_id: string) => JSON.stringify([tenant, curve_id]);
export const talentTreeKey = (tenant: string, tree_id: string) => JSON.stringify([tenant, tree_id]);
export const talentTreeIndexKey = (tenant: string) => JSON.stringify([tenant]);
export const talentUserKey = (tenant: string, user_id: string) => JSON.stringify([tenant, user_id]);
export const talentAnalyticsKey = (tenant: string, tree_id: string) => JSON.stringify([tenant, tree_id]);

/** Bounds on what one definition may hold (docs/api/talent.md, "Limits"). */
export const talentLimits = {
  curve_max_level_max: 1000,
  tree_nodes_max: 200,
  tree_tiers_max: 50,
  tree_groups_max: 50,
  node_max_rank_max: 100,
  costs_per_list_max: 8,
  prerequisites_per_node_max: 16,
  point_currencies_max: 8,
  /** Trees with at least one stored version, per tenant. */
  trees_per_tenant_max: 1000,
  /** Stored versions of one tree; delete old ones to PUT more. */
  tree_versions_max: 50,
  /** XP event ids a user's wallet remembers (the oldest are forgotten first), and for how long. */
  xp_events_remembered_max: 1000,
  xp_event_retention_ms: 24 * 3600_000,
  /** Largest amount of one cost, one XP event, one table step. */
  amount_max: 1_000_000_000,
} as const;

export interface Cost {
  amount: number;
  currency: string;
}

export type CurveKind = 'linear' | 'exponential' | 'table';

export interface CurveParams {
  base?: number;
  per_level?: number;
  exponent?: number;
  table?: number[];
}

/** A curve as the client sends it. */
export interface CurveInput {
  curve_id: string;
  kind: CurveKind;
  max_level: number;
  points_per_level: Cost[];
  params?: CurveParams;
  bonus_levels?: { level: number; extra: Cost[] }[];
}

export interface Curve {
  curve_id: string;
  kind: CurveKind;
  max_level: number;
  points_per_level: Cost[];
  params: CurveParams;
  bonus_levels: { level: number; extra: Cost[] }[];
  created_at_ms: number;
  created_by: string;
}

/** `prerequisites` items: a node id (rank 1 needed) or {node_id, rank}. */
export type PrerequisiteInput = string | { node_id: string; rank?: number };

export interface NodeInput {
  id: string;
  name: string;
  tier: number;
  max_rank?: number;
  cost_per_rank?: Cost[];
  prerequisites?: PrerequisiteInput[];
  exclusive_group?: string | null;
  grants?: unknown;
}

export interface TierInput {
  tier: number;
  gate?: { points_spent?: number; currency?: string | null } | null;
}

export interface RespecInput {
  full?: { enabled?: boolean; cost?: Cost[] } | null;
  partial?: { enabled?: boolean; cost_per_rank?: Cost[] } | null;
}

/** A tree definition as the client sends it (create, PUT, validate). */
export interface TreeInput {
  tree_id: string;
  name: string;
  description?: string;
  point_currencies: string[];
  tiers: TierInput[];
  nodes: NodeInput[];
  exclusive_groups?: { id: string; label?: string; max_selected?: number }[];
  respec?: RespecInput;
}

export interface TreeNode {
  id: string;
  name: string;
  tier: number;
  max_rank: number;
  cost_per_rank: Cost[];
  prerequisites: { node_id: string; rank: number }[];
  exclusive_group: string | null;
  grants: unknown;
}

export interface Tier {
  tier: number;
  /** Points spent in the tiers below this one that unlock it; `currency` null counts every point currency. */
  gate: { points_spent: number; currency: string | null };
}

export interface RespecRules {
  full: { enabled: boolean; cost: Cost[] };
  partial: { enabled: boolean; cost_per_rank: Cost[] };
}

/** One stored version of a tree (defaults filled in). */
export interface TreeVersion {
  tree_id: string;
  version: number;
  name: string;
  description: string;
  point_currencies: string[];
  tiers: Tier[];
  nodes: TreeNode[];
  exclusive_groups: { id: string; label: string; max_selected: number }[];
  respec: RespecRules;
  migration: { from_version: number } | null;
  created_at_ms: number;
  created_by: string;
}

// --- curve actor ------------------------------------------------------------

export type CurveMessage = { op: 'create'; curve: CurveInput; by: string } | { op: 'get' } | FlowCall<{ op: 'get' }>;

// --- tree actor -------------------------------------------------------------

export type TreeMessage =
  | { op: 'create'; tree: TreeInput; by: string }
  | { op: 'put'; tree: TreeInput; by: string; migration: { from_version: number } | null }
  | { op: 'validate'; tree: TreeInput; migration: { from_version: number } | null }
  | { op: 'get'; version: number | null }
  | { op: 'delete_version'; version: number }
  | FlowCall<TreeCurrentCall>
  | FlowAnswer;

/** Asked by a user actor (as a flow call) before it changes or shows an allocation in this tree. */
export interface TreeCurrentCall {
  op: 'current';
  /** The version the user actor holds a copy of (-1: none): the answer carries the definition only if it differs. */
  have_version: number;
}

export interface TreeCurrentReply {
  tree_id: string;
  version: number;
  /** The latest version, or null when it is the one the asker holds. */
  definition: TreeVersion | null;
  /** Versions whose allocations carry over to the latest (its migration.from_version chain). */
  carry_from: number[];
  owner: string;
  /** The tree's change counter when it answered: an answer older than the copy the user holds is stale. */
  revision: number;
}

export interface TreeView {
  tree: TreeVersion;
  latest_version: number;
  created_at_ms: number;
  updated_at_ms: number;
}

export interface ValidateReply {
  issues: string[];
  valid: boolean;
}

// --- tree index -------------------------------------------------------------

export interface TreeSummary {
  tree_id: string;
  /** Increases with every change of the tree: an older upsert arriving late is ignored. */
  revision: number;
  latest_version: number;
  created_at_ms: number;
  versions: { version: number; name: string; description: string; created_at_ms: number }[];
}

export interface TreeListQuery {
  q: string | null;
  sort_by: 'created_at' | 'version' | 'name';
  sort_order: 'asc' | 'desc';
  active_only: boolean;
  page: number;
  page_size: number;
}

export type TreeIndexMessage = FlowCall<{ op: 'upsert'; summary: TreeSummary }> | { op: 'list'; query: TreeListQuery };

export interface TreeListReply {
  total: number;
  items: { tree_id: string; version: number }[];
}

// --- user actor -------------------------------------------------------------

export interface Viewer {
  user_id: string;
  admin: boolean;
}

export type TalentUserMessage =
  | { op: 'wallet' }
  | { op: 'xp'; curve_id: string; amount: number; event_id: string | null }
  | { op: 'allocate'; tree_id: string; node_id: string }
  | { op: 'respec'; tree_id: string; node_ids: string[] | null }
  | { op: 'state'; tree_id: string; viewer: Viewer }
  | FlowAnswer;

export interface WalletView {
  user_id: string;
  balances: Record<string, number>;
  xp: { curve_id: string; current_level: number; total_xp: number }[];
}

export interface XpResult {
  granted: Record<string, number>;
  idempotent: boolean;
  new_level: number;
  old_level: number;
  curve_id: string;
  total_xp: number;
  event_id: string | null;
}

export interface AllocationStateView {
  exclusive_selections: Record<string, string>;
  highest_tier_unlocked: number;
  points_spent: Record<string, number>;
  ranks: Record<string, number>;
  tree_id: string;
  tree_version: number;
  user_id: string;
}

export interface NodeStatus {
  node_id: string;
  current_rank: number;
  max_rank: number;
  affordable: boolean;
  prerequisites_met: boolean;
  tier_locked: boolean;
  excluded_by: string | null;
}

export interface TreeStateView {
  nodes: NodeStatus[];
  state: AllocationStateView;
  tree_id: string;
  tree_version: number;
}

// --- analytics --------------------------------------------------------------

/** One user's allocation in one tree version, as analytics counts it. */
export interface AllocationSnapshot {
  version: number;
  ranks: Record<string, number>;
  selections: { group: string; node_id: string }[];
}

export type AnalyticsMessage =
  | { op: 'delta'; user_id: string; from: AllocationSnapshot | null; to: AllocationSnapshot | null }
  | { op: 'read'; version: number };

export interface AnalyticsView {
  version: number;
  population: number;
  ranks: Record<string, number>;
  archetypes: { signature: string; population: number; selections: { group: string; node_id: string }[] }[];
}
