import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { snapshotOf } from '../../actors/talent/allocation.js';
import {
  TALENT_ANALYTICS_KIND,
  TALENT_CURVE_KIND,
  TALENT_TREE_KIND,
  TALENT_USER_KIND,
  talentAnalyticsKey,
  talentCurveKey,
  talentTreeKey,
  talentUserKey,
  type AnalyticsView,
  type TreeInput,
} from '../../actors/talent/messages.js';
import type { TalentUserState } from '../../actors/talent/user-state.js';
import { World } from '../helpers/flow-world.js';
import { warriorInput } from './talent-fixtures.js';

/**
 * Property, over the real actors in the flow world: whatever mix of XP events,
 * allocations, respecs, new versions (with and without migration) and version
 * deletions runs, for every currency the points earned equal the balances plus
 * the points spent in the tree plus the respec fees paid, no balance is
 * negative, the points spent are the ranks times the costs of the version the
 * allocation is in, and the analytics (from the deltas) count exactly the
 * users' current allocations.
 */
const T = 'tenant';
const USERS = ['u1', 'u2'];
const variants: TreeInput[] = [
  warriorInput,
  { ...warriorInput, nodes: warriorInput.nodes.map((node) => (node.id === 'strength' ? { ...node, max_rank: 2 } : node)) },
  { ...warriorInput, nodes: warriorInput.nodes.filter((node) => node.id !== 'berserk') },
  { ...warriorInput, nodes: warriorInput.nodes.map((node) => (node.id === 'cleave' ? { ...node, cost_per_rank: [{ currency: 'gold', amount: 7 }] } : node)) },
];
const NODES = warriorInput.nodes.map((node) => node.id);

const op = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('xp' as const), user: fc.constantFrom(...USERS), amount: fc.integer({ min: 1, max: 400 }) }) },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('allocate' as const), user: fc.constantFrom(...USERS), node: fc.constantFrom(...NODES) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('respec' as const), user: fc.constantFrom(...USERS), nodes: fc.option(fc.subarray(NODES, { minLength: 1 }), { nil: null }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('put' as const), variant: fc.nat(variants.length - 1), migrate: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete-latest' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('read' as const), user: fc.constantFrom(...USERS) }) },
);

describe('talent invariants over random sequences (property)', () => {
  it('points balance, costs match ranks, analytics match allocations', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const world = new World();
        world.ask(TALENT_CURVE_KIND, talentCurveKey(T, 'c'), { op: 'create', by: 'owner', curve: { curve_id: 'c', kind: 'linear', max_level: 30, points_per_level: [{ currency: 'tp', amount: 2 }, { currency: 'gold', amount: 5 }], params: { base: 50 } } });
        world.ask(TALENT_TREE_KIND, talentTreeKey(T, 'warrior'), { op: 'create', by: 'owner', tree: warriorInput });
        let latest = 1;
        const versions = [1];
        for (const step of ops) {
          const user = 'user' in step ? talentUserKey(T, step.user) : '';
          if (step.kind === 'xp') world.ask(TALENT_USER_KIND, user, { op: 'xp', curve_id: 'c', amount: step.amount, event_id: null });
          else if (step.kind === 'allocate') world.ask(TALENT_USER_KIND, user, { op: 'allocate', tree_id: 'warrior', node_id: step.node });
          else if (step.kind === 'respec') world.ask(TALENT_USER_KIND, user, { op: 'respec', tree_id: 'warrior', node_ids: step.nodes });
          else if (step.kind === 'read') world.ask(TALENT_USER_KIND, user, { op: 'state', tree_id: 'warrior', viewer: { user_id: step.user, admin: false } });
          else if (step.kind === 'put') {
            const outcome = world.ask(TALENT_TREE_KIND, talentTreeKey(T, 'warrior'), { op: 'put', by: 'owner', tree: variants[step.variant], migration: step.migrate ? { from_version: latest } : null });
            if ('reply' in outcome) versions.push((latest = (outcome.reply as { tree: { version: number } }).tree.version));
          } else if (versions.length > 1) {
            world.ask(TALENT_TREE_KIND, talentTreeKey(T, 'warrior'), { op: 'delete_version', version: versions.pop()! });
            latest = versions[versions.length - 1];
          }
          world.drain();

          for (const name of USERS) {
            const state = world.state<TalentUserState>(TALENT_USER_KIND, talentUserKey(T, name));
            const entry = state.trees.warrior;
            for (const currency of ['tp', 'gold']) {
              const spent = entry?.allocation.points_spent[currency] ?? 0;
              expect(state.balances[currency] ?? 0).toBeGreaterThanOrEqual(0);
              expect(spent).toBeGreaterThanOrEqual(0);
              expect((state.balances[currency] ?? 0) + spent + (state.fees_paid[currency] ?? 0)).toBe(state.earned[currency] ?? 0);
              if (entry) {
                const expected = entry.tree.nodes.reduce((sum, node) => sum + (entry.allocation.ranks[node.id] ?? 0) * (node.cost_per_rank.find((cost) => cost.currency === currency)?.amount ?? 0), 0);
                expect(spent).toBe(expected);
              }
            }
          }
          // Analytics: per version, the sum of the users' current allocations in it.
          for (const version of new Set([...versions, 1, 2, 3, 4, 5, 6])) {
            const view = world.ask(TALENT_ANALYTICS_KIND, talentAnalyticsKey(T, 'warrior'), { op: 'read', version });
            const stats = (view as { reply: AnalyticsView }).reply;
            const ranks: Record<string, number> = {};
            let population = 0;
            for (const name of USERS) {
              const entry = world.state<TalentUserState>(TALENT_USER_KIND, talentUserKey(T, name)).trees.warrior;
              const snapshot = entry ? snapshotOf(entry.tree, entry.allocation) : null;
              if (!snapshot || snapshot.version !== version) continue;
              population += 1;
              for (const [node, rank] of Object.entries(snapshot.ranks)) ranks[node] = (ranks[node] ?? 0) + rank;
            }
            expect(stats.population).toBe(population);
            expect(stats.ranks).toEqual(ranks);
          }
        }
      }),
      { numRuns: 150 },
    );
  });
});
