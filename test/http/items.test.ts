import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TIER_REACHED_EVENT, DUPLICATE_CONVERTED_EVENT } from '../../actors/items/messages.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/** Items over the real socket (spec doc 2 §4.9; docs/api/items.md): every endpoint and its errors. */
let t: TestNode;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;
const events: { type: string; data: any }[] = [];
let domainCounter = 0;

beforeAll(async () => {
  t = await startTestNode();
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
  t.node.runtime.events.on('event', (event: { type: string; data: unknown }) => events.push(event as never));
});
afterAll(async () => {
  await t?.destroy();
});

const newDomain = () => `game-${++domainCounter}`;
const api = (domain: string, path: string) => `/api/v1/items/${domain}${path}`;
const post = (domain: string, path: string, body: unknown, token = alice.token) => t.request('POST', api(domain, path), { token, body });
const get = (domain: string, path: string, token = alice.token) => t.request('GET', api(domain, path), { token });

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}
function ok(res: TestResponse, status = 200) {
  expect(res.status, res.text).toBe(status);
  return res.body;
}

/** ore (stacks of 50, weight 2), ingot (stacks of 20), sword (durability 100, no stack). */
async function seedDomain(domain: string) {
  ok(await post(domain, '/definitions/batch', {
    definitions: [
      { definition_id: 'ore', name: 'Iron ore', max_stack: 50, weight: 2, volume: 1, tags: ['metal'] },
      { definition_id: 'ingot', name: 'Iron ingot', max_stack: 20, weight: 1.5, rarity: 'uncommon' },
      { definition_id: 'sword', name: 'Sword', max_stack: 1, weight: 5, equip_slot: 'main_hand', default_durability: 100, salvage_outputs: [{ definition_id: 'ingot', quantity: 1, chance: 0.5 }] },
    ],
  }), 201);
}

async function container(domain: string, body: Record<string, unknown> = {}) {
  return ok(await post(domain, '/containers', body), 201);
}

describe('definitions', () => {
  it('creates, reads, lists, replaces and deletes', async () => {
    const domain = newDomain();
    const created = ok(await post(domain, '/definitions', { name: 'Potion', max_stack: 10, weight: 0.25, tags: ['consumable'] }), 201);
    expect(created).toMatchObject({ domain, name: 'Potion', max_stack: 10, stackable: true, weight: 0.25, volume: 0, rarity: 'common', tags: ['consumable'], default_durability: null });
    expect(created.definition_id).toMatch(/^def_/);
    expect(ok(await get(domain, `/definitions/${created.definition_id}`))).toEqual(created);
    ok(await post(domain, '/definitions', { definition_id: 'elixir', name: 'Elixir', max_stack: 5 }), 201);
    const list = ok(await t.request('GET', api(domain, '/definitions?sort_by=name&sort_order=desc&q=i'), { token: alice.token }));
    expect(list.definitions.map((d: any) => d.name)).toEqual(['Potion', 'Elixir']);
    expect(list.pagination).toEqual({ page: 1, page_size: 20, total: 2, has_more: false });
    const paged = ok(await t.request('GET', api(domain, '/definitions?page=2&page_size=1'), { token: alice.token }));
    expect(paged.definitions).toHaveLength(1);
    // A value outside an enumeration: one detail naming the allowed values.
    const badSort = await t.request('GET', api(domain, '/definitions?sort_by=weight'), { token: alice.token });
    expectError(badSort, 400, 'BAD_REQUEST');
    expect(badSort.body.details).toEqual([{ field: 'querystring.sort_by', message: 'must be one of: "created_at", "updated_at", "name"' }]);
    const put = ok(await t.request('PUT', api(domain, '/definitions/elixir'), { token: alice.token, body: { name: 'Grand elixir', max_stack: 3, rarity: 'rare' } }));
    expect(put).toMatchObject({ definition_id: 'elixir', name: 'Grand elixir', max_stack: 3, rarity: 'rare' });
    expect(ok(await t.request('DELETE', api(domain, '/definitions/elixir'), { token: alice.token }))).toEqual({ id: 'elixir', message: expect.any(String) });
    expectError(await get(domain, '/definitions/elixir'), 404, 'items_definition_not_found');
  });

  it('batch: all or nothing, the first invalid one names its index', async () => {
    const domain = newDomain();
    const res = await post(domain, '/definitions/batch', {
      definitions: [
        { definition_id: 'a', name: 'A', max_stack: 5 },
        { definition_id: 'b', name: 'B', max_stack: 5, salvage_outputs: [{ definition_id: 'nope', quantity: 1 }] },
      ],
    });
    expectError(res, 404, 'items_definition_not_found');
    expect(res.body.details[0].field).toBe('body.definitions.1.salvage_outputs.0.definition_id');
    expectError(await get(domain, '/definitions/a'), 404, 'items_definition_not_found');
    expectError(await post(domain, '/definitions/batch', { definitions: [{ definition_id: 'a', name: 'A', max_stack: 5 }, { definition_id: 'a', name: 'A2', max_stack: 5 }] }), 409, 'items_definition_exists');
    const tooMany = Array.from({ length: 101 }, (_, i) => ({ name: `d${i}`, max_stack: 1 }));
    expectError(await post(domain, '/definitions/batch', { definitions: tooMany }), 400, 'BAD_REQUEST');
    const done = ok(await post(domain, '/definitions/batch', { definitions: [{ definition_id: 'a', name: 'A', max_stack: 5 }, { definition_id: 'b', name: 'B', max_stack: 1, salvage_outputs: [{ definition_id: 'a', quantity: 2 }] }] }), 201);
    expect(done.count).toBe(2);
    expectError(await post(domain, '/definitions', { definition_id: 'a', name: 'again', max_stack: 1 }), 409, 'items_definition_exists');
  });

  it('refuses bad input: negative or fractional numbers, contradictions, a definition in use', async () => {
    const domain = newDomain();
    expectError(await post(domain, '/definitions', { name: 'X', max_stack: -1 }), 400, 'BAD_REQUEST');
    expectError(await post(domain, '/definitions', { name: 'X', max_stack: 1.5 }), 400, 'BAD_REQUEST');
    expectError(await post(domain, '/definitions', { name: 'X', max_stack: 5, weight: -2 }), 400, 'BAD_REQUEST');
    expectError(await post(domain, '/definitions', { name: 'X', max_stack: 5, stackable: false }), 400, 'BAD_REQUEST');
    expectError(await post(domain, '/definitions', { name: 'X', max_stack: 5, default_durability: 10, stackable: true }), 400, 'BAD_REQUEST');
    await seedDomain(domain);
    expectError(await t.request('DELETE', api(domain, '/definitions/ingot'), { token: alice.token }), 409, 'items_definition_in_use');
    expectError(await t.request('PUT', api(domain, '/definitions/nope'), { token: alice.token, body: { name: 'n', max_stack: 1 } }), 404, 'items_definition_not_found');
    expect(ok(await get(domain, '/definitions')).pagination.total).toBe(3);
  });

  it('is per tenant: another tenant sees nothing', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    expectError(await get(domain, '/definitions/ore', bob.token), 404, 'items_definition_not_found');
    expect(ok(await get(domain, '/definitions', bob.token)).pagination.total).toBe(0);
    ok(await post(domain, '/definitions', { definition_id: 'ore', name: "Bob's ore", max_stack: 1 }, bob.token), 201);
    expect(ok(await get(domain, '/definitions/ore')).name).toBe('Iron ore');
  });

  it('needs a credential', async () => {
    expectError(await t.request('GET', api('g', '/definitions')), 401, 'unauthorized');
  });
});

describe('containers', () => {
  it('creates with limits and reads with usage; nests, expands and refuses cycles', async () => {
    const domain = newDomain();
    const root = await container(domain, { container_id: 'bag', owner_id: 'p1', slots: 4, limits: { max_weight: 100.5 } });
    expect(root).toMatchObject({ container_id: 'bag', kind: 'slotted', owner_id: 'p1', slots: 4, limits: { max_weight: 100.5, max_volume: null }, parent_container_id: null, contents: [], children: [] });
    const pouch = await container(domain, { container_id: 'pouch', parent_container_id: 'bag' });
    expect(pouch.slots).toBe(20);
    await container(domain, { container_id: 'box', parent_container_id: 'pouch' });
    expectError(await post(domain, '/containers', { container_id: 'bag' }), 409, 'items_container_exists');
    expectError(await post(domain, '/containers', { container_id: 'self', parent_container_id: 'self' }), 409, 'items_container_cycle');
    expectError(await post(domain, '/containers', { parent_container_id: 'ghost' }), 404, 'items_container_not_found');
    expectError(await post(domain, '/containers', { slots: 0 }), 400, 'BAD_REQUEST');

    await seedDomain(domain);
    ok(await post(domain, '/grant', { container_id: 'box', definition_id: 'ore', quantity: 3 }));
    const flat = ok(await get(domain, '/containers/bag'));
    expect(flat.children.map((c: any) => c.container_id)).toEqual(['pouch']);
    expect(flat.children[0].contents).toBeUndefined();
    const expanded = ok(await get(domain, '/containers/bag?expand=contents'));
    expect(expanded.children[0].container_id).toBe('pouch');
    expect(expanded.children[0].children[0]).toMatchObject({ container_id: 'box', contents: [{ definition_id: 'ore', quantity: 3 }] });
    expectError(await get(domain, '/containers/bag?expand=everything'), 400, 'BAD_REQUEST');

    // A container moved under its own descendant (or itself) is a cycle.
    expectError(await t.request('PATCH', api(domain, '/containers/bag'), { token: alice.token, body: { parent_container_id: 'box' } }), 409, 'items_container_cycle');
    expectError(await t.request('PATCH', api(domain, '/containers/bag'), { token: alice.token, body: { parent_container_id: 'bag' } }), 409, 'items_container_cycle');
    const moved = ok(await t.request('PATCH', api(domain, '/containers/box'), { token: alice.token, body: { parent_container_id: null } }));
    expect(moved.parent_container_id).toBeNull();
    expect(ok(await get(domain, '/containers/pouch')).children).toEqual([]);
    expectError(await get(domain, '/containers/bag', bob.token), 404, 'items_container_not_found');
  });

  it('refuses nesting deeper than the limit', async () => {
    const domain = newDomain();
    let parent: string | null = null;
    for (let depth = 0; depth <= 16; depth++) {
      const created: any = await container(domain, { container_id: `c${depth}`, parent_container_id: parent });
      parent = created.container_id;
    }
    expectError(await post(domain, '/containers', { parent_container_id: 'c16' }), 409, 'items_nesting_limit');
  });
});

describe('grants', () => {
  it('stacks into existing stacks up to max_stack, then new slots', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    await container(domain, { container_id: 'inv', slots: 5 });
    const first = ok(await post(domain, '/grant', { container_id: 'inv', definition_id: 'ore', quantity: 30 }));
    expect(first.items).toMatchObject([{ definition_id: 'ore', quantity: 30, slot: 0, max_stack: 50, weight: 2, state: 'normal' }]);
    const second = ok(await post(domain, '/grant', { container_id: 'inv', definition_id: 'ore', quantity: 40 }));
    expect(second.items.map((i: any) => [i.slot, i.quantity])).toEqual([[0, 50], [1, 20]]);
    const swords = ok(await post(domain, '/grant', { container_id: 'inv', definition_id: 'sword', quantity: 2 }));
    expect(swords.items.map((i: any) => [i.slot, i.quantity, i.durability])).toEqual([[2, 1, { current: 100, max: 100 }], [3, 1, { current: 100, max: 100 }]]);
    const view = ok(await get(domain, '/containers/inv'));
    expect(view.usage).toEqual({ slots_used: 4, weight: 150, volume: 70 });
  });

  it('refuses the whole grant when slots, weight or volume cannot take it (nothing granted)', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    await container(domain, { container_id: 'small', slots: 2, limits: { max_weight: 150, max_volume: 1000 } });
    const slots = await post(domain, '/grant', { container_id: 'small', definition_id: 'sword', quantity: 3 });
    expectError(slots, 409, 'items_capacity_exceeded');
    expect(slots.body.details).toMatchObject({ limit: 'slots', needed: 3, available: 2 });
    const weight = await post(domain, '/grant', { container_id: 'small', definition_id: 'ore', quantity: 76 });
    expectError(weight, 409, 'items_capacity_exceeded');
    expect(weight.body.details).toMatchObject({ limit: 'weight', needed: 152, available: 150 });
    await container(domain, { container_id: 'tiny', limits: { max_volume: 10 } });
    expect((await post(domain, '/grant', { container_id: 'tiny', definition_id: 'ore', quantity: 11 })).body.details.limit).toBe('volume');
    expect(ok(await get(domain, '/containers/small')).contents).toEqual([]);
    expect(ok(await get(domain, '/containers/tiny')).contents).toEqual([]);
  });

  it('refuses unknown definitions and containers, negative and fractional quantities', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    await container(domain, { container_id: 'inv' });
    expectError(await post(domain, '/grant', { container_id: 'inv', definition_id: 'ghost', quantity: 1 }), 404, 'items_definition_not_found');
    expectError(await post(domain, '/grant', { container_id: 'ghost', definition_id: 'ore', quantity: 1 }), 404, 'items_container_not_found');
    expectError(await post(domain, '/grant', { container_id: 'inv', definition_id: 'ore', quantity: -5 }), 400, 'BAD_REQUEST');
    expectError(await post(domain, '/grant', { container_id: 'inv', definition_id: 'ore', quantity: 0 }), 400, 'BAD_REQUEST');
    expectError(await post(domain, '/grant', { container_id: 'inv', definition_id: 'ore', quantity: 1.5 }), 400, 'BAD_REQUEST');
    expectError(await post(domain, '/grant', { container_id: 'inv', definition_id: 'ore', quantity: 1 }, bob.token), 404, 'items_definition_not_found');
    expect(ok(await get(domain, '/containers/inv')).contents).toEqual([]);
  });
});

describe('blueprints and crafting', () => {
  async function forge(domain: string, outputs: unknown[] = [{ definition_id: 'ingot', quantity: 1 }]) {
    return ok(await post(domain, '/blueprints', { name: 'Smelt', inputs: [{ value: 'ore', quantity: 2 }], outputs }), 201);
  }

  it('blueprint CRUD with versions; refuses unknown definitions', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    const bp = await forge(domain);
    expect(bp).toMatchObject({ name: 'Smelt', type: 'static', version: 1, inputs: [{ match: 'definition_id', value: 'ore', quantity: 2 }], outputs: [{ definition_id: 'ingot', quantity: 1, chance: 1, initial_durability_pct: 100 }] });
    expect(ok(await get(domain, `/blueprints/${bp.blueprint_id}`))).toEqual(bp);
    const put = ok(await t.request('PUT', api(domain, `/blueprints/${bp.blueprint_id}`), { token: alice.token, body: { name: 'Smelt more', inputs: [{ value: 'ore', quantity: 3 }], outputs: [{ definition_id: 'ingot', quantity: 2 }] } }));
    expect(put).toMatchObject({ version: 2, name: 'Smelt more' });
    expect(ok(await get(domain, '/blueprints?q=more')).blueprints).toHaveLength(1);
    expectError(await post(domain, '/blueprints', { name: 'Bad', inputs: [{ value: 'ghost', quantity: 1 }], outputs: [{ definition_id: 'ingot', quantity: 1 }] }), 404, 'items_definition_not_found');
    expectError(await post(domain, '/blueprints', { name: 'Bad', inputs: [{ value: 'ore', quantity: -1 }], outputs: [{ definition_id: 'ingot', quantity: 1 }] }), 400, 'BAD_REQUEST');
    expectError(await post(domain, '/blueprints', { name: 'Bad', inputs: [], outputs: [{ definition_id: 'ingot', quantity: 1 }] }), 400, 'BAD_REQUEST');
    expect(ok(await t.request('DELETE', api(domain, `/blueprints/${bp.blueprint_id}`), { token: alice.token })).id).toBe(bp.blueprint_id);
    expectError(await get(domain, `/blueprints/${bp.blueprint_id}`), 404, 'items_blueprint_not_found');
  });

  it('consumes inputs from the source and produces outputs in the target; global_first once per output', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    const bp = await forge(domain, [{ definition_id: 'ingot', quantity: 1 }, { definition_id: 'sword', quantity: 1, initial_durability_pct: 50 }]);
    await container(domain, { container_id: 'src', owner_id: 'p1' });
    await container(domain, { container_id: 'dst', owner_id: 'p1' });
    ok(await post(domain, '/grant', { container_id: 'src', definition_id: 'ore', quantity: 5 }));
    const craft = ok(await post(domain, '/craft', { blueprint_id: bp.blueprint_id, source_container_id: 'src', target_container_id: 'dst', seed: '42' }));
    expect(craft).toMatchObject({ blueprint_id: bp.blueprint_id, blueprint_version: 1, seed: '42', consumed: [{ definition_id: 'ore', quantity: 2 }], global_first: true, global_first_outputs: ['ingot', 'sword'] });
    expect(craft.produced.map((i: any) => [i.definition_id, i.quantity, i.durability])).toEqual([['ingot', 1, null], ['sword', 1, { current: 50, max: 100 }]]);
    const again = ok(await post(domain, '/craft', { blueprint_id: bp.blueprint_id, source_container_id: 'src', target_container_id: 'dst' }));
    expect(again.global_first).toBe(false);
    expect(again.seed).toMatch(/^[0-9]+$/);
    expect(ok(await get(domain, '/containers/src')).contents.map((i: any) => i.quantity)).toEqual([1]);
    const target = ok(await get(domain, '/containers/dst')).contents;
    expect(target.map((i: any) => [i.definition_id, i.quantity])).toEqual([['ingot', 2], ['sword', 1], ['sword', 1]]);
  });

  it('rolls chances from the recorded seed: the same seed gives the same outputs', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    const bp = await forge(domain, [{ definition_id: 'ingot', quantity: 1, chance: 0.5 }, { definition_id: 'ore', quantity: 1, chance: 0.5 }]);
    await container(domain, { container_id: 'src' });
    await container(domain, { container_id: 'dst' });
    ok(await post(domain, '/grant', { container_id: 'src', definition_id: 'ore', quantity: 50 }));
    const outcome = async (seed: string) => {
      const craft = ok(await post(domain, '/craft', { blueprint_id: bp.blueprint_id, source_container_id: 'src', target_container_id: 'dst', seed }));
      return craft.produced.map((item: any) => item.definition_id).sort().join(',');
    };
    const seen = new Set<string>();
    for (const seed of ['1', '2', '3', '4', '5', '6', '7', '8']) {
      const first = await outcome(seed);
      expect(await outcome(seed)).toBe(first);
      seen.add(first);
    }
    expect(seen.size).toBeGreaterThan(1);
  });

  it('refuses with nothing changed: missing inputs, a full target, unknown ids', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    const bp = await forge(domain, [{ definition_id: 'sword', quantity: 2 }]);
    await container(domain, { container_id: 'src' });
    await container(domain, { container_id: 'full', slots: 1 });
    ok(await post(domain, '/grant', { container_id: 'src', definition_id: 'ore', quantity: 1 }));
    const missing = await post(domain, '/craft', { blueprint_id: bp.blueprint_id, source_container_id: 'src', target_container_id: 'full' });
    expectError(missing, 409, 'items_insufficient_inputs');
    expect(missing.body.details.missing).toEqual([{ definition_id: 'ore', required: 2, available: 1 }]);
    ok(await post(domain, '/grant', { container_id: 'src', definition_id: 'ore', quantity: 1 }));
    const full = await post(domain, '/craft', { blueprint_id: bp.blueprint_id, source_container_id: 'src', target_container_id: 'full' });
    expectError(full, 409, 'items_capacity_exceeded');
    // The compensation gave the inputs back.
    expect(ok(await get(domain, '/containers/src')).contents.map((i: any) => [i.definition_id, i.quantity])).toEqual([['ore', 2]]);
    expect(ok(await get(domain, '/containers/src')).usage.weight).toBe(4);
    expect(ok(await get(domain, '/containers/full')).contents).toEqual([]);
    expectError(await post(domain, '/craft', { blueprint_id: 'bp_ghost', source_container_id: 'src', target_container_id: 'full' }), 404, 'items_blueprint_not_found');
    expectError(await post(domain, '/craft', { blueprint_id: bp.blueprint_id, source_container_id: 'ghost', target_container_id: 'full' }), 404, 'items_container_not_found');
    expectError(await post(domain, '/craft', { blueprint_id: bp.blueprint_id, source_container_id: 'src', target_container_id: 'full', seed: '99999999999' }), 400, 'BAD_REQUEST');
    expectError(await post(domain, '/craft', { blueprint_id: bp.blueprint_id, source_container_id: 'src', target_container_id: 'full' }, bob.token), 404, 'items_blueprint_not_found');
  });

  it('crafts in place: the room the consumed inputs free counts (slots, weight); refused with nothing changed when even that is short', async () => {
    const domain = newDomain();
    ok(await post(domain, '/definitions/batch', {
      definitions: [
        { definition_id: 'ore', name: 'Ore', max_stack: 10, weight: 1 },
        { definition_id: 'ingot', name: 'Ingot', max_stack: 10, weight: 1 },
        { definition_id: 'sword', name: 'Sword', max_stack: 1, default_durability: 10 },
      ],
    }), 201);
    const smelt = ok(await post(domain, '/blueprints', { name: 'Smelt', inputs: [{ value: 'ore', quantity: 10 }], outputs: [{ definition_id: 'ingot', quantity: 1 }] }), 201);
    const forgeTwo = ok(await post(domain, '/blueprints', { name: 'Two swords', inputs: [{ value: 'ore', quantity: 10 }], outputs: [{ definition_id: 'sword', quantity: 2 }] }), 201);
    // The tester's case: a 1-slot bag full of ore.
    await container(domain, { container_id: 'bag1', slots: 1 });
    ok(await post(domain, '/grant', { container_id: 'bag1', definition_id: 'ore', quantity: 10 }));
    const refused = await post(domain, '/craft', { blueprint_id: forgeTwo.blueprint_id, source_container_id: 'bag1', target_container_id: 'bag1' });
    expectError(refused, 409, 'items_capacity_exceeded');
    expect(refused.body.details).toMatchObject({ limit: 'slots', needed: 2, available: 1 });
    const untouched = ok(await get(domain, '/containers/bag1'));
    expect(untouched.contents.map((i: any) => [i.definition_id, i.quantity, i.slot])).toEqual([['ore', 10, 0]]);
    expect(untouched.usage).toEqual({ slots_used: 1, weight: 10, volume: 0 });
    const crafted = ok(await post(domain, '/craft', { blueprint_id: smelt.blueprint_id, source_container_id: 'bag1', target_container_id: 'bag1' }));
    expect(crafted).toMatchObject({ consumed: [{ definition_id: 'ore', quantity: 10 }], produced: [{ definition_id: 'ingot', quantity: 1, slot: 0, state: 'normal' }] });
    const after = ok(await get(domain, '/containers/bag1'));
    expect(after.contents.map((i: any) => [i.definition_id, i.quantity, i.slot])).toEqual([['ingot', 1, 0]]);
    expect(after.usage).toEqual({ slots_used: 1, weight: 1, volume: 0 });
    // Nothing left to craft from: nothing is duplicated.
    expectError(await post(domain, '/craft', { blueprint_id: smelt.blueprint_id, source_container_id: 'bag1', target_container_id: 'bag1' }), 409, 'items_insufficient_inputs');
    // Weight: a bag at its weight limit.
    await container(domain, { container_id: 'heavy', slots: 5, limits: { max_weight: 10 } });
    ok(await post(domain, '/grant', { container_id: 'heavy', definition_id: 'ore', quantity: 10 }));
    ok(await post(domain, '/craft', { blueprint_id: smelt.blueprint_id, source_container_id: 'heavy', target_container_id: 'heavy' }));
    expect(ok(await get(domain, '/containers/heavy')).usage).toEqual({ slots_used: 1, weight: 1, volume: 0 });
  });

  it('global_first is true exactly once under concurrent crafts', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    const bp = await forge(domain);
    const pairs = Array.from({ length: 20 }, (_, i) => i);
    for (const i of pairs) {
      await container(domain, { container_id: `s${i}` });
      await container(domain, { container_id: `d${i}` });
      ok(await post(domain, '/grant', { container_id: `s${i}`, definition_id: 'ore', quantity: 2 }));
    }
    const crafts = await Promise.all(pairs.map((i) => post(domain, '/craft', { blueprint_id: bp.blueprint_id, source_container_id: `s${i}`, target_container_id: `d${i}` })));
    expect(crafts.filter((res) => ok(res).global_first)).toHaveLength(1);
  });
});

describe('collections', () => {
  it('CRUD and validation', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    const created = ok(await post(domain, '/collections', { name: 'Smithing', members: ['ore', 'ingot'], tiers: [{ required: 2, bonus_event: 'smith_master' }, { required: 1, bonus_event: 'smith_novice' }] }), 201);
    expect(created).toMatchObject({ name: 'Smithing', members: ['ore', 'ingot'], duplicate_policy: 'ignore', convert_event: null, tiers: [{ required: 1 }, { required: 2 }] });
    expect(ok(await get(domain, `/collections/${created.collection_id}`))).toEqual(created);
    expect(ok(await get(domain, '/collections')).collections).toHaveLength(1);
    const put = ok(await t.request('PUT', api(domain, `/collections/${created.collection_id}`), { token: alice.token, body: { name: 'Smithing II', members: ['ore', 'ingot', 'sword'] } }));
    expect(put).toMatchObject({ name: 'Smithing II', tiers: [] });
    expectError(await post(domain, '/collections', { name: 'X', members: ['ghost'] }), 404, 'items_definition_not_found');
    expectError(await post(domain, '/collections', { name: 'X', members: ['ore'], tiers: [{ required: 2, bonus_event: 'e' }] }), 400, 'BAD_REQUEST');
    expectError(await post(domain, '/collections', { name: 'X', members: ['ore'], duplicate_policy: 'convert' }), 400, 'BAD_REQUEST');
    expectError(await t.request('DELETE', api(domain, '/definitions/sword'), { token: alice.token }), 409, 'items_definition_in_use');
    ok(await t.request('DELETE', api(domain, `/collections/${created.collection_id}`), { token: alice.token }));
    expectError(await get(domain, `/collections/${created.collection_id}`), 404, 'items_collection_not_found');
  });

  it('grants and crafts keep progress; a tier publishes its bonus_event once', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    const col = ok(await post(domain, '/collections', {
      name: 'Smithing',
      members: ['ore', 'ingot', 'sword'],
      tiers: [{ required: 2, bonus_event: 'smith_adept' }, { required: 3, bonus_event: 'smith_master' }],
      duplicate_policy: 'convert',
      convert_event: 'shards',
    }), 201);
    const bp = ok(await post(domain, '/blueprints', { name: 'Smelt', inputs: [{ value: 'ore', quantity: 2 }], outputs: [{ definition_id: 'ingot', quantity: 1 }] }), 201);
    await container(domain, { container_id: 'inv', owner_id: 'player-1' });
    const progressOf = async (user: string) => ok(await get(domain, `/collections/${col.collection_id}/progress?user_id=${user}`));
    expect(await progressOf('player-1')).toMatchObject({ owned: [], owned_count: 0, total_members: 3, tiers_reached: [], completed: false });

    const grant = ok(await post(domain, '/grant', { container_id: 'inv', definition_id: 'ore', quantity: 4 }));
    expect(grant.items[0].collection_tags).toEqual([col.collection_id]);
    expect(grant.tier_events).toEqual([]);
    expect(await progressOf('player-1')).toMatchObject({ owned: ['ore'], duplicate_counts: { ore: 3 } });
    expect(events.filter((e) => e.type === DUPLICATE_CONVERTED_EVENT && e.data.domain === domain)).toHaveLength(1);

    const craft = ok(await post(domain, '/craft', { blueprint_id: bp.blueprint_id, source_container_id: 'inv', target_container_id: 'inv' }));
    expect(craft.tier_events).toEqual([{ collection_id: col.collection_id, required: 2, bonus_event: 'smith_adept', global_first: true }]);
    const reached = events.filter((e) => e.type === TIER_REACHED_EVENT && e.data.domain === domain);
    expect(reached.map((e) => e.data)).toEqual([expect.objectContaining({ user_id: 'player-1', collection_id: col.collection_id, required: 2, bonus_event: 'smith_adept' })]);

    // Another player reaching the same tier is not the first.
    await container(domain, { container_id: 'inv2', owner_id: 'player-2' });
    ok(await post(domain, '/grant', { container_id: 'inv2', definition_id: 'ore', quantity: 1 }));
    const second = ok(await post(domain, '/grant', { container_id: 'inv2', definition_id: 'ingot', quantity: 1 }));
    expect(second.tier_events).toEqual([{ collection_id: col.collection_id, required: 2, bonus_event: 'smith_adept', global_first: false }]);
    const last = ok(await post(domain, '/grant', { container_id: 'inv2', definition_id: 'sword', quantity: 1 }));
    expect(last.tier_events).toMatchObject([{ required: 3, bonus_event: 'smith_master', global_first: true }]);
    expect(await progressOf('player-2')).toMatchObject({ owned_count: 3, completed: true, tiers_reached: [2, 3] });
    expectError(await get(domain, '/collections/col_ghost/progress?user_id=x'), 404, 'items_collection_not_found');
    expectError(await get(domain, `/collections/${col.collection_id}/progress`), 400, 'BAD_REQUEST');
  });
});

describe('merge', () => {
  it('moves as much as fits from one stack into another of the same definition', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    await container(domain, { container_id: 'inv' });
    ok(await post(domain, '/grant', { container_id: 'inv', definition_id: 'ore', quantity: 50 }));
    // The definition's max_stack changes: the next grant opens a stack with the new size, which does not merge with the old one.
    ok(await t.request('PUT', api(domain, '/definitions/ore'), { token: alice.token, body: { name: 'Iron ore', max_stack: 60, weight: 2, volume: 1 } }));
    const small = ok(await post(domain, '/grant', { container_id: 'inv', definition_id: 'ore', quantity: 10 })).items[0];
    const big = ok(await get(domain, '/containers/inv')).contents[0];
    expectError(await post(domain, '/merge', { container_id: 'inv', source_item_id: small.item_id, target_item_id: big.item_id }), 409, 'items_merge_incompatible');
    const more = ok(await post(domain, '/grant', { container_id: 'inv', definition_id: 'ore', quantity: 55 })).items;
    // 10 + 50 fill the 60-stack; 5 open a new stack.
    expect(more.map((i: any) => i.quantity)).toEqual([60, 5]);
    ok(await post(domain, '/grant', { container_id: 'inv', definition_id: 'ore', quantity: 0 + 1 }));
    const contents = ok(await get(domain, '/containers/inv')).contents;
    const [, , five] = contents;
    expect(five.quantity).toBe(6);
    // Move 2 of the 60-stack into the 6-stack, then the rest as much as fits.
    const merged = ok(await post(domain, '/merge', { container_id: 'inv', source_item_id: small.item_id, target_item_id: five.item_id, quantity: 2 }));
    expect(merged).toMatchObject({ moved: 2, source: { quantity: 58 }, target: { quantity: 8 } });
    const all = ok(await post(domain, '/merge', { container_id: 'inv', source_item_id: five.item_id, target_item_id: small.item_id }));
    expect(all).toMatchObject({ moved: 2, source: { quantity: 6 }, target: { quantity: 60 } });
    expectError(await post(domain, '/merge', { container_id: 'inv', source_item_id: five.item_id, target_item_id: small.item_id }), 409, 'items_stack_full');
    const swapped = ok(await post(domain, '/merge', { container_id: 'inv', source_item_id: small.item_id, target_item_id: five.item_id }));
    expect(swapped).toMatchObject({ moved: 54, source: { quantity: 6 }, target: { quantity: 60 } });
    const done = ok(await get(domain, '/containers/inv'));
    expect(done.contents.reduce((sum: number, i: any) => sum + i.quantity, 0)).toBe(50 + 10 + 55 + 1);
    expectError(await post(domain, '/merge', { container_id: 'inv', source_item_id: five.item_id, target_item_id: five.item_id }), 409, 'items_merge_incompatible');
    expectError(await post(domain, '/merge', { container_id: 'inv', source_item_id: 'itm_ghost', target_item_id: five.item_id }), 404, 'items_item_not_found');
    expectError(await post(domain, '/merge', { container_id: 'inv', source_item_id: small.item_id, target_item_id: five.item_id, quantity: 0 }), 400, 'BAD_REQUEST');
    expectError(await post(domain, '/merge', { container_id: 'inv', source_item_id: small.item_id, target_item_id: five.item_id }, bob.token), 404, 'items_item_not_found');
  });

  it('refuses items with durability', async () => {
    const domain = newDomain();
    await seedDomain(domain);
    await container(domain, { container_id: 'inv' });
    const [a, b] = ok(await post(domain, '/grant', { container_id: 'inv', definition_id: 'sword', quantity: 2 })).items;
    expectError(await post(domain, '/merge', { container_id: 'inv', source_item_id: a.item_id, target_item_id: b.item_id }), 409, 'items_merge_incompatible');
  });
});

describe('salvage', () => {
  it('turns units of an item into its salvage outputs in the same container, all or nothing', async () => {
    const domain = newDomain();
    ok(await post(domain, '/definitions/batch', {
      definitions: [
        { definition_id: 'scrap', name: 'Scrap', max_stack: 100, weight: 0.5 },
        { definition_id: 'gem', name: 'Gem', max_stack: 10 },
        { definition_id: 'crate', name: 'Crate', max_stack: 10, weight: 3, salvage_outputs: [{ definition_id: 'scrap', quantity: 2 }, { definition_id: 'gem', quantity: 1 }] },
        { definition_id: 'rock', name: 'Rock', max_stack: 10 },
      ],
    }), 201);
    // Two outputs need two new slots: one free slot refuses the whole salvage.
    await container(domain, { container_id: 'tight', slots: 2 });
    const [packed] = ok(await post(domain, '/grant', { container_id: 'tight', definition_id: 'crate', quantity: 10 })).items;
    const refused = await post(domain, '/salvage', { container_id: 'tight', item_id: packed.item_id, quantity: 4 });
    expectError(refused, 409, 'items_capacity_exceeded');
    expect(ok(await get(domain, '/containers/tight')).contents.map((i: any) => [i.definition_id, i.quantity])).toEqual([['crate', 10]]);

    await container(domain, { container_id: 'inv', slots: 5, limits: { max_weight: 40 } });
    const [crate] = ok(await post(domain, '/grant', { container_id: 'inv', definition_id: 'crate', quantity: 10 })).items;
    const result = ok(await post(domain, '/salvage', { container_id: 'inv', item_id: crate.item_id, quantity: 4, seed: '11' }));
    expect(result).toMatchObject({ container_id: 'inv', seed: '11', consumed: { item_id: crate.item_id, definition_id: 'crate', quantity: 4 }, remaining: { item_id: crate.item_id, quantity: 6 } });
    expect(result.produced.map((i: any) => [i.definition_id, i.quantity])).toEqual([['scrap', 8], ['gem', 4]]);
    expect(ok(await get(domain, '/containers/inv')).usage).toEqual({ slots_used: 3, weight: 6 * 3 + 8 * 0.5, volume: 0 });
    const rest = ok(await post(domain, '/salvage', { container_id: 'inv', item_id: crate.item_id, quantity: 6 }));
    expect(rest.remaining).toBeNull();
    expect(ok(await get(domain, '/containers/inv')).contents.map((i: any) => [i.definition_id, i.quantity])).toEqual([['scrap', 20], ['gem', 10]]);

    const [rock] = ok(await post(domain, '/grant', { container_id: 'inv', definition_id: 'rock', quantity: 2 })).items;
    expectError(await post(domain, '/salvage', { container_id: 'inv', item_id: rock.item_id }), 409, 'items_not_salvageable');
    const [more] = ok(await post(domain, '/grant', { container_id: 'inv', definition_id: 'crate', quantity: 1 })).items;
    expectError(await post(domain, '/salvage', { container_id: 'inv', item_id: more.item_id, quantity: 2 }), 409, 'items_insufficient_inputs');
    expectError(await post(domain, '/salvage', { container_id: 'inv', item_id: 'itm_ghost' }), 404, 'items_item_not_found');
    expectError(await post(domain, '/salvage', { container_id: 'inv', item_id: more.item_id, quantity: 0 }), 400, 'BAD_REQUEST');
    expectError(await post(domain, '/salvage', { container_id: 'inv', item_id: more.item_id }, bob.token), 404, 'items_item_not_found');
    expect(ok(await get(domain, '/containers/inv')).contents.find((i: any) => i.item_id === more.item_id).quantity).toBe(1);
  });
});
