import { describe, expect, it } from 'vitest';
import {
  TALENT_ANALYTICS_KIND,
  TALENT_CURVE_KIND,
  TALENT_TREE_INDEX_KIND,
  TALENT_TREE_KIND,
  TALENT_USER_KIND,
  talentAnalyticsKey,
  talentCurveKey,
  talentTreeIndexKey,
  talentTreeKey,
  talentLimits,
  talentUserKey,
  type AnalyticsView,
  type TreeInput,
  type TreeListReply,
  type TreeSummary,
  type TreeStateView,
  type WalletView,
  type XpResult,
} from '../../actors/talent/messages.js';
import { loadTalentUser } from '../../actors/talent/user-records.js';
import type { TalentUserState } from '../../actors/talent/user-state.js';
import { World, type Outcome } from '../helpers/flow-world.js';
import { warriorInput } from './talent-fixtures.js';

/**
 * The talent actors together, in the synchronous flow world: the user actor
 * fetches curves once and asks the tree for its current version on every
 * allocation (applying it in the answer's turn), migrates lazily, refunds a
 * deleted tree, checks who may read another user's state, and sends deltas
 * that keep analytics right.
 */
const T = 'tenant-1';
const reply = <R>(outcome: Outcome): R => {
  if ('error' in outcome) throw new Error(`${outcome.error.code}: ${outcome.error.message}`);
  return outcome.reply as R;
};
const errorOf = (outcome: Outcome) => ('error' in outcome ? outcome.error.code : 'ok');

/** The flow world, also keeping the user actors' record writes, as storage would. */
class RecordingWorld extends World {
  readonly records = new Map<string, Map<string, unknown>>();
  override turn(kind: string, key: string, message: unknown, request_id: string | null = null) {
    const result = super.turn(kind, key, message, request_id);
    if (kind === TALENT_USER_KIND) {
      const stored = this.records.get(key) ?? new Map<string, unknown>();
      for (const write of result.writes ?? []) {
        if (write.value === undefined) stored.delete(write.subkey);
        else stored.set(write.subkey, structuredClone(write.value));
      }
      this.records.set(key, stored);
    }
    return result;
  }
  /** The user's state as a reload from its records would see it. */
  reloaded(key: string): TalentUserState {
    return loadTalentUser(key, [...(this.records.get(key) ?? new Map()).entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
  }
}

function setup() {
  const world = new RecordingWorld();
  const userKey = (user: string) => talentUserKey(T, user);
  const ask = (user: string, message: unknown) => world.ask(TALENT_USER_KIND, userKey(user), message);
  const tree = (message: unknown) => world.ask(TALENT_TREE_KIND, talentTreeKey(T, 'warrior'), message);
  reply(world.ask(TALENT_CURVE_KIND, talentCurveKey(T, 'main'), { op: 'create', by: 'owner', curve: { curve_id: 'main', kind: 'linear', max_level: 50, points_per_level: [{ currency: 'tp', amount: 2 }, { currency: 'gold', amount: 10 }], params: { base: 100 } } }));
  reply(tree({ op: 'create', by: 'owner', tree: warriorInput }));
  const xp = (user: string, amount: number, event_id: string | null = null) => ask(user, { op: 'xp', curve_id: 'main', amount, event_id });
  const allocate = (user: string, node_id: string) => ask(user, { op: 'allocate', tree_id: 'warrior', node_id });
  const analytics = (version: number) => reply<AnalyticsView>(world.ask(TALENT_ANALYTICS_KIND, talentAnalyticsKey(T, 'warrior'), { op: 'read', version }));
  return { world, ask, tree, xp, allocate, analytics, userKey };
}

describe('talent flows', () => {
  it('XP: the curve is fetched once, level-ups credit the wallet, an event id answers its first result with idempotent: true', () => {
    const { world, xp, ask } = setup();
    const first = reply<XpResult>(xp('alice', 250, 'evt-1'));
    expect(first).toMatchObject({ old_level: 1, new_level: 3, granted: { tp: 4, gold: 20 }, idempotent: false });
    expect(reply<XpResult>(xp('alice', 250, 'evt-1'))).toEqual({ ...first, idempotent: true });
    expect(errorOf(xp('alice', 999, 'evt-1'))).toBe('idempotency_key_reused');
    reply(xp('alice', 1));
    expect(world.calls().filter((call) => call === `${TALENT_CURVE_KIND}:get`)).toHaveLength(1);
    expect(reply<WalletView>(ask('alice', { op: 'wallet' }))).toEqual({ user_id: 'alice', balances: { tp: 4, gold: 20 }, xp: [{ curve_id: 'main', current_level: 3, total_xp: 251 }] });
    expect(errorOf(ask('alice', { op: 'xp', curve_id: 'nope', amount: 5, event_id: null }))).toBe('talent_curve_not_found');
    // The records hold exactly the state: a reload sees the same wallet, curve copy and event ids.
    expect(world.reloaded(talentUserKey(T, 'alice'))).toEqual(world.state(TALENT_USER_KIND, talentUserKey(T, 'alice')));
  });

  it('allocate: every rule checked in the user actor against the tree version it was answered; nothing changes on a refusal', () => {
    const { world, xp, allocate, userKey } = setup();
    reply(xp('alice', 100 * 5));
    const before = world.state<TalentUserState>(TALENT_USER_KIND, userKey('alice'));
    expect(errorOf(allocate('alice', 'cleave'))).toBe('talent_tier_locked');
    expect(errorOf(allocate('alice', 'ghost'))).toBe('talent_node_not_found');
    const after = world.state<TalentUserState>(TALENT_USER_KIND, userKey('alice'));
    expect(after.balances).toEqual(before.balances);
    expect(after.trees).toEqual({});
    const state = reply<TreeStateView>(allocate('alice', 'strength'));
    expect(state.state).toMatchObject({ ranks: { strength: 1 }, points_spent: { tp: 1 }, tree_version: 1, user_id: 'alice' });
    expect(errorOf(world.ask(TALENT_USER_KIND, userKey('alice'), { op: 'allocate', tree_id: 'other', node_id: 'x' }))).toBe('talent_tree_not_found');
  });

  it('a new version reaches the user when next touched: carried over through migration, refunded without', () => {
    const { world, xp, allocate, tree, ask, analytics } = setup();
    reply(xp('alice', 3000));
    for (const node of ['strength', 'strength', 'strength', 'berserk']) reply(allocate('alice', node));
    // v2 drops berserk and carries v1's allocations over.
    const v2: TreeInput = { ...warriorInput, nodes: warriorInput.nodes.filter((node) => node.id !== 'berserk') };
    reply(tree({ op: 'put', by: 'owner', tree: v2, migration: { from_version: 1 } }));
    const wallet = () => reply<WalletView>(ask('alice', { op: 'wallet' })).balances;
    const tpBefore = wallet().tp;
    const state = reply<TreeStateView>(ask('alice', { op: 'state', tree_id: 'warrior', viewer: { user_id: 'alice', admin: false } }));
    expect(state.tree_version).toBe(2);
    expect(state.state.ranks).toEqual({ strength: 3 });
    expect(wallet().tp).toBe(tpBefore + 1);
    // v3 without migration: everything is refunded.
    reply(tree({ op: 'put', by: 'owner', tree: warriorInput, migration: null }));
    expect(reply<TreeStateView>(allocate('alice', 'toughness')).state.ranks).toEqual({ toughness: 1 });
    expect(wallet().tp).toBe(tpBefore + 1 + 3 - 1);
    // Analytics moved with the user: nothing left in v1 or v2, one user in v3.
    world.drain();
    expect(analytics(1).population).toBe(0);
    expect(analytics(2).population).toBe(0);
    expect(analytics(3)).toMatchObject({ population: 1, ranks: { toughness: 1 } });
    expect(world.reloaded(talentUserKey(T, 'alice'))).toEqual(world.state(TALENT_USER_KIND, talentUserKey(T, 'alice')));
  });

  it('deleting every version refunds the tree when the user is next touched; the list follows the index', () => {
    const { world, xp, allocate, tree, ask } = setup();
    reply(xp('alice', 500));
    reply(allocate('alice', 'strength'));
    const tp = reply<WalletView>(ask('alice', { op: 'wallet' })).balances.tp;
    const list = () => reply<TreeListReply>(world.ask(TALENT_TREE_INDEX_KIND, talentTreeIndexKey(T), { op: 'list', query: { q: null, sort_by: 'created_at', sort_order: 'desc', active_only: false, page: 1, page_size: 20 } }));
    expect(list().items).toEqual([{ tree_id: 'warrior', version: 1 }]);
    reply(tree({ op: 'delete_version', version: 1 }));
    expect(list().total).toBe(0);
    expect(errorOf(allocate('alice', 'strength'))).toBe('talent_tree_not_found');
    expect(reply<WalletView>(ask('alice', { op: 'wallet' })).balances.tp).toBe(tp + 1);
    const reloaded = world.reloaded(talentUserKey(T, 'alice'));
    expect(reloaded.trees).toEqual({});
    expect(reloaded).toEqual(world.state(TALENT_USER_KIND, talentUserKey(T, 'alice')));
  });

  it("the tenant's tree cap is held by the index: a create past it is refused and undone", () => {
    const { world } = setup();
    const index = world.state<Map<string, TreeSummary>>(TALENT_TREE_INDEX_KIND, talentTreeIndexKey(T));
    for (let i = index.size; i < talentLimits.trees_per_tenant_max; i++) {
      index.set(`filler-${i}`, { tree_id: `filler-${i}`, revision: 1, latest_version: 1, created_at_ms: 0, versions: [{ version: 1, name: 'f', description: '', created_at_ms: 0 }] });
    }
    const create = (tree_id: string) => world.ask(TALENT_TREE_KIND, talentTreeKey(T, tree_id), { op: 'create', by: 'owner', tree: { ...warriorInput, tree_id } });
    expect(errorOf(create('one-too-many'))).toBe('talent_tree_limit');
    expect(errorOf(world.ask(TALENT_TREE_KIND, talentTreeKey(T, 'one-too-many'), { op: 'get', version: null }))).toBe('talent_tree_not_found');
    // A tree whose versions are all deleted no longer counts.
    expect(errorOf(world.ask(TALENT_TREE_KIND, talentTreeKey(T, 'warrior'), { op: 'delete_version', version: 1 }))).toBe('ok');
    expect(errorOf(create('one-too-many'))).toBe('ok');
    expect(reply<{ tree: { version: number } }>(world.ask(TALENT_TREE_KIND, talentTreeKey(T, 'one-too-many'), { op: 'get', version: null })).tree.version).toBe(2);
  });

  it("another user's state: the user, the tree's owner and admins only", () => {
    const { ask } = setup();
    const read = (viewer: string, admin = false) => ask('alice', { op: 'state', tree_id: 'warrior', viewer: { user_id: viewer, admin } });
    expect(errorOf(read('mallory'))).toBe('forbidden');
    expect(errorOf(read('owner'))).toBe('ok');
    expect(errorOf(read('root', true))).toBe('ok');
    expect(errorOf(read('alice'))).toBe('ok');
  });

  it('analytics: archetypes and paths from the deltas, moved on respec', () => {
    const { xp, allocate, ask, analytics } = setup();
    const users = ['u1', 'u2', 'u3'];
    for (const user of users) reply(xp(user, 3000));
    for (const user of users) for (const node of ['strength', 'strength', 'strength']) reply(allocate(user, node));
    reply(allocate('u1', 'berserk'));
    reply(allocate('u2', 'berserk'));
    reply(allocate('u3', 'defender'));
    let stats = analytics(1);
    expect(stats.population).toBe(3);
    expect(stats.ranks).toEqual({ strength: 9, berserk: 2, defender: 1 });
    expect(stats.archetypes).toEqual([
      { signature: 'stance=berserk', population: 2, selections: [{ group: 'stance', node_id: 'berserk' }] },
      { signature: 'stance=defender', population: 1, selections: [{ group: 'stance', node_id: 'defender' }] },
    ]);
    reply(ask('u2', { op: 'respec', tree_id: 'warrior', node_ids: null }));
    stats = analytics(1);
    expect(stats.population).toBe(2);
    expect(stats.ranks).toEqual({ strength: 6, berserk: 1, defender: 1 });
  });
});
