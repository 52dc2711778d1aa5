import { describe, expect, it } from 'vitest';
import type { FlowAnswer } from '../../actors/flow-call.js';
import { emptyAllocation } from '../../actors/talent/allocation.js';
import { talentUserKey, type TreeCurrentReply, type TreeStateView } from '../../actors/talent/messages.js';
import { applyTreeAnswer, initialTalentUserState, type TalentUserState } from '../../actors/talent/user-state.js';
import { warrior, warriorInput } from './talent-fixtures.js';

/**
 * The user actor's side of the tree flow, pure: answers may arrive out of
 * order, so an answer older than the copy held (by the tree's revision) is
 * stale and never moves the allocation back to an older version.
 */
const key = talentUserKey('tenant', 'alice');
const v1 = warrior(1);
const v2 = warrior(2, { ...warriorInput, nodes: warriorInput.nodes.map((node) => (node.id === 'strength' ? { ...node, max_rank: 5 } : node)) }, { from_version: 1 });

function answer(reply: Partial<TreeCurrentReply>): FlowAnswer {
  return { op: 'flow-answer', flow_id: 'f', step: 'tree', ok: true, reply: { tree_id: 'warrior', version: 1, definition: null, carry_from: [], owner: 'owner', revision: 1, ...reply } };
}
const holding = (version: typeof v1, revision: number, ranks: Record<string, number>): TalentUserState => ({
  ...initialTalentUserState(),
  balances: { tp: 20, gold: 50 },
  trees: { warrior: { tree: version, revision, allocation: { ranks, points_spent: { tp: Object.values(ranks).reduce((a, b) => a + b, 0) } } } },
});
const allocateStrength = { op: 'allocate' as const, tree_id: 'warrior', node_id: 'strength' };

describe('talent user actor: tree answers', () => {
  it('a newer answer with another version migrates, then applies the request', () => {
    const applied = applyTreeAnswer(holding(v1, 1, { strength: 3 }), allocateStrength, answer({ version: 2, definition: v2, carry_from: [1], revision: 2 }), key);
    expect('reply' in applied.outcome && (applied.outcome.reply as TreeStateView).state).toMatchObject({ tree_version: 2, ranks: { strength: 4 } });
    expect(applied.state.trees.warrior.revision).toBe(2);
  });

  it('an answer older than the copy held is stale: the copy is used, the version never goes back', () => {
    const state = holding(v2, 5, { strength: 4 });
    const applied = applyTreeAnswer(state, allocateStrength, answer({ version: 1, definition: v1, revision: 3 }), key);
    expect('reply' in applied.outcome && (applied.outcome.reply as TreeStateView).state).toMatchObject({ tree_version: 2, ranks: { strength: 5 } });
    expect(applied.state.trees.warrior).toMatchObject({ revision: 5, tree: { version: 2 } });
  });

  it('the same version answered later records its revision', () => {
    const state = holding(v1, 1, { strength: 1 });
    const applied = applyTreeAnswer(state, { op: 'state', tree_id: 'warrior', viewer: { user_id: 'alice', admin: false } }, answer({ revision: 4 }), key);
    expect(applied.state.trees.warrior.revision).toBe(4);
    expect(applied.sends).toEqual([]);
  });

  it('an answer without a definition for a user holding no copy is a retryable conflict, with nothing changed', () => {
    const state = { ...initialTalentUserState(), balances: { tp: 3 } };
    const applied = applyTreeAnswer(state, allocateStrength, answer({ version: 1, definition: null, revision: 2 }), key);
    expect(applied.outcome).toMatchObject({ error: { code: 'conflict' } });
    expect(applied.state).toBe(state);
  });

  it('a refusal for a deleted tree refunds the allocation, unless it is older than the copy held', () => {
    const gone = (revision: number): FlowAnswer => ({ op: 'flow-answer', flow_id: 'f', step: 'tree', ok: false, error: { code: 'talent_tree_not_found', message: 'gone', details: { revision } } });
    const state = holding(v1, 4, { strength: 2 });
    const refunded = applyTreeAnswer(state, allocateStrength, gone(6), key);
    expect(refunded.state.trees).toEqual({});
    expect(refunded.state.balances.tp).toBe(22);
    expect(refunded.outcome).toEqual({ error: { code: 'talent_tree_not_found', message: 'gone' } });
    expect(refunded.sends).toHaveLength(1);
    const late = applyTreeAnswer(state, allocateStrength, gone(3), key);
    expect(late.state).toBe(state);
    expect(late.outcome).toMatchObject({ error: { code: 'talent_tree_not_found' } });
  });

  it('a read of an untouched tree stores nothing', () => {
    const state = initialTalentUserState();
    const applied = applyTreeAnswer(state, { op: 'state', tree_id: 'warrior', viewer: { user_id: 'alice', admin: false } }, answer({ definition: v1 }), key);
    expect(applied.state).toBe(state);
    expect('reply' in applied.outcome && (applied.outcome.reply as TreeStateView).state.ranks).toEqual(emptyAllocation().ranks);
  });
});
