import type { TreeInput, TreeVersion } from '../../actors/talent/messages.js';
import { normaliseTree } from '../../actors/talent/tree-definition.js';

/** The tree the talent unit tests share: three tiers with gates, a prerequisite chain, an exclusive group, costs in two currencies. */
const tp = (amount: number) => [{ currency: 'tp', amount }];
export const warriorInput: TreeInput = {
  tree_id: 'warrior',
  name: 'Warrior',
  point_currencies: ['tp', 'gold'],
  tiers: [{ tier: 1 }, { tier: 2, gate: { points_spent: 3, currency: 'tp' } }, { tier: 3, gate: { points_spent: 6 } }],
  exclusive_groups: [{ id: 'stance', max_selected: 1 }],
  nodes: [
    { id: 'strength', name: 'Strength', tier: 1, max_rank: 3, cost_per_rank: tp(1) },
    { id: 'toughness', name: 'Toughness', tier: 1, max_rank: 2, cost_per_rank: [{ currency: 'tp', amount: 1 }, { currency: 'gold', amount: 10 }] },
    { id: 'cleave', name: 'Cleave', tier: 2, max_rank: 2, cost_per_rank: tp(2), prerequisites: ['strength'] },
    { id: 'berserk', name: 'Berserk', tier: 2, cost_per_rank: tp(1), exclusive_group: 'stance' },
    { id: 'defender', name: 'Defender', tier: 2, cost_per_rank: tp(1), exclusive_group: 'stance' },
    { id: 'avatar', name: 'Avatar', tier: 3, cost_per_rank: tp(3), prerequisites: [{ node_id: 'cleave', rank: 2 }] },
  ],
  respec: { full: { cost: [{ currency: 'gold', amount: 5 }] }, partial: { cost_per_rank: tp(1) } },
};
export const warrior = (version = 1, input: TreeInput = warriorInput, migration: { from_version: number } | null = null): TreeVersion => normaliseTree(input, version, 'owner', 0, migration);

