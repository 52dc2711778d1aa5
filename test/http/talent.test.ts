import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode, type TestResponse, expectError } from '../helpers/node.js';

/** Talent trees over the real socket (spec doc 2 §4.4; docs/api/talent.md): every endpoint and its errors. */
let t: TestNode;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;
let adminToken: string;
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
const base = '/api/v1/talent';

beforeAll(async () => {
  t = await startTestNode({ config: { adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  alice = await t.newUser('talent');
  bob = await t.newUser('talent');
  adminToken = (await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } })).body.access_token;
});
afterAll(async () => {
  await t?.destroy();
});

function expectOk(res: TestResponse, status = 200) {
  expect(res.status, res.text).toBe(status);
  return res.body;
}
/** Waits (bounded) for analytics, which follow allocations through the outbox. */
async function until<T>(check: () => Promise<T | false>, what: string): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const value = await check();
    if (value) return value;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const tp = (amount: number) => [{ currency: 'tp', amount }];
let treeCounter = 0;
const warrior = (tree_id = `warrior-${++treeCounter}`) => ({
  tree_id,
  name: `Warrior ${tree_id}`,
  description: 'Melee specialisations',
  point_currencies: ['tp', 'gold'],
  tiers: [{ tier: 1 }, { tier: 2, gate: { points_spent: 3, currency: 'tp' } }],
  exclusive_groups: [{ id: 'stance', label: 'Stance', max_selected: 1 }],
  nodes: [
    { id: 'strength', name: 'Strength', tier: 1, max_rank: 3, cost_per_rank: tp(1) },
    { id: 'toughness', name: 'Toughness', tier: 1, max_rank: 2, cost_per_rank: [{ currency: 'tp', amount: 1 }, { currency: 'gold', amount: 10 }] },
    { id: 'cleave', name: 'Cleave', tier: 2, cost_per_rank: tp(2), prerequisites: ['strength', { node_id: 'toughness', rank: 1 }] },
    { id: 'berserk', name: 'Berserk', tier: 2, cost_per_rank: tp(1), exclusive_group: 'stance', grants: { damage_pct: 10 } },
    { id: 'defender', name: 'Defender', tier: 2, cost_per_rank: tp(1), exclusive_group: 'stance' },
  ],
  respec: { full: { cost: [{ currency: 'gold', amount: 5 }] }, partial: { cost_per_rank: tp(1) } },
});
const curve = (curve_id: string) => ({
  curve_id,
  kind: 'linear',
  max_level: 20,
  points_per_level: [{ currency: 'tp', amount: 2 }, { currency: 'gold', amount: 10 }],
  params: { base: 100, per_level: 0 },
  bonus_levels: [{ level: 5, extra: tp(3) }],
});
async function createTree(token: string, body = warrior()) {
  return expectOk(await t.request('POST', `${base}/definitions`, { token, body }), 201);
}
async function grantXp(token: string, curve_id: string, amount: number, headers: Record<string, string> = {}) {
  return t.request('POST', `${base}/xp/events`, { token, body: { curve_id, amount }, headers });
}
const wallet = async (token: string) => expectOk(await t.request('GET', `${base}/me/wallet`, { token }));
const allocate = (token: string, tree_id: string, node_id: string) => t.request('POST', `${base}/${tree_id}/allocate`, { token, body: { node_id } });

describe('talent curves', () => {
  it('creates, reads, refuses a duplicate, an invalid curve and a negative amount; another tenant sees nothing', async () => {
    const created = expectOk(await t.request('POST', `${base}/curves`, { token: alice.token, body: curve('main') }), 201);
    expect(created).toMatchObject({ curve_id: 'main', kind: 'linear', max_level: 20, created_by: alice.user_id, bonus_levels: [{ level: 5, extra: tp(3) }] });
    expect(expectOk(await t.request('GET', `${base}/curves/main`, { token: alice.token }))).toEqual(created);
    expectError(await t.request('POST', `${base}/curves`, { token: alice.token, body: curve('main') }), 409, 'talent_curve_exists');
    expectError(await t.request('POST', `${base}/curves`, { token: alice.token, body: { ...curve('bad'), params: {} } }), 400, 'talent_curve_invalid');
    expectError(await t.request('POST', `${base}/curves`, { token: alice.token, body: { ...curve('neg'), points_per_level: tp(-1) } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', `${base}/curves`, { token: alice.token, body: { ...curve('k'), kind: 'cubic' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('GET', `${base}/curves/main`, { token: bob.token }), 404, 'talent_curve_not_found');
    expectError(await t.request('GET', `${base}/curves/bad`, { token: alice.token }), 404, 'talent_curve_not_found');
    expectError(await t.request('GET', `${base}/curves/main`), 401, 'unauthorized');
    const exponential = { curve_id: 'exp', kind: 'exponential', max_level: 10, points_per_level: tp(1), params: { base: 10, exponent: 2 } };
    expect(expectOk(await t.request('POST', `${base}/curves`, { token: alice.token, body: exponential }), 201).params).toEqual({ base: 10, exponent: 2 });
  });
});

describe('talent definitions', () => {
  it('create (version 1, active), get, duplicate 409, reserved id 400, another tenant 404', async () => {
    const body = warrior();
    const created = await createTree(alice.token, body);
    expect(created).toMatchObject({ tree_id: body.tree_id, version: 1, active: true, definition_id: `${body.tree_id}:v1`, created_by: alice.user_id, migration: null });
    expect(created.nodes[2].prerequisites).toEqual([{ node_id: 'strength', rank: 1 }, { node_id: 'toughness', rank: 1 }]);
    expect(created.nodes[3].grants).toEqual({ damage_pct: 10 });
    expect(created.tiers[0]).toEqual({ tier: 1, gate: { points_spent: 0, currency: null } });
    expect(expectOk(await t.request('GET', `${base}/definitions/${body.tree_id}`, { token: alice.token }))).toEqual(created);
    expectError(await t.request('POST', `${base}/definitions`, { token: alice.token, body }), 409, 'talent_tree_exists');
    expectError(await t.request('POST', `${base}/definitions`, { token: alice.token, body: warrior('me') }), 400, 'BAD_REQUEST');
    // Names of Object.prototype's members are no ids: as a tree id they once read an inherited function (500).
    for (const id of ['constructor', 'toString', 'valueOf']) {
      expectError(await t.request('POST', `${base}/definitions`, { token: alice.token, body: warrior(id) }), 400, 'BAD_REQUEST');
      expectError(await t.request('GET', `${base}/${id}/state`, { token: alice.token }), 400, 'BAD_REQUEST');
      expectError(await t.request('POST', `${base}/${id}/allocate`, { token: alice.token, body: { node_id: 'strength' } }), 400, 'BAD_REQUEST');
    }
    expectError(await t.request('GET', `${base}/definitions/${body.tree_id}`, { token: bob.token }), 404, 'talent_tree_not_found');
    expectError(await t.request('GET', `${base}/definitions/${body.tree_id}?version=9`, { token: alice.token }), 404, 'talent_version_not_found');
  });

  it('validate lists every issue and stores nothing; create refuses the same definition with them', async () => {
    const body = warrior();
    body.nodes.push(
      { id: 'loop-a', name: 'A', tier: 1, cost_per_rank: tp(1), prerequisites: ['loop-b'] } as never,
      { id: 'loop-b', name: 'B', tier: 1, cost_per_rank: tp(1), prerequisites: ['loop-a'] } as never,
      { id: 'lost', name: 'Lost', tier: 7, cost_per_rank: [{ currency: 'gems', amount: 1 }] } as never,
    );
    body.tiers.push({ tier: 3, gate: { points_spent: 999, currency: 'tp' } });
    const validated = expectOk(await t.request('POST', `${base}/definitions/validate`, { token: alice.token, body }));
    expect(validated.valid).toBe(false);
    const kinds = new Set((validated.issues as string[]).map((issue) => issue.split(':')[0]));
    expect([...kinds].sort()).toEqual(['cycle', 'impossible_gate', 'unknown_reference', 'unreachable']);
    expectError(await t.request('GET', `${base}/definitions/${body.tree_id}`, { token: alice.token }), 404, 'talent_tree_not_found');
    const refused = await t.request('POST', `${base}/definitions`, { token: alice.token, body });
    expectError(refused, 400, 'talent_definition_invalid');
    expect(refused.body.details.issues).toEqual(validated.issues);
    expect(expectOk(await t.request('POST', `${base}/definitions/validate`, { token: alice.token, body: warrior() }))).toEqual({ issues: [], valid: true });
    expectError(await t.request('POST', `${base}/definitions/validate`, { token: alice.token, body: { ...warrior(), nodes: [{ id: 'x', name: 'X', tier: 1, cost_per_rank: tp(-5) }] } }), 400, 'BAD_REQUEST');
  });

  it('PUT makes a new version; the list shows versions with q, sort, active_only and pages; a version can be deleted', async () => {
    const body = { ...warrior(), name: 'Paladin holy' };
    await createTree(bob.token, body);
    const v2 = expectOk(await t.request('PUT', `${base}/definitions/${body.tree_id}`, { token: bob.token, body: { ...body, description: 'v2', migration: { from_version: 1 } } }));
    expect(v2).toMatchObject({ version: 2, active: true, migration: { from_version: 1 }, description: 'v2' });
    expect(expectOk(await t.request('GET', `${base}/definitions/${body.tree_id}?version=1`, { token: bob.token })).active).toBe(false);
    expectError(await t.request('PUT', `${base}/definitions/${body.tree_id}`, { token: bob.token, body: { ...body, tree_id: 'other' } }), 400, 'BAD_REQUEST');
    expectError(await t.request('PUT', `${base}/definitions/${body.tree_id}`, { token: bob.token, body: { ...body, migration: { from_version: 7 } } }), 400, 'talent_definition_invalid');
    expectError(await t.request('PUT', `${base}/definitions/nothing-here`, { token: bob.token, body: { ...body, tree_id: 'nothing-here' } }), 404, 'talent_tree_not_found');
    const other = { ...warrior(), name: 'Rogue' };
    await createTree(bob.token, other);

    const list = async (query: string) => expectOk(await t.request('GET', `${base}/definitions?${query}`, { token: bob.token }));
    const all = await list('sort_by=version&sort_order=asc');
    expect(all.pagination).toEqual({ page: 1, page_size: 20, total: 3, has_more: false });
    expect(all.trees.map((tree: { version: number }) => tree.version)).toEqual([1, 1, 2]);
    expect((await list('active_only=true')).trees.map((tree: { tree_id: string; version: number }) => `${tree.tree_id}:${tree.version}`).sort()).toEqual([`${body.tree_id}:2`, `${other.tree_id}:1`].sort());
    expect((await list('q=HOLY')).pagination.total).toBe(2);
    expect((await list('q=v2')).trees.map((tree: { version: number }) => tree.version)).toEqual([2]);
    const paged = await list('sort_by=name&sort_order=asc&page=2&page_size=2');
    expect(paged.pagination).toEqual({ page: 2, page_size: 2, total: 3, has_more: false });
    expect(paged.trees.map((tree: { name: string }) => tree.name)).toEqual(['Rogue']);
    expectError(await t.request('GET', `${base}/definitions?sort_by=colour`, { token: bob.token }), 400, 'BAD_REQUEST');
    expect((await t.request('GET', `${base}/definitions`, { token: alice.token })).body.trees.some((tree: { tree_id: string }) => tree.tree_id === other.tree_id)).toBe(false);

    expect(expectOk(await t.request('DELETE', `${base}/definitions/${body.tree_id}/versions/2`, { token: bob.token }))).toMatchObject({ tree_id: body.tree_id, version: 2 });
    expect(expectOk(await t.request('GET', `${base}/definitions/${body.tree_id}`, { token: bob.token }))).toMatchObject({ version: 1, active: true });
    expectError(await t.request('DELETE', `${base}/definitions/${body.tree_id}/versions/2`, { token: bob.token }), 404, 'talent_version_not_found');
    expectError(await t.request('DELETE', `${base}/definitions/${body.tree_id}/versions/1`, { token: alice.token }), 404, 'talent_tree_not_found');
    expectError(await t.request('DELETE', `${base}/definitions/${body.tree_id}/versions/-1`, { token: bob.token }), 400, 'BAD_REQUEST');
    expect((await list('active_only=true')).pagination.total).toBe(2);
    // A new version after a deletion gets a new number: numbers are never reused.
    expect(expectOk(await t.request('PUT', `${base}/definitions/${body.tree_id}`, { token: bob.token, body })).version).toBe(3);
  });
});

describe('talent XP and wallet', () => {
  it('level-ups credit the wallet; an Idempotency-Key or event_id answers the first result with idempotent: true', async () => {
    const user = await t.newUser('xp');
    expectOk(await t.request('POST', `${base}/curves`, { token: user.token, body: curve('lvl') }), 201);
    expect(await wallet(user.token)).toEqual({ user_id: user.user_id, balances: {}, xp: [] });
    const first = expectOk(await grantXp(user.token, 'lvl', 450, { 'idempotency-key': 'quest-42' }));
    expect(first).toMatchObject({ old_level: 1, new_level: 5, granted: { tp: 11, gold: 40 }, idempotent: false, total_xp: 450, event_id: 'quest-42' });
    const again = expectOk(await grantXp(user.token, 'lvl', 450, { 'idempotency-key': 'quest-42' }));
    expect(again).toEqual({ ...first, idempotent: true });
    expectError(await grantXp(user.token, 'lvl', 451, { 'idempotency-key': 'quest-42' }), 409, 'idempotency_key_reused');
    const byBody = expectOk(await t.request('POST', `${base}/xp/events`, { token: user.token, body: { curve_id: 'lvl', amount: 100, event_id: 'kill-1' } }));
    expect(byBody).toMatchObject({ old_level: 5, new_level: 6, idempotent: false });
    expect(expectOk(await t.request('POST', `${base}/xp/events`, { token: user.token, body: { curve_id: 'lvl', amount: 100, event_id: 'kill-1' } })).idempotent).toBe(true);
    expect(await wallet(user.token)).toEqual({ user_id: user.user_id, balances: { tp: 13, gold: 50 }, xp: [{ curve_id: 'lvl', current_level: 6, total_xp: 550 }] });
    // An event id named like an Object.prototype member is a new event, not a "reused" one.
    expect(expectOk(await grantXp(user.token, 'lvl', 1, { 'idempotency-key': 'constructor' }))).toMatchObject({ idempotent: false, total_xp: 551 });
    expect(expectOk(await grantXp(user.token, 'lvl', 1, { 'idempotency-key': 'constructor' }))).toMatchObject({ idempotent: true, total_xp: 551 });
  });

  it('exponential steps past 10^9 are exact: {base 1e9, exponent 10} needs 1.1e10 XP for level 3', async () => {
    const user = await t.newUser('xp');
    const body = { curve_id: 'steep', kind: 'exponential', max_level: 10, points_per_level: tp(1), params: { base: 1_000_000_000, exponent: 10 } };
    expectOk(await t.request('POST', `${base}/curves`, { token: user.token, body }), 201);
    const levels: number[] = [];
    for (let i = 0; i < 3; i++) levels.push(expectOk(await grantXp(user.token, 'steep', 1_000_000_000)).new_level);
    expect(levels).toEqual([2, 2, 2]);
    for (let i = 0; i < 8; i++) expectOk(await grantXp(user.token, 'steep', 1_000_000_000));
    expect(await wallet(user.token)).toEqual({ user_id: user.user_id, balances: { tp: 2 }, xp: [{ curve_id: 'steep', current_level: 3, total_xp: 11_000_000_000 }] });
  });

  it('bad XP events change nothing: unknown curve 404, zero or negative amounts 400, a bad key 400', async () => {
    const user = await t.newUser('xp');
    expectError(await grantXp(user.token, 'nope', 10), 404, 'talent_curve_not_found');
    expectError(await grantXp(user.token, 'main', -5), 400, 'BAD_REQUEST');
    expectError(await grantXp(user.token, 'main', 0), 400, 'BAD_REQUEST');
    expectError(await grantXp(user.token, 'main', 1.5), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', `${base}/xp/events`, { token: user.token, body: { amount: 5 } }), 400, 'BAD_REQUEST');
    expect(await wallet(user.token)).toEqual({ user_id: user.user_id, balances: {}, xp: [] });
  });
});

describe('talent allocation, respec and state', () => {
  it('allocates under every rule, each refusal naming its rule and changing nothing', async () => {
    const tree = await createTree(alice.token);
    const id = tree.tree_id as string;
    expectOk(await grantXp(alice.token, 'main', 100 * 4));
    const before = await wallet(alice.token);
    expect(before.balances).toEqual({ tp: 11, gold: 40 });
    const refused = await allocate(alice.token, id, 'cleave');
    expectError(refused, 409, 'talent_tier_locked');
    expect(refused.body.details).toMatchObject({ rule: 'tier_gate', node_id: 'cleave', tier: 2, points_required: 3, points_spent: 0 });
    expectError(await allocate(alice.token, id, 'ghost'), 404, 'talent_node_not_found');
    expectError(await allocate(alice.token, 'no-such-tree', 'strength'), 404, 'talent_tree_not_found');
    expectError(await allocate(bob.token, id, 'strength'), 404, 'talent_tree_not_found');
    expectError(await t.request('POST', `${base}/${id}/allocate`, { token: alice.token, body: {} }), 400, 'BAD_REQUEST');
    expect(await wallet(alice.token)).toEqual(before);

    for (const node of ['strength', 'strength', 'strength']) expectOk(await allocate(alice.token, id, node));
    expectError(await allocate(alice.token, id, 'strength'), 409, 'talent_max_rank');
    const prerequisites = await allocate(alice.token, id, 'cleave');
    expectError(prerequisites, 409, 'talent_prerequisites_unmet');
    expect(prerequisites.body.details).toMatchObject({ rule: 'prerequisites', missing: [{ node_id: 'toughness', rank: 1 }] });
    const state = expectOk(await allocate(alice.token, id, 'berserk'));
    expect(state).toEqual({
      exclusive_selections: { stance: 'berserk' },
      highest_tier_unlocked: 2,
      points_spent: { tp: 4 },
      ranks: { strength: 3, berserk: 1 },
      tree_id: id,
      tree_version: 1,
      user_id: alice.user_id,
    });
    const excluded = await allocate(alice.token, id, 'defender');
    expectError(excluded, 409, 'talent_exclusive_group');
    expect(excluded.body.details).toMatchObject({ rule: 'exclusive_group', excluded_by: ['berserk'] });
    for (const node of ['toughness', 'toughness', 'cleave']) expectOk(await allocate(alice.token, id, node));
    // tp: 11 - 3 - 1 - 2 - 2 = 3; gold: 40 - 20 = 20
    const poor = await allocate(alice.token, id, 'cleave');
    expectError(poor, 409, 'talent_max_rank');

    const view = expectOk(await t.request('GET', `${base}/${id}/state`, { token: alice.token }));
    expect(view.tree_version).toBe(1);
    expect(view.state.ranks).toEqual({ strength: 3, berserk: 1, toughness: 2, cleave: 1 });
    expect(view.nodes.find((node: { node_id: string }) => node.node_id === 'defender')).toEqual({
      node_id: 'defender', current_rank: 0, max_rank: 1, affordable: true, prerequisites_met: true, tier_locked: false, excluded_by: 'berserk',
    });
    expect((await wallet(alice.token)).balances).toEqual({ tp: 3, gold: 20 });
  });

  it('concurrent allocations are checked one at a time in the user actor: max_rank and balances hold', async () => {
    const user = await t.newUser('burst');
    const tree = await createTree(user.token);
    expectOk(await t.request('POST', `${base}/curves`, { token: user.token, body: curve('c') }), 201);
    expectOk(await grantXp(user.token, 'c', 200)); // 4 tp, 20 gold
    const results = await Promise.all(Array.from({ length: 8 }, () => allocate(user.token, tree.tree_id, 'strength')));
    expect(results.filter((res) => res.status === 200)).toHaveLength(3);
    expect(results.filter((res) => res.status === 409).every((res) => res.body.code === 'talent_max_rank')).toBe(true);
    const both = await Promise.all([allocate(user.token, tree.tree_id, 'toughness'), allocate(user.token, tree.tree_id, 'toughness')]);
    expect(both.map((res) => res.status).sort()).toEqual([200, 409]);
    expect(both.find((res) => res.status === 409)!.body.code).toBe('talent_insufficient_points');
    expect((await wallet(user.token)).balances).toEqual({ gold: 10 });
  });

  it('affordable: a node the wallet cannot pay is refused and shown as not affordable', async () => {
    const user = await t.newUser('poor');
    const tree = await createTree(user.token);
    expectOk(await t.request('POST', `${base}/curves`, { token: user.token, body: curve('c') }), 201);
    expectOk(await grantXp(user.token, 'c', 100)); // 2 tp, 10 gold
    expectOk(await allocate(user.token, tree.tree_id, 'toughness'));
    const refused = await allocate(user.token, tree.tree_id, 'toughness');
    expectError(refused, 409, 'talent_insufficient_points');
    expect(refused.body.details.rule).toBe('affordable');
    const view = expectOk(await t.request('GET', `${base}/${tree.tree_id}/state`, { token: user.token }));
    expect(view.nodes.find((node: { node_id: string }) => node.node_id === 'toughness')).toMatchObject({ affordable: false, current_rank: 1 });
    expect(view.nodes.find((node: { node_id: string }) => node.node_id === 'cleave')).toMatchObject({ tier_locked: true, prerequisites_met: false });
  });

  it('respec: partial with its per-rank cost, refused when it strands a node, full with its cost; no body is a full respec', async () => {
    const user = await t.newUser('respec');
    const tree = await createTree(user.token);
    const id = tree.tree_id as string;
    expectOk(await t.request('POST', `${base}/curves`, { token: user.token, body: curve('c') }), 201);
    expectOk(await grantXp(user.token, 'c', 500)); // level 6: 13 tp, 50 gold
    for (const node of ['strength', 'strength', 'toughness', 'cleave', 'defender']) expectOk(await allocate(user.token, id, node));
    expect((await wallet(user.token)).balances).toEqual({ tp: 7, gold: 40 });
    const stranded = await t.request('POST', `${base}/${id}/respec`, { token: user.token, body: { node_ids: ['toughness'] } });
    expectError(stranded, 409, 'talent_respec_invalid');
    expect(stranded.body.details).toMatchObject({ node_id: 'cleave', rule: 'prerequisites' });
    expectError(await t.request('POST', `${base}/${id}/respec`, { token: user.token, body: { node_ids: ['ghost'] } }), 404, 'talent_node_not_found');
    const partial = expectOk(await t.request('POST', `${base}/${id}/respec`, { token: user.token, body: { node_ids: ['defender'] } }));
    expect(partial.ranks).toEqual({ strength: 2, toughness: 1, cleave: 1 });
    expect((await wallet(user.token)).balances).toEqual({ tp: 7, gold: 40 }); // refund 1 tp, fee 1 tp
    const full = expectOk(await t.request('POST', `${base}/${id}/respec`, { token: user.token }));
    expect(full).toMatchObject({ ranks: {}, points_spent: {}, exclusive_selections: {}, highest_tier_unlocked: 1 });
    expect((await wallet(user.token)).balances).toEqual({ tp: 7 + 5, gold: 40 + 10 - 5 });
    expectError(await t.request('POST', `${base}/${id}/respec`, { token: user.token, body: { node_ids: [] } }), 400, 'BAD_REQUEST');
  });

  it("another user's state: readable by the tree's owner and platform admins, 403 for others", async () => {
    // An organization's API keys share its tenant: alice (owner of the tree) and bob play in it.
    const org = expectOk(await t.request('POST', '/api/v1/orgs', { token: alice.token, body: { name: `Talent ${alice.username}` } }), 201);
    const org_id = org.org_id as string;
    expectOk(await t.request('POST', `/admin/auth/org/${org_id}/members`, { token: adminToken, body: { user_id: bob.user_id, role: 'member' } }), 201);
    const orgKey = async (token: string) => expectOk(await t.request('POST', '/api/v1/auth/api-keys', { token, body: { name: 'game', scopes: ['*'], org_id } }), 201).key as string;
    const aliceKey = await orgKey(alice.token);
    const bobKey = await orgKey(bob.token);
    const tree = await createTree(aliceKey);
    const id = tree.tree_id as string;
    expectOk(await t.request('POST', `${base}/curves`, { token: aliceKey, body: curve('org-curve') }), 201);
    expectOk(await grantXp(bobKey, 'org-curve', 300));
    expectOk(await allocate(bobKey, id, 'strength'));

    const read = (token: string, user_id: string, query = '') => t.request('GET', `${base}/${id}/users/${user_id}/state${query}`, { token });
    const byOwner = expectOk(await read(aliceKey, bob.user_id));
    expect(byOwner.state).toMatchObject({ user_id: bob.user_id, ranks: { strength: 1 } });
    expect(expectOk(await read(bobKey, bob.user_id)).state.ranks).toEqual({ strength: 1 });
    expectError(await read(bobKey, alice.user_id), 403, 'forbidden');
    // Outside the tenant the tree does not exist; a platform admin names the tenant.
    expectError(await read(bob.token, bob.user_id), 404, 'talent_tree_not_found');
    expect(expectOk(await read(adminToken, bob.user_id, `?tenant=${org_id}`)).state.ranks).toEqual({ strength: 1 });
    expectError(await read(bob.token, bob.user_id, `?tenant=${org_id}`), 403, 'forbidden');
  });

  it('a new version with migration reaches each user when next touched: what fits is kept, the rest refunded', async () => {
    const user = await t.newUser('migrate');
    const body = warrior();
    await createTree(user.token, body);
    expectOk(await t.request('POST', `${base}/curves`, { token: user.token, body: curve('c') }), 201);
    expectOk(await grantXp(user.token, 'c', 500)); // 13 tp, 50 gold
    for (const node of ['strength', 'strength', 'strength', 'berserk']) expectOk(await allocate(user.token, body.tree_id, node));
    const v2 = { ...body, nodes: body.nodes.filter((node) => node.id !== 'berserk').map((node) => (node.id === 'strength' ? { ...node, max_rank: 2 } : node)) };
    expectOk(await t.request('PUT', `${base}/definitions/${body.tree_id}`, { token: user.token, body: { ...v2, migration: { from_version: 1 } } }));
    const view = expectOk(await t.request('GET', `${base}/${body.tree_id}/state`, { token: user.token }));
    expect(view).toMatchObject({ tree_version: 2, state: { tree_version: 2, ranks: { strength: 2 }, points_spent: { tp: 2 } } });
    expect((await wallet(user.token)).balances).toEqual({ tp: 11, gold: 50 });
  });
});

describe('talent analytics', () => {
  it('paths and archetypes follow allocations and respecs, per version', async () => {
    const owner = await t.newUser('analytics');
    const tree = await createTree(owner.token);
    const id = tree.tree_id as string;
    expectOk(await t.request('POST', `${base}/curves`, { token: owner.token, body: curve('c') }), 201);
    expectOk(await grantXp(owner.token, 'c', 500));
    for (const node of ['strength', 'strength', 'strength', 'berserk']) expectOk(await allocate(owner.token, id, node));
    const paths = async () => expectOk(await t.request('GET', `${base}/${id}/analytics/paths`, { token: owner.token }));
    const archetypes = async () => expectOk(await t.request('GET', `${base}/${id}/analytics/archetypes`, { token: owner.token }));
    const counted = await until(async () => {
      const view = await paths();
      return view.nodes.find((node: { node_id: string }) => node.node_id === 'berserk').total_ranks_allocated === 1 && view;
    }, 'paths');
    expect(counted.nodes.find((node: { node_id: string }) => node.node_id === 'strength')).toEqual({ name: 'Strength', node_id: 'strength', tier: 1, total_ranks_allocated: 3 });
    expect(counted).toMatchObject({ tree_id: id, tree_version: 1 });
    expect(await archetypes()).toEqual({
      archetypes: [{ population: 1, selections: [{ group: 'stance', node_id: 'berserk' }], share: 1, signature: 'stance=berserk' }],
      total_population: 1,
      tree_id: id,
      tree_version: 1,
    });
    expectOk(await t.request('POST', `${base}/${id}/respec`, { token: owner.token, body: { node_ids: ['berserk'] } }));
    expectOk(await allocate(owner.token, id, 'defender'));
    await until(async () => {
      const view = await archetypes();
      return view.archetypes.length === 1 && view.archetypes[0].signature === 'stance=defender' && view;
    }, 'archetypes after respec');
    expectError(await t.request('GET', `${base}/no-tree/analytics/paths`, { token: owner.token }), 404, 'talent_tree_not_found');
    expectError(await t.request('GET', `${base}/${id}/analytics/archetypes?version=5`, { token: owner.token }), 404, 'talent_version_not_found');
    expectError(await t.request('GET', `${base}/${id}/analytics/archetypes`, { token: alice.token }), 404, 'talent_tree_not_found');
  });
});
