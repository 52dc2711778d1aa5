import type { Cost, TreeInput, TreeNode, TreeVersion } from './messages.js';

/**
 * A tree definition, pure: defaults filled in (normaliseTree) and every
 * problem found at once (treeIssues), so `validate` can list them all and
 * create/PUT refuse a tree that has any. Each issue is a string starting with
 * its category: `duplicate`, `unknown_reference`, `cycle`, `unreachable`,
 * `impossible_gate`, `impossible_prerequisite`.
 */

export function normaliseTree(input: TreeInput, version: number, created_by: string, created_at_ms: number, migration: { from_version: number } | null): TreeVersion {
  return {
    tree_id: input.tree_id,
    version,
    name: input.name,
    description: input.description ?? '',
    point_currencies: [...input.point_currencies],
    tiers: input.tiers
      .map((tier) => ({ tier: tier.tier, gate: { points_spent: tier.gate?.points_spent ?? 0, currency: tier.gate?.currency ?? null } }))
      .sort((a, b) => a.tier - b.tier),
    nodes: input.nodes.map((node) => ({
      id: node.id,
      name: node.name,
      tier: node.tier,
      max_rank: node.max_rank ?? 1,
      cost_per_rank: node.cost_per_rank ?? [],
      prerequisites: (node.prerequisites ?? []).map((item) => (typeof item === 'string' ? { node_id: item, rank: 1 } : { node_id: item.node_id, rank: item.rank ?? 1 })),
      exclusive_group: node.exclusive_group ?? null,
      grants: node.grants ?? null,
    })),
    exclusive_groups: (input.exclusive_groups ?? []).map((group) => ({ id: group.id, label: group.label ?? group.id, max_selected: group.max_selected ?? 1 })),
    respec: {
      full: { enabled: input.respec?.full?.enabled ?? true, cost: input.respec?.full?.cost ?? [] },
      partial: { enabled: input.respec?.partial?.enabled ?? true, cost_per_rank: input.respec?.partial?.cost_per_rank ?? [] },
    },
    migration,
    created_at_ms,
    created_by,
  };
}

function duplicates(values: (string | number)[]): (string | number)[] {
  const seen = new Set<string | number>();
  const repeated = new Set<string | number>();
  for (const value of values) (seen.has(value) ? repeated : seen).add(value);
  return [...repeated];
}

/** Cycles of the prerequisite graph, each as the node ids along it (first repeated at the end), found once each. */
export function prerequisiteCycles(nodes: TreeNode[]): string[][] {
  const byId = new Map(nodes.map((node) => [node.id, node]));
  const state = new Map<string, 'visiting' | 'done'>();
  const cycles: string[][] = [];
  const path: string[] = [];
  // Iterative depth-first search (a deep chain must not overflow the stack).
  for (const start of nodes) {
    if (state.has(start.id)) continue;
    const stack: { id: string; next: number }[] = [{ id: start.id, next: 0 }];
    state.set(start.id, 'visiting');
    path.push(start.id);
    while (stack.length > 0) {
      const frame = stack[stack.length - 1];
      const prerequisites = byId.get(frame.id)!.prerequisites;
      if (frame.next < prerequisites.length) {
        const target = prerequisites[frame.next++].node_id;
        if (!byId.has(target)) continue;
        const seen = state.get(target);
        if (seen === 'visiting') cycles.push([...path.slice(path.indexOf(target)), target]);
        else if (seen === undefined) {
          state.set(target, 'visiting');
          path.push(target);
          stack.push({ id: target, next: 0 });
        }
        continue;
      }
      state.set(frame.id, 'done');
      path.pop();
      stack.pop();
    }
  }
  return cycles;
}

const costIn = (costs: Cost[], currency: string | null) =>
  costs.reduce((sum, cost) => (currency === null || cost.currency === currency ? sum + cost.amount : sum), 0);

/** Every problem of a normalised tree; empty when it is valid. `versions` are the tree's stored versions (for migration.from_version). */
export function treeIssues(tree: TreeVersion, versions: number[] = []): string[] {
  const issues: string[] = [];
  const nodeIds = new Set(tree.nodes.map((node) => node.id));
  const tierNumbers = new Set(tree.tiers.map((tier) => tier.tier));
  const groups = new Map(tree.exclusive_groups.map((group) => [group.id, group]));
  const currencies = new Set(tree.point_currencies);

  for (const id of duplicates(tree.nodes.map((node) => node.id))) issues.push(`duplicate: node id ${id}`);
  for (const tier of duplicates(tree.tiers.map((t) => t.tier))) issues.push(`duplicate: tier ${tier}`);
  for (const id of duplicates(tree.exclusive_groups.map((group) => group.id))) issues.push(`duplicate: exclusive group ${id}`);
  for (const currency of duplicates(tree.point_currencies)) issues.push(`duplicate: point currency ${currency}`);

  const checkCosts = (costs: Cost[], where: string) => {
    for (const cost of costs) if (!currencies.has(cost.currency)) issues.push(`unknown_reference: ${where} costs currency ${cost.currency}, not one of point_currencies`);
  };
  for (const tier of tree.tiers) {
    if (tier.gate.currency !== null && !currencies.has(tier.gate.currency)) issues.push(`unknown_reference: tier ${tier.tier} gate counts currency ${tier.gate.currency}, not one of point_currencies`);
  }
  checkCosts(tree.respec.full.cost, 'respec.full');
  checkCosts(tree.respec.partial.cost_per_rank, 'respec.partial');
  for (const node of tree.nodes) {
    if (!tierNumbers.has(node.tier)) issues.push(`unknown_reference: node ${node.id} is in tier ${node.tier}, which is not defined`);
    if (node.exclusive_group !== null && !groups.has(node.exclusive_group)) issues.push(`unknown_reference: node ${node.id} names exclusive group ${node.exclusive_group}, which is not defined`);
    checkCosts(node.cost_per_rank, `node ${node.id}`);
    for (const prerequisite of node.prerequisites) {
      const target = tree.nodes.find((other) => other.id === prerequisite.node_id);
      if (!target) {
        issues.push(`unknown_reference: node ${node.id} requires node ${prerequisite.node_id}, which is not defined`);
        continue;
      }
      if (prerequisite.node_id === node.id) continue; // reported as a cycle
      if (prerequisite.rank > target.max_rank) issues.push(`impossible_prerequisite: node ${node.id} requires rank ${prerequisite.rank} of ${target.id}, whose max_rank is ${target.max_rank}`);
      if (target.tier > node.tier) issues.push(`impossible_prerequisite: node ${node.id} (tier ${node.tier}) requires ${target.id} of the higher tier ${target.tier}`);
      if (target.exclusive_group !== null && target.exclusive_group === node.exclusive_group && (groups.get(target.exclusive_group)?.max_selected ?? 1) < 2) {
        issues.push(`impossible_prerequisite: node ${node.id} requires ${target.id} of its own exclusive group ${target.exclusive_group}, which allows one selection`);
      }
    }
  }
  for (const cycle of prerequisiteCycles(tree.nodes)) issues.push(`cycle: ${cycle.join(' -> ')}`);

  if (tree.migration !== null && !versions.includes(tree.migration.from_version)) {
    issues.push(`unknown_reference: migration.from_version ${tree.migration.from_version} is not a stored version of this tree`);
  }

  // Reachability: a node can be allocated when its tier exists and its gate can be met by the
  // reachable nodes of lower tiers, and every prerequisite is reachable to the rank required.
  const reachable = new Set<string>();
  const gateReachable = new Map<number, boolean>();
  const sortedTiers = [...tree.tiers].sort((a, b) => a.tier - b.tier);
  let changed = true;
  while (changed) {
    changed = false;
    for (const tier of sortedTiers) {
      const capacity = tree.nodes
        .filter((node) => node.tier < tier.tier && reachable.has(node.id))
        .reduce((sum, node) => sum + node.max_rank * costIn(node.cost_per_rank, tier.gate.currency), 0);
      gateReachable.set(tier.tier, tier.gate.points_spent <= capacity);
    }
    for (const node of tree.nodes) {
      if (reachable.has(node.id) || !tierNumbers.has(node.tier) || !gateReachable.get(node.tier)) continue;
      if (node.prerequisites.every((p) => p.node_id !== node.id && reachable.has(p.node_id))) {
        reachable.add(node.id);
        changed = true;
      }
    }
  }
  for (const tier of sortedTiers) {
    if (!gateReachable.get(tier.tier)) {
      issues.push(`impossible_gate: tier ${tier.tier} needs ${tier.gate.points_spent} ${tier.gate.currency ?? 'points'} spent in lower tiers, more than their reachable nodes can take`);
    }
  }
  for (const node of tree.nodes) if (!reachable.has(node.id)) issues.push(`unreachable: node ${node.id} can never be allocated`);
  return issues;
}
