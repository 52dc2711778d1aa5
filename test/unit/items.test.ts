import { describe, expect, it } from 'vitest';
import type { TurnContext, TurnResult } from '../../runtime/index.js';
import { initialCatalogState, stepCatalog, type CatalogState } from '../../actors/items/catalog-state.js';
import { rollChances } from '../../actors/items/chance.js';
import { initialFirstState, stepFirst } from '../../actors/items/first-state.js';
import { initialContainerState, type ContainerState } from '../../actors/items/container-state.js';
import { stepContainerFlows } from '../../actors/items/flows.js';
import { ITEM_FIRST_KIND, ITEM_PROGRESS_KIND, TIER_REACHED_EVENT, type Blueprint, type CatalogMessage, type ContainerMessage, type DefinitionInput } from '../../actors/items/messages.js';
import { craftPlan, grantPlan, salvagePlan } from '../../actors/items/plans.js';
import { loadProgress, stepProgress } from '../../actors/items/progress-state.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** The catalog's turns and plans, the grant and craft flows step by step (the container coordinates), the first claim and the progress actor (pure). */
const KEY = JSON.stringify(['tenant-1', 'game']);
const ctx = (request_id: string | null = null): TurnContext => ({ ...fixedContext(1_000, 'item-catalog', KEY), request_id });

function def(definition_id: string, extra: Partial<DefinitionInput> = {}): DefinitionInput {
  return { definition_id, name: definition_id, max_stack: 10, weight_m: 1_000, volume_m: 0, equip_slot: null, rarity: 'common', tags: [], default_durability: null, salvage_outputs: [], ...extra };
}

function step(state: CatalogState, message: CatalogMessage, request_id: string | null = null): TurnResult<CatalogState, any> {
  return stepCatalog(state, message, ctx(request_id));
}

function seeded(): CatalogState {
  let state = initialCatalogState();
  state = step(state, { op: 'definitions_create', definitions: [def('ore'), def('ingot'), def('sword', { max_stack: 1, default_durability: 50 })] }).state;
  for (const container_id of ['src', 'dst']) {
    state = step(state, { op: 'container_create', container: { container_id, owner_id: 'p1', parent_container_id: null, slots: 10, max_weight_m: null, max_volume_m: null } }).state;
  }
  return state;
}

const answer = (flow_id: string, stepName: string, outcome: { ok: true; reply: unknown } | { ok: false; error: { code: any; message: string } }): ContainerMessage =>
  ({ op: 'flow-answer', flow_id, step: stepName, ...outcome }) as ContainerMessage;

describe('items catalog', () => {
  it('a definition named by a blueprint cannot be deleted; a blueprint naming an unknown one is refused', () => {
    let state = seeded();
    expect(codeOf(() => step(state, { op: 'blueprint_create', blueprint: { name: 'x', inputs: [{ match: 'definition_id', value: 'ghost', quantity: 1 }], outputs: [], context_requirements: null } }))).toBe('items_definition_not_found');
    state = step(state, { op: 'blueprint_create', blueprint: { name: 'smelt', inputs: [{ match: 'definition_id', value: 'ore', quantity: 2 }], outputs: [{ definition_id: 'ingot', quantity: 1, chance: 1, initial_durability_pct: 100 }], context_requirements: null } }).state;
    expect(codeOf(() => step(state, { op: 'definition_delete', definition_id: 'ingot' }))).toBe('items_definition_in_use');
    expect(codeOf(() => step(state, { op: 'definition_delete', definition_id: 'sword' }))).toBeUndefined();
  });

  it('refuses a move that makes a cycle, at any depth', () => {
    let state = seeded();
    const create = (container_id: string, parent: string | null) =>
      (state = step(state, { op: 'container_create', container: { container_id, owner_id: null, parent_container_id: parent, slots: 1, max_weight_m: null, max_volume_m: null } }).state);
    create('a', null);
    create('b', 'a');
    create('c', 'b');
    expect(codeOf(() => step(state, { op: 'container_move', container_id: 'a', parent_container_id: 'c' }))).toBe('items_container_cycle');
    expect(codeOf(() => step(state, { op: 'container_move', container_id: 'a', parent_container_id: 'a' }))).toBe('items_container_cycle');
    expect(codeOf(() => step(state, { op: 'container_move', container_id: 'c', parent_container_id: null }))).toBeUndefined();
  });
});

describe('items flows (the container coordinates)', () => {
  const SOURCE_KEY = JSON.stringify(['tenant-1', 'game', 'src']);
  const at = (request_id: string | null = null): TurnContext => ({ ...fixedContext(2_000, 'item-container', SOURCE_KEY), request_id });
  const run = (state: ContainerState, message: ContainerMessage, request_id: string | null = null) => stepContainerFlows(state, message, at(request_id));

  function craftSetup(outputs: Blueprint['outputs']) {
    let catalog = seeded();
    catalog = step(catalog, { op: 'blueprint_create', blueprint: { name: 'smelt', inputs: [{ match: 'definition_id', value: 'ore', quantity: 2 }], outputs, context_requirements: null } }).state;
    const blueprint_id = [...catalog.blueprints.keys()][0]!;
    const grant = grantPlan(catalog, 'src', 'ore', 5);
    const source = run(initialContainerState(), { op: 'grant', plan: grant }).state;
    return { catalog, blueprint_id, source };
  }

  it('a grant without collections answers in its own turn', () => {
    const { source } = craftSetup([{ definition_id: 'ingot', quantity: 1, chance: 1, initial_durability_pct: 100 }]);
    expect([...source.items.values()].map((item) => item.quantity)).toEqual([5]);
    expect(source.flows.size).toBe(0);
  });

  it('craft: reserve in the source turn -> place in the target -> commit and the first claim -> reply', () => {
    const { catalog, blueprint_id, source } = craftSetup([{ definition_id: 'ingot', quantity: 1, chance: 1, initial_durability_pct: 100 }]);
    const plan = craftPlan(catalog, blueprint_id, 'src', 'dst', 7);
    const started = run(source, { op: 'craft', plan }, 'req-1');
    expect(started.defer).toBe(true);
    expect([...started.state.items.values()].map((item) => item.quantity)).toEqual([3]);
    const place = started.sends![0]!;
    expect(JSON.parse(place.key)).toEqual(['tenant-1', 'game', 'dst']);
    const flow_id = (place.message as any).reply_to.flow_id;
    expect((place.message as any).call.op).toBe('place');

    const settled = run(started.state, answer(flow_id, 'place', { ok: true, reply: { items: [{ item_id: 'i1', definition_id: 'ingot', quantity: 1 }], owner_id: 'p1' } }) as never);
    expect(settled.state.reservations.size).toBe(0);
    expect(settled.writes).toContainEqual({ subkey: `r:${flow_id}`, value: undefined });
    expect(settled.sends!.map((send) => [send.kind, (send.message as any).reply_to.step])).toEqual([[ITEM_FIRST_KIND, 'first:ingot']]);
    // A repeated (late) answer of a step already done is ignored.
    expect(run(settled.state, answer(flow_id, 'place', { ok: true, reply: { items: [], owner_id: null } }) as never).sends).toBeUndefined();
    const done = run(settled.state, answer(flow_id, 'first:ingot', { ok: true, reply: { first: true, claimed_by: flow_id } }) as never);
    expect(done.replies).toEqual([{ request_id: 'req-1', reply: expect.objectContaining({ global_first: true, seed: '7', consumed: [{ definition_id: 'ore', quantity: 2 }] }) }]);
    expect(done.state.flows.size).toBe(0);
    expect(done.writes).toContainEqual({ subkey: `f:${flow_id}`, value: undefined });
  });

  it('craft: a subject the catalog knows is claimed is not asked again; the reply leaves with the commit', () => {
    const { catalog, blueprint_id, source } = craftSetup([{ definition_id: 'ingot', quantity: 1, chance: 1, initial_durability_pct: 100 }]);
    step(catalog, { op: 'claimed', subject_key: JSON.stringify(['output', blueprint_id, 'ingot']) });
    const started = run(source, { op: 'craft', plan: craftPlan(catalog, blueprint_id, 'src', 'dst', 8) }, 'req-9');
    const flow_id = (started.sends![0]!.message as any).reply_to.flow_id;
    const done = run(started.state, answer(flow_id, 'place', { ok: true, reply: { items: [], owner_id: 'p1' } }) as never);
    expect(done.sends).toEqual([]);
    expect(done.replies).toEqual([{ request_id: 'req-9', reply: expect.objectContaining({ global_first: false }) }]);
  });

  it('craft: a refused placement releases the inputs in the same turn and answers the refusal', () => {
    const { catalog, blueprint_id, source } = craftSetup([{ definition_id: 'sword', quantity: 1, chance: 1, initial_durability_pct: 40 }]);
    const plan = craftPlan(catalog, blueprint_id, 'src', 'dst', 1);
    expect(plan.placements[0]!.unit.durability).toEqual({ current: 20, max: 50 });
    const started = run(source, { op: 'craft', plan }, 'req-2');
    const flow_id = (started.sends![0]!.message as any).reply_to.flow_id;
    const done = run(started.state, answer(flow_id, 'place', { ok: false, error: { code: 'items_capacity_exceeded', message: 'full' } }) as never);
    expect(done.replies).toEqual([{ request_id: 'req-2', error: { code: 'items_capacity_exceeded', message: 'full' } }]);
    expect([...done.state.items.values()].map((item) => item.quantity)).toEqual([5]);
    expect(done.state.reservations.size).toBe(0);
  });

  it('craft: missing inputs are refused in the source turn, nothing taken', () => {
    const { catalog, blueprint_id } = craftSetup([{ definition_id: 'ingot', quantity: 1, chance: 1, initial_durability_pct: 100 }]);
    const empty = initialContainerState();
    expect(codeOf(() => run(empty, { op: 'craft', plan: craftPlan(catalog, blueprint_id, 'src', 'dst', 1) }))).toBe('items_insufficient_inputs');
    expect(empty.flows.size).toBe(0);
  });

  describe('craft in place (source = target): the room the inputs free counts, in one turn', () => {
    /** A container `bag` (slots, max weight) holding 10 ore (stacks of 10, weight 1 each), and a blueprint of 10 ore -> the outputs. */
    function inPlace(slots: number, max_weight_m: number | null, outputs: Blueprint['outputs']) {
      let catalog = seeded();
      catalog = step(catalog, { op: 'container_create', container: { container_id: 'bag', owner_id: 'p1', parent_container_id: null, slots, max_weight_m, max_volume_m: null } }).state;
      catalog = step(catalog, { op: 'blueprint_create', blueprint: { name: 'smelt', inputs: [{ match: 'definition_id', value: 'ore', quantity: 10 }], outputs, context_requirements: null } }).state;
      const blueprint_id = [...catalog.blueprints.keys()][0]!;
      const bag = run(initialContainerState(), { op: 'grant', plan: grantPlan(catalog, 'bag', 'ore', 10) }).state;
      return { plan: craftPlan(catalog, blueprint_id, 'bag', 'bag', 3), bag };
    }
    const ingot = { definition_id: 'ingot', quantity: 1, chance: 1, initial_durability_pct: 100 };

    it('a 1-slot bag full of ore crafts it into an ingot in the slot the ore frees, with no reservation and no place step', () => {
      const { plan, bag } = inPlace(1, null, [ingot]);
      const started = run(bag, { op: 'craft', plan }, 'req-p');
      expect([...started.state.items.values()]).toMatchObject([{ definition_id: 'ingot', quantity: 1, slot: 0 }]);
      expect(started.state.reservations.size).toBe(0);
      expect(started.writes!.some((write) => write.subkey.startsWith('r:'))).toBe(false);
      // Only the first claim is asked; nothing goes to a target.
      expect(started.sends!.map((send) => [send.kind, (send.message as any).reply_to.step])).toEqual([[ITEM_FIRST_KIND, 'first:ingot']]);
      const flow_id = (started.sends![0]!.message as any).reply_to.flow_id;
      const done = run(started.state, answer(flow_id, 'first:ingot', { ok: true, reply: { first: true, claimed_by: flow_id } }) as never);
      expect(done.replies).toEqual([
        { request_id: 'req-p', reply: expect.objectContaining({ consumed: [{ definition_id: 'ore', quantity: 10 }], produced: [expect.objectContaining({ definition_id: 'ingot', slot: 0 })], locked_item_ids: [] }) },
      ]);
    });

    it('the weight the inputs free counts too', () => {
      const { plan, bag } = inPlace(10, 10_000, [ingot]);
      const started = run(bag, { op: 'craft', plan }, 'req-w');
      expect([...started.state.items.values()].map((item) => [item.definition_id, item.quantity])).toEqual([['ingot', 1]]);
    });

    it('refused when the outputs do not fit even without the inputs: nothing changed, nothing reserved', () => {
      const { plan, bag } = inPlace(1, null, [{ definition_id: 'sword', quantity: 2, chance: 1, initial_durability_pct: 100 }]);
      const before = JSON.stringify([...bag.items.values()]);
      expect(codeOf(() => run(bag, { op: 'craft', plan }, 'req-r'))).toBe('items_capacity_exceeded');
      expect(JSON.stringify([...bag.items.values()])).toBe(before);
      expect(bag.reservations.size).toBe(0);
      expect(bag.flows.size).toBe(0);
      const heavy = inPlace(10, 10_000, [{ definition_id: 'ingot', quantity: 11, chance: 1, initial_durability_pct: 100 }]);
      expect(codeOf(() => run(heavy.bag, { op: 'craft', plan: heavy.plan }))).toBe('items_capacity_exceeded');
      expect([...heavy.bag.items.values()].map((item) => [item.definition_id, item.quantity])).toEqual([['ore', 10]]);
    });
  });

  it('grant: place, then the owner progress for a collection member, then a tier claim', () => {
    let catalog = seeded();
    catalog = step(catalog, { op: 'collection_create', collection: { name: 'metals', members: ['ore', 'ingot'], tiers: [{ required: 1, bonus_event: 'first_metal' }], duplicate_policy: 'ignore', convert_event: null } }).state;
    const collection_id = [...catalog.collections.keys()][0]!;
    const plan = grantPlan(catalog, 'src', 'ore', 3);
    expect(plan.placement.unit.collection_tags).toEqual([collection_id]);
    const started = run(initialContainerState(), { op: 'grant', plan }, 'req-3');
    expect(started.sends![0]!.kind).toBe(ITEM_PROGRESS_KIND);
    const flow_id = (started.sends![0]!.message as any).reply_to.flow_id;
    const claim = run(started.state, answer(flow_id, 'progress', { ok: true, reply: { tiers_reached: [{ collection_id, required: 1, bonus_event: 'first_metal' }] } }) as never);
    expect(claim.sends![0]!.kind).toBe(ITEM_FIRST_KIND);
    const done = run(claim.state, answer(flow_id, `tier:${collection_id}:1`, { ok: true, reply: { first: false } }) as never);
    expect(done.replies![0]!.reply).toMatchObject({ tier_events: [{ collection_id, required: 1, bonus_event: 'first_metal', global_first: false }] });
  });

  it('plans refuse unknown definitions and containers', () => {
    const catalog = seeded();
    expect(codeOf(() => step(catalog, { op: 'grant_plan', container_id: 'src', definition_id: 'ghost', quantity: 1 }))).toBe('items_definition_not_found');
    expect(codeOf(() => step(catalog, { op: 'grant_plan', container_id: 'ghost', definition_id: 'ore', quantity: 1 }))).toBe('items_container_not_found');
    expect(codeOf(() => step(catalog, { op: 'craft_plan', blueprint_id: 'ghost', source_container_id: 'src', target_container_id: 'dst', seed: 1 }))).toBe('items_blueprint_not_found');
  });
});

describe('first claim and progress', () => {
  it('the first claimant stays first; a repeat of its claim is still first; the catalog is told the subject is taken', () => {
    const key = JSON.stringify(['tenant-1', 'game', 'output', 'bp_1', 'ingot']);
    const first = (n: number) => fixedContext(n, 'item-first', key);
    const a = stepFirst(initialFirstState(), { op: 'claim', claimant: 'f1' }, first(5));
    expect(a.reply).toMatchObject({ first: true, claimed_by: 'f1' });
    expect(a.sends).toEqual([{ kind: 'item-catalog', key: JSON.stringify(['tenant-1', 'game']), message: { op: 'claimed', subject_key: JSON.stringify(['output', 'bp_1', 'ingot']) } }]);
    const b = stepFirst(a.state, { op: 'claim', claimant: 'f2' }, first(6));
    expect(b.reply).toMatchObject({ first: false, claimed_by: 'f1' });
    expect(b.sends).toEqual(a.sends);
    expect(stepFirst(a.state, { op: 'claim', claimant: 'f1' }, first(7)).reply).toMatchObject({ first: true });
  });

  it('counts owned members and duplicates; a tier is reached once and publishes its bonus_event', () => {
    const rule = { collection_id: 'c1', members: ['a', 'b'], tiers: [{ required: 2, bonus_event: 'done' }], duplicate_policy: 'ignore' as const, convert_event: null };
    const acquire = (definition_id: string, quantity: number) => ({ op: 'acquire' as const, tenant: 't', domain: 'd', user_id: 'u', acquired: [{ definition_id, quantity }], collections: [rule] });
    let state = loadProgress('k', []);
    state = stepProgress(state, acquire('a', 3), fixedContext(1)).state;
    const reached = stepProgress(state, acquire('b', 1), fixedContext(2));
    expect(reached.reply).toEqual({ tiers_reached: [{ collection_id: 'c1', required: 2, bonus_event: 'done' }] });
    expect(reached.events).toEqual([{ type: TIER_REACHED_EVENT, data: expect.objectContaining({ bonus_event: 'done', user_id: 'u' }) }]);
    const again = stepProgress(reached.state, acquire('b', 1), fixedContext(3));
    expect(again.reply).toEqual({ tiers_reached: [] });
    expect(stepProgress(again.state, { op: 'get', collection_id: 'c1' }, fixedContext(4)).reply).toMatchObject({ owned: ['a', 'b'], duplicate_counts: { a: 2, b: 1 }, tiers_reached: [2] });
  });
});

describe('salvage plans', () => {
  it('roll every unit from the seed: the same seed, the same outputs', () => {
    let state = initialCatalogState();
    state = step(state, { op: 'definitions_create', definitions: [def('scrap'), def('box', { salvage_outputs: [{ definition_id: 'scrap', quantity: 2, chance: 0.5 }] }), def('rock')] }).state;
    state = step(state, { op: 'container_create', container: { container_id: 'c', owner_id: null, parent_container_id: null, slots: 5, max_weight_m: null, max_volume_m: null } }).state;
    const outcomes = new Set<number>();
    for (let seed = 0; seed < 20; seed++) {
      const plan = salvagePlan(state, 'c', 'box', 10, seed);
      expect(salvagePlan(state, 'c', 'box', 10, seed)).toEqual(plan);
      const scrap = plan.outputs[0]?.quantity ?? 0;
      expect(scrap % 2).toBe(0);
      expect(scrap).toBeLessThanOrEqual(20);
      outcomes.add(scrap);
    }
    expect(outcomes.size).toBeGreaterThan(2);
    expect(codeOf(() => salvagePlan(state, 'c', 'rock', 1, 1))).toBe('items_not_salvageable');
  });
});

describe('chance rolls', () => {
  it('are a function of the seed; a chance of 1 always succeeds and 0 never', () => {
    const chances = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 1, 0];
    for (let seed = 0; seed < 50; seed++) {
      const rolls = rollChances(seed, chances);
      expect(rollChances(seed, chances)).toEqual(rolls);
      expect(rolls[6]).toBe(true);
      expect(rolls[7]).toBe(false);
    }
    const hits = Array.from({ length: 2_000 }, (_, seed) => rollChances(seed, [0.3])[0]).filter(Boolean).length;
    expect(hits).toBeGreaterThan(500);
    expect(hits).toBeLessThan(700);
  });
});
