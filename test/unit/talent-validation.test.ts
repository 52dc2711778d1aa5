import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { TreeInput } from '../../actors/talent/messages.js';
import { normaliseTree, treeIssues } from '../../actors/talent/tree-definition.js';

/**
 * Tree validation, pure: every issue at once, and (properties) planted
 * prerequisite cycles are always found while acyclic trees built by the
 * same generator never report one.
 */
const check = (input: TreeInput, versions: number[] = []) => treeIssues(normaliseTree(input, 1, 'u', 0, null), versions);
const base = (nodes: TreeInput['nodes'], extra: Partial<TreeInput> = {}): TreeInput => ({
  tree_id: 't',
  name: 'T',
  point_currencies: ['tp'],
  tiers: [{ tier: 1 }, { tier: 2, gate: { points_spent: 2 } }],
  nodes,
  ...extra,
});
const n = (id: string, tier = 1, prerequisites: string[] = [], more: Partial<TreeInput['nodes'][number]> = {}) => ({ id, name: id, tier, prerequisites, cost_per_rank: [{ currency: 'tp', amount: 1 }], ...more });

describe('talent tree validation', () => {
  it('a sound tree has no issue', () => {
    expect(check(base([n('a'), n('b', 1, ['a']), n('c', 2, ['b'])]))).toEqual([]);
  });

  it('returns every issue at once: unknown references, duplicates, cycles, unreachable nodes, impossible gates', () => {
    const issues = check(
      base(
        [
          n('a', 1, ['ghost']),
          n('a'),
          n('x', 1, ['y']),
          n('y', 1, ['x']),
          n('z', 9),
          n('g', 1, [], { exclusive_group: 'nope', cost_per_rank: [{ currency: 'gems', amount: 1 }] }),
          n('h', 2),
        ],
        { tiers: [{ tier: 1 }, { tier: 2, gate: { points_spent: 1000 } }] },
      ),
    );
    const kinds = issues.map((issue) => issue.split(':')[0]);
    for (const kind of ['unknown_reference', 'duplicate', 'cycle', 'unreachable', 'impossible_gate']) expect(kinds, issues.join('\n')).toContain(kind);
    expect(issues).toContain('unknown_reference: node a requires node ghost, which is not defined');
    expect(issues).toContain('unknown_reference: node z is in tier 9, which is not defined');
    expect(issues).toContain('unknown_reference: node g names exclusive group nope, which is not defined');
    expect(issues).toContain('unknown_reference: node g costs currency gems, not one of point_currencies');
    expect(issues.some((issue) => issue.startsWith('cycle: x -> y -> x'))).toBe(true);
    expect(issues).toContain('unreachable: node h can never be allocated');
  });

  it('a gate on the lowest tier, a prerequisite in a higher tier or past max_rank, an unknown migration source', () => {
    const issues = treeIssues(
      normaliseTree(base([n('a', 1, ['b']), n('b', 2), n('c', 1, [], { prerequisites: [{ node_id: 'a', rank: 3 }] })], { tiers: [{ tier: 1, gate: { points_spent: 1 } }, { tier: 2 }] }), 2, 'u', 0, { from_version: 7 }),
      [1],
    );
    expect(issues.some((issue) => issue.startsWith('impossible_gate: tier 1'))).toBe(true);
    expect(issues.some((issue) => issue.startsWith('impossible_prerequisite: node a (tier 1) requires b'))).toBe(true);
    expect(issues.some((issue) => issue.startsWith('impossible_prerequisite: node c requires rank 3 of a'))).toBe(true);
    expect(issues.some((issue) => issue.startsWith('unknown_reference: migration.from_version 7'))).toBe(true);
  });

  /** A random DAG: node i may require only nodes j < i, all in one tier. */
  const dag = fc.integer({ min: 2, max: 30 }).chain((size) =>
    fc.tuple(fc.constant(size), fc.array(fc.array(fc.nat(size * 2), { maxLength: 3 }), { minLength: size, maxLength: size })),
  );
  const build = (size: number, picks: number[][]) =>
    Array.from({ length: size }, (_, i) => n(`n${i}`, 1, [...new Set(picks[i].filter((j) => j < i).map((j) => `n${j}`))]));

  it('property: acyclic trees report no cycle and no unreachable node', () => {
    fc.assert(
      fc.property(dag, ([size, picks]) => {
        const issues = check(base(build(size, picks), { tiers: [{ tier: 1 }] }));
        expect(issues).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

  it('property: a planted cycle is found, with every node on it unreachable', () => {
    fc.assert(
      fc.property(dag, fc.nat(), fc.nat(), ([size, picks], a, b) => {
        const nodes = build(size, picks);
        // Plant a cycle: from..to (to >= from) gets an edge back from `from` to `to` along an explicit chain.
        const from = a % size;
        const to = from + (b % (size - from));
        for (let i = from + 1; i <= to; i++) nodes[i].prerequisites = [...new Set([...(nodes[i].prerequisites as string[]), `n${i - 1}`])];
        nodes[from].prerequisites = [...new Set([...(nodes[from].prerequisites as string[]), `n${to}`])];
        const issues = check(base(nodes, { tiers: [{ tier: 1 }] }));
        const cycles = issues.filter((issue) => issue.startsWith('cycle: '));
        expect(cycles.length, issues.join('\n')).toBeGreaterThan(0);
        for (let i = from; i <= to; i++) expect(issues).toContain(`unreachable: node n${i} can never be allocated`);
        // Every reported cycle is a real one: each step is a prerequisite edge, and it closes.
        const edges = new Map(nodes.map((node) => [node.id, new Set(node.prerequisites as string[])]));
        for (const cycle of cycles) {
          const ids = cycle.slice('cycle: '.length).split(' -> ');
          expect(ids[0]).toBe(ids[ids.length - 1]);
          for (let i = 0; i + 1 < ids.length; i++) expect(edges.get(ids[i])!.has(ids[i + 1])).toBe(true);
        }
      }),
      { numRuns: 200 },
    );
  });
});
