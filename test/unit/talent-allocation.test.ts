import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../runtime/index.js';
import { allocate, emptyAllocation, migrate, nodeStatuses, respec, type Allocation, type Balances } from '../../actors/talent/allocation.js';
import type { TreeVersion } from '../../actors/talent/messages.js';
import { treeIssues } from '../../actors/talent/tree-definition.js';
import { codeOf } from '../helpers/step.js';
import { warrior, warriorInput } from './talent-fixtures.js';

/**
 * Allocation rules, respec and migration, pure; and (property) whatever
 * sequence of allocations and respecs runs, points are never negative and,
 * per currency, balances + points spent + respec fees = points earned.
 */
const tp = (amount: number) => [{ currency: 'tp', amount }];

function run(tree: TreeVersion, balances: Balances, nodes: string[], allocation: Allocation = emptyAllocation()) {
  let state = { allocation, balances };
  for (const node of nodes) state = allocate(tree, state.allocation, state.balances, node);
  return state;
}
const ruleOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (error) {
    if (error instanceof ServiceError) return (error.details as { rule: string }).rule;
    throw error;
  }
  return undefined;
};

describe('talent allocation rules', () => {
  const tree = warrior();
  it('the fixture tree is valid', () => expect(treeIssues(tree)).toEqual([]));

  it('allocates ranks, paying cost_per_rank in every currency', () => {
    const { allocation, balances } = run(tree, { tp: 10, gold: 20 }, ['strength', 'toughness', 'strength']);
    expect(allocation).toEqual({ ranks: { strength: 2, toughness: 1 }, points_spent: { tp: 3, gold: 10 } });
    expect(balances).toEqual({ tp: 7, gold: 10 });
  });

  it('each rule refuses with its own code and names itself', () => {
    const rich = { tp: 100, gold: 100 };
    expect(codeOf(() => run(tree, rich, ['nowhere']))).toBe('talent_node_not_found');
    expect(codeOf(() => run(tree, rich, ['toughness', 'toughness', 'toughness']))).toBe('talent_max_rank');
    expect(ruleOf(() => run(tree, rich, ['toughness', 'toughness', 'toughness']))).toBe('max_rank');
    expect(codeOf(() => run(tree, rich, ['strength', 'cleave']))).toBe('talent_tier_locked');
    expect(ruleOf(() => run(tree, rich, ['strength', 'cleave']))).toBe('tier_gate');
    expect(codeOf(() => run(tree, rich, ['toughness', 'toughness', 'strength', 'berserk', 'defender']))).toBe('talent_exclusive_group');
    expect(ruleOf(() => run(tree, rich, ['toughness', 'toughness', 'strength', 'berserk', 'defender']))).toBe('exclusive_group');
    // Tier 3's gate counts every currency: toughness x2 spends 2 tp + 20 gold, so it opens, but avatar needs cleave at rank 2.
    expect(codeOf(() => run(tree, rich, ['toughness', 'toughness', 'avatar']))).toBe('talent_prerequisites_unmet');
    expect(ruleOf(() => run(tree, rich, ['toughness', 'toughness', 'avatar']))).toBe('prerequisites');
    expect(ruleOf(() => run(tree, rich, ['strength', 'strength', 'strength', 'avatar']))).toBe('tier_gate');
    expect(codeOf(() => run(tree, { tp: 1, gold: 0 }, ['toughness']))).toBe('talent_insufficient_points');
    expect(ruleOf(() => run(tree, { tp: 1, gold: 0 }, ['toughness']))).toBe('affordable');
  });

  it('the exclusive group reports which selection excludes a node, in the error and the status', () => {
    const state = run(tree, { tp: 100, gold: 100 }, ['strength', 'strength', 'strength', 'berserk']);
    try {
      allocate(tree, state.allocation, state.balances, 'defender');
      expect.unreachable();
    } catch (error) {
      expect((error as ServiceError).details).toMatchObject({ rule: 'exclusive_group', excluded_by: ['berserk'] });
    }
    const status = nodeStatuses(tree, state.allocation.ranks, state.balances);
    expect(status.find((node) => node.node_id === 'defender')).toMatchObject({ excluded_by: 'berserk', tier_locked: false, prerequisites_met: true, affordable: true });
    expect(status.find((node) => node.node_id === 'avatar')).toMatchObject({ tier_locked: true, prerequisites_met: false, current_rank: 0, max_rank: 1 });
    expect(status.find((node) => node.node_id === 'toughness')).toMatchObject({ affordable: true });
    expect(nodeStatuses(tree, state.allocation.ranks, { tp: 5, gold: 0 }).find((node) => node.node_id === 'toughness')!.affordable).toBe(false);
  });
});

describe('talent respec', () => {
  const tree = warrior();
  const start = run(tree, { tp: 10, gold: 20 }, ['strength', 'strength', 'strength', 'cleave', 'berserk']);

  it('full: refunds every point, then pays respec.full.cost', () => {
    const result = respec(tree, start.allocation, start.balances, null);
    expect(result.allocation).toEqual({ ranks: {}, points_spent: {} });
    expect(result.refunded).toEqual({ tp: 6 });
    expect(result.balances).toEqual({ tp: 10, gold: 15 });
  });

  it('partial: refunds the listed nodes, pays per rank removed, and refuses to strand a dependent node', () => {
    const result = respec(tree, start.allocation, start.balances, ['berserk']);
    expect(result.allocation.ranks).toEqual({ strength: 3, cleave: 1 });
    expect(result.balances).toEqual({ tp: 4 + 1 - 1, gold: 20 });
    expect(codeOf(() => respec(tree, start.allocation, start.balances, ['strength']))).toBe('talent_respec_invalid');
    expect(respec(tree, start.allocation, start.balances, ['strength', 'cleave', 'berserk']).allocation.ranks).toEqual({});
    expect(codeOf(() => respec(tree, start.allocation, start.balances, ['ghost']))).toBe('talent_node_not_found');
  });

  it('refuses a disabled kind and an unaffordable fee', () => {
    const locked = warrior(1, { ...warriorInput, respec: { full: { enabled: false }, partial: { cost_per_rank: [{ currency: 'gold', amount: 100 }] } } });
    const state = run(locked, { tp: 10, gold: 0 }, ['strength']);
    expect(codeOf(() => respec(locked, state.allocation, state.balances, null))).toBe('talent_respec_disabled');
    expect(codeOf(() => respec(locked, state.allocation, state.balances, ['strength']))).toBe('talent_insufficient_points');
  });
});

describe('talent migration', () => {
  const v1 = warrior(1);
  const start = run(v1, { tp: 10, gold: 20 }, ['strength', 'strength', 'strength', 'cleave', 'cleave', 'berserk']);

  it('carries ranks that still fit, refunds the rest', () => {
    // v2: strength max_rank 2 and dearer cleave; berserk removed.
    const v2 = warrior(2, {
      ...warriorInput,
      nodes: warriorInput.nodes
        .filter((node) => node.id !== 'berserk')
        .map((node) => (node.id === 'strength' ? { ...node, max_rank: 2 } : node.id === 'cleave' ? { ...node, cost_per_rank: tp(3) } : node)),
      tiers: [{ tier: 1 }, { tier: 2, gate: { points_spent: 2 } }, { tier: 3, gate: { points_spent: 6 } }],
    }, { from_version: 1 });
    const moved = migrate(v2, start.allocation, start.balances, true);
    expect(moved.allocation.ranks).toEqual({ strength: 2, cleave: 2 });
    expect(moved.allocation.points_spent).toEqual({ tp: 8 });
    expect(moved.balances).toEqual({ tp: 2, gold: 20 });
    expect(moved.dropped).toEqual({ strength: 1, berserk: 1 });
  });

  it('without a migration chain, everything is refunded', () => {
    const moved = migrate(warrior(2), start.allocation, start.balances, false);
    expect(moved.allocation).toEqual(emptyAllocation());
    expect(moved.balances).toEqual({ tp: 10, gold: 20 });
  });

  it('a node that no longer fits the balances stays refunded', () => {
    const dear = warrior(2, { ...warriorInput, nodes: warriorInput.nodes.map((node) => (node.id === 'cleave' ? { ...node, cost_per_rank: tp(50) } : node)) }, { from_version: 1 });
    const moved = migrate(dear, start.allocation, start.balances, true);
    expect(moved.allocation.ranks).toEqual({ strength: 3, berserk: 1 });
    expect(moved.balances.tp).toBe(6);
  });
});

describe('talent allocation invariants (property)', () => {
  const tree = warrior();
  const step = fc.oneof(
    { weight: 6, arbitrary: fc.record({ kind: fc.constant('allocate' as const), node: fc.constantFrom(...tree.nodes.map((node) => node.id), 'ghost') }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('earn' as const), tp: fc.nat(4), gold: fc.nat(15) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('respec' as const), nodes: fc.option(fc.subarray(tree.nodes.map((node) => node.id), { minLength: 1 }), { nil: null }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('migrate' as const), carry: fc.boolean() }) },
  );

  it('points are never negative and balances + spent + fees = earned, per currency', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        let allocation = emptyAllocation();
        let balances: Balances = { tp: 5, gold: 30 };
        const earned: Balances = { tp: 5, gold: 30 };
        const fees: Balances = {};
        for (const s of steps) {
          try {
            if (s.kind === 'allocate') ({ allocation, balances } = allocate(tree, allocation, balances, s.node));
            else if (s.kind === 'earn') {
              balances = { ...balances, tp: (balances.tp ?? 0) + s.tp, gold: (balances.gold ?? 0) + s.gold };
              earned.tp += s.tp;
              earned.gold += s.gold;
            } else if (s.kind === 'respec') {
              const result = respec(tree, allocation, balances, s.nodes);
              ({ allocation, balances } = result);
              for (const [currency, amount] of Object.entries(result.fee)) fees[currency] = (fees[currency] ?? 0) + amount;
            } else ({ allocation, balances } = migrate(tree, allocation, balances, s.carry));
          } catch (error) {
            if (!(error instanceof ServiceError)) throw error;
          }
          for (const currency of ['tp', 'gold']) {
            expect(balances[currency] ?? 0).toBeGreaterThanOrEqual(0);
            expect(allocation.points_spent[currency] ?? 0).toBeGreaterThanOrEqual(0);
            expect((balances[currency] ?? 0) + (allocation.points_spent[currency] ?? 0) + (fees[currency] ?? 0)).toBe(earned[currency]);
          }
          // Every allocated node keeps its rules.
          for (const node of tree.nodes) expect(allocation.ranks[node.id] ?? 0).toBeLessThanOrEqual(node.max_rank);
          const spent = tree.nodes.reduce((sum, node) => sum + (allocation.ranks[node.id] ?? 0) * (node.cost_per_rank.find((c) => c.currency === 'tp')?.amount ?? 0), 0);
          expect(spent).toBe(allocation.points_spent.tp ?? 0);
        }
      }),
      { numRuns: 300 },
    );
  });
});
