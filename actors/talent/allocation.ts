import { ServiceError, type ErrorCode } from '../../runtime/index.js';
import type { AllocationSnapshot, Cost, NodeStatus, TreeNode, TreeVersion } from './messages.js';

/**
 * Allocation rules, pure: one user's ranks in one tree version against the
 * wallet's balances. Every function returns new objects; nothing is mutated.
 *
 * The rules of `allocate`, checked in this order, each refusing with its own
 * code and `details.rule`: max_rank (talent_max_rank), tier_gate
 * (talent_tier_locked: the points spent in lower tiers reach the tier's gate),
 * prerequisites (talent_prerequisites_unmet), exclusive_group
 * (talent_exclusive_group: the group's max_selected other nodes already have
 * ranks), affordable (talent_insufficient_points: the balances cover
 * cost_per_rank). Points spent are always ranks x cost_per_rank of the
 * version the allocation is in.
 */
export interface Allocation {
  ranks: Record<string, number>;
  points_spent: Record<string, number>;
}

export type Balances = Record<string, number>;

export const emptyAllocation = (): Allocation => ({ ranks: {}, points_spent: {} });

export function addCosts(into: Record<string, number>, costs: Cost[], times = 1): Record<string, number> {
  const result = { ...into };
  for (const cost of costs) {
    const next = (result[cost.currency] ?? 0) + cost.amount * times;
    if (next === 0) delete result[cost.currency];
    else result[cost.currency] = next;
  }
  return result;
}

export function covers(balances: Balances, costs: Cost[], times = 1): boolean {
  const needed = addCosts({}, costs, times);
  return Object.entries(needed).every(([currency, amount]) => (balances[currency] ?? 0) >= amount);
}

function nodeOf(tree: TreeVersion, node_id: string): TreeNode {
  const node = tree.nodes.find((candidate) => candidate.id === node_id);
  if (!node) throw new ServiceError('talent_node_not_found', `Tree ${tree.tree_id} version ${tree.version} has no node ${node_id}.`, { details: { node_id } });
  return node;
}

/** Points spent (ranks x cost) in the tiers below `tier`, in `currency` or (null) in every currency. */
export function spentBelowTier(tree: TreeVersion, ranks: Record<string, number>, tier: number, currency: string | null): number {
  let sum = 0;
  for (const node of tree.nodes) {
    const rank = ranks[node.id] ?? 0;
    if (rank === 0 || node.tier >= tier) continue;
    for (const cost of node.cost_per_rank) if (currency === null || cost.currency === currency) sum += cost.amount * rank;
  }
  return sum;
}

export function tierUnlocked(tree: TreeVersion, ranks: Record<string, number>, tier: number): boolean {
  const definition = tree.tiers.find((candidate) => candidate.tier === tier);
  if (!definition) return false;
  return spentBelowTier(tree, ranks, tier, definition.gate.currency) >= definition.gate.points_spent;
}

export function highestTierUnlocked(tree: TreeVersion, ranks: Record<string, number>): number {
  let highest = 0;
  for (const tier of tree.tiers) if (tierUnlocked(tree, ranks, tier.tier)) highest = Math.max(highest, tier.tier);
  return highest;
}

export function prerequisitesMet(node: TreeNode, ranks: Record<string, number>): boolean {
  return node.prerequisites.every((prerequisite) => (ranks[prerequisite.node_id] ?? 0) >= prerequisite.rank);
}

/** The other nodes of the node's exclusive group that already have ranks, when they fill max_selected; null when the node is free to take. */
export function excludedBy(tree: TreeVersion, node: TreeNode, ranks: Record<string, number>): string[] | null {
  if (node.exclusive_group === null || (ranks[node.id] ?? 0) > 0) return null;
  const group = tree.exclusive_groups.find((candidate) => candidate.id === node.exclusive_group);
  const selected = tree.nodes.filter((other) => other.exclusive_group === node.exclusive_group && other.id !== node.id && (ranks[other.id] ?? 0) > 0).map((other) => other.id);
  return selected.length >= (group?.max_selected ?? 1) ? selected.sort() : null;
}

/** Selections per exclusive group: group id -> selected node ids, sorted and joined with ','. */
export function exclusiveSelections(tree: TreeVersion, ranks: Record<string, number>): Record<string, string> {
  const selections: Record<string, string[]> = {};
  for (const node of tree.nodes) {
    if (node.exclusive_group === null || (ranks[node.id] ?? 0) === 0) continue;
    (selections[node.exclusive_group] ??= []).push(node.id);
  }
  return Object.fromEntries(Object.entries(selections).map(([group, ids]) => [group, ids.sort().join(',')]));
}

/** Adds one rank of `node_id`, or throws the rule it breaks. */
export function allocate(tree: TreeVersion, allocation: Allocation, balances: Balances, node_id: string): { allocation: Allocation; balances: Balances } {
  const node = nodeOf(tree, node_id);
  const rank = allocation.ranks[node.id] ?? 0;
  const refuse = (code: ErrorCode, rule: string, message: string, extra: Record<string, unknown> = {}): never => {
    throw new ServiceError(code, message, { details: { rule, node_id, ...extra } });
  };
  if (rank >= node.max_rank) refuse('talent_max_rank', 'max_rank', `Node ${node_id} is at its max_rank ${node.max_rank}.`, { max_rank: node.max_rank });
  if (!tierUnlocked(tree, allocation.ranks, node.tier)) {
    const tier = tree.tiers.find((candidate) => candidate.tier === node.tier)!;
    refuse('talent_tier_locked', 'tier_gate', `Tier ${node.tier} is locked: it needs ${tier.gate.points_spent} ${tier.gate.currency ?? 'points'} spent in lower tiers.`, {
      tier: node.tier,
      points_required: tier.gate.points_spent,
      points_spent: spentBelowTier(tree, allocation.ranks, node.tier, tier.gate.currency),
    });
  }
  if (!prerequisitesMet(node, allocation.ranks)) {
    const missing = node.prerequisites.filter((p) => (allocation.ranks[p.node_id] ?? 0) < p.rank);
    refuse('talent_prerequisites_unmet', 'prerequisites', `Node ${node_id} needs ${missing.map((p) => `${p.node_id} at rank ${p.rank}`).join(', ')}.`, { missing });
  }
  const excluded = excludedBy(tree, node, allocation.ranks);
  if (excluded) {
    refuse('talent_exclusive_group', 'exclusive_group', `Exclusive group ${node.exclusive_group} already has its selection: ${excluded.join(', ')}.`, {
      exclusive_group: node.exclusive_group,
      excluded_by: excluded,
    });
  }
  if (!covers(balances, node.cost_per_rank)) {
    refuse('talent_insufficient_points', 'affordable', `The wallet cannot pay rank ${rank + 1} of ${node_id}.`, { cost: node.cost_per_rank, balances });
  }
  return {
    allocation: { ranks: { ...allocation.ranks, [node.id]: rank + 1 }, points_spent: addCosts(allocation.points_spent, node.cost_per_rank) },
    balances: addCosts(balances, node.cost_per_rank, -1),
  };
}

/** The first rule a set of ranks breaks (a prerequisite or a tier gate of an allocated node), or null. */
export function brokenRule(tree: TreeVersion, ranks: Record<string, number>): { node_id: string; rule: string } | null {
  for (const node of tree.nodes) {
    if ((ranks[node.id] ?? 0) === 0) continue;
    if (!prerequisitesMet(node, ranks)) return { node_id: node.id, rule: 'prerequisites' };
    if (!tierUnlocked(tree, ranks, node.tier)) return { node_id: node.id, rule: 'tier_gate' };
  }
  return null;
}

/**
 * Respec: full (node_ids null) or of the listed nodes (all their ranks). The
 * points are refunded, then the fee is paid (respec.full.cost, or
 * respec.partial.cost_per_rank per rank removed). A partial respec that
 * would leave an allocated node without its prerequisites or its tier gate
 * is refused (talent_respec_invalid), as is a fee the refunded balances
 * cannot pay (talent_insufficient_points, rule respec_cost).
 */
export function respec(tree: TreeVersion, allocation: Allocation, balances: Balances, node_ids: string[] | null): { allocation: Allocation; balances: Balances; refunded: Record<string, number>; fee: Record<string, number> } {
  const partial = node_ids !== null;
  const rules = partial ? tree.respec.partial : tree.respec.full;
  if (!rules.enabled) throw new ServiceError('talent_respec_disabled', `This tree does not allow a ${partial ? 'partial' : 'full'} respec.`, { details: { rule: partial ? 'respec.partial' : 'respec.full' } });
  const removed = partial ? [...new Set(node_ids)].map((id) => nodeOf(tree, id)) : tree.nodes;
  const ranks = { ...allocation.ranks };
  let refunded: Record<string, number> = {};
  let ranksRemoved = 0;
  for (const node of removed) {
    const rank = ranks[node.id] ?? 0;
    if (rank === 0) continue;
    refunded = addCosts(refunded, node.cost_per_rank, rank);
    ranksRemoved += rank;
    delete ranks[node.id];
  }
  const broken = brokenRule(tree, ranks);
  if (broken) {
    throw new ServiceError('talent_respec_invalid', `Removing these nodes would leave ${broken.node_id} without its ${broken.rule === 'tier_gate' ? 'tier gate' : 'prerequisites'}; include it in node_ids.`, {
      details: broken,
    });
  }
  const fee = partial ? addCosts({}, tree.respec.partial.cost_per_rank, ranksRemoved) : ranksRemoved > 0 ? addCosts({}, tree.respec.full.cost) : {};
  const afterRefund = addCosts(balances, Object.entries(refunded).map(([currency, amount]) => ({ currency, amount })));
  const feeCosts = Object.entries(fee).map(([currency, amount]) => ({ currency, amount }));
  if (!covers(afterRefund, feeCosts)) {
    throw new ServiceError('talent_insufficient_points', 'The wallet cannot pay the respec cost, even with the refunded points.', { details: { rule: 'respec_cost', cost: feeCosts } });
  }
  const points_spent = addCosts(allocation.points_spent, Object.entries(refunded).map(([currency, amount]) => ({ currency, amount: -amount })));
  return { allocation: { ranks, points_spent }, balances: addCosts(afterRefund, feeCosts, -1), refunded, fee };
}

/**
 * Moves an allocation to another version: every point spent is refunded,
 * then, if the allocation carries over (its version is in the new version's
 * migration chain), its ranks are taken again under the new version's rules,
 * lowest tier first, as far as they fit (max_rank, gates, prerequisites,
 * exclusive groups, balances). What does not fit stays refunded.
 */
export function migrate(tree: TreeVersion, allocation: Allocation, balances: Balances, carry: boolean): { allocation: Allocation; balances: Balances; dropped: Record<string, number> } {
  let current = emptyAllocation();
  let wallet = addCosts(balances, Object.entries(allocation.points_spent).map(([currency, amount]) => ({ currency, amount })));
  const wanted = carry ? { ...allocation.ranks } : {};
  const order = [...tree.nodes].sort((a, b) => a.tier - b.tier);
  let progress = true;
  while (progress) {
    progress = false;
    for (const node of order) {
      while ((current.ranks[node.id] ?? 0) < Math.min(wanted[node.id] ?? 0, node.max_rank)) {
        try {
          ({ allocation: current, balances: wallet } = allocate(tree, current, wallet, node.id));
          progress = true;
        } catch (error) {
          if (error instanceof ServiceError) break;
          throw error;
        }
      }
    }
  }
  const dropped: Record<string, number> = {};
  for (const [node_id, rank] of Object.entries(allocation.ranks)) {
    const lost = rank - (current.ranks[node_id] ?? 0);
    if (lost > 0) dropped[node_id] = lost;
  }
  return { allocation: current, balances: wallet, dropped };
}

/** Per-node status for the state view. */
export function nodeStatuses(tree: TreeVersion, ranks: Record<string, number>, balances: Balances): NodeStatus[] {
  return tree.nodes.map((node) => {
    const excluded = excludedBy(tree, node, ranks);
    return {
      node_id: node.id,
      current_rank: ranks[node.id] ?? 0,
      max_rank: node.max_rank,
      affordable: covers(balances, node.cost_per_rank),
      prerequisites_met: prerequisitesMet(node, ranks),
      tier_locked: !tierUnlocked(tree, ranks, node.tier),
      excluded_by: excluded ? excluded.join(',') : null,
    };
  });
}

/** What analytics counts of an allocation: null when it has no ranks. */
export function snapshotOf(tree: TreeVersion, allocation: Allocation): AllocationSnapshot | null {
  const ranks = Object.fromEntries(Object.entries(allocation.ranks).filter(([, rank]) => rank > 0));
  if (Object.keys(ranks).length === 0) return null;
  const selections = tree.nodes
    .filter((node) => node.exclusive_group !== null && (ranks[node.id] ?? 0) > 0)
    .map((node) => ({ group: node.exclusive_group!, node_id: node.id }))
    .sort((a, b) => (a.group === b.group ? a.node_id.localeCompare(b.node_id) : a.group.localeCompare(b.group)));
  return { version: tree.version, ranks, selections };
}
