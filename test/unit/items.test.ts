import { describe, expect, it } from 'vitest';
import type { TurnContext, TurnResult } from '../../runtime/index.js';
import { initialCatalogState, type CatalogState } from '../../actors/items/catalog-state.js';
import { rollChances } from '../../actors/items/chance.js';
import { initialFirstState, stepFirst } from '../../actors/items/first-state.js';
import { stepCatalogFlows } from '../../actors/items/flows.js';
import { ITEM_CONTAINER_KIND, ITEM_FIRST_KIND, ITEM_PROGRESS_KIND, TIER_REACHED_EVENT, type CatalogMessage, type DefinitionInput } from '../../actors/items/messages.js';
import { loadProgress, stepProgress } from '../../actors/items/progress-state.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** The catalog's single turns, the grant and craft flows step by step, the first claim and the progress actor (pure). */
const KEY = JSON.stringify(['tenant-1', 'game']);
const ctx = (request_id: string | null = null): TurnContext => ({ ...fixedContext(1_000, 'item-catalog', KEY), request_id });

function def(definition_id: string, extra: Partial<DefinitionInput> = {}): DefinitionInput {
  return { definition_id, name: definition_id, max_stack: 10, weight_m: 1_000, volume_m: 0, equip_slot: null, rarity: 'common', tags: [], default_durability: null, salvage_outputs: [], ...extra };
}

function step(state: CatalogState, message: CatalogMessage, request_id: string | null = null): TurnResult<CatalogState, any> {
  return stepCatalogFlows(state, message, ctx(request_id));
}

function seeded(): CatalogState {
  let state = initialCatalogState();
  state = step(state, { op: 'definitions_create', definitions: [def('ore'), def('ingot'), def('sword', { max_stack: 1, default_durability: 50 })] }).state;
  for (const container_id of ['src', 'dst']) {
    state = step(state, { op: 'container_create', container: { container_id, owner_id: 'p1', parent_container_id: null, slots: 10, max_weight_m: null, max_volume_m: null } }).state;
  }
  return state;
}

const answer = (flow_id: string, stepName: string, outcome: { ok: true; reply: unknown } | { ok: false; error: { code: any; message: string } }): CatalogMessage =>
  ({ op: 'flow-answer', flow_id, step: stepName, ...outcome }) as CatalogMessage;

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

describe('items flows', () => {
  it('craft: reserve -> place -> commit + first claim, then the reply', () => {
    let state = seeded();
    state = step(state, { op: 'blueprint_create', blueprint: { name: 'smelt', inputs: [{ match: 'definition_id', value: 'ore', quantity: 2 }], outputs: [{ definition_id: 'ingot', quantity: 1, chance: 1, initial_durability_pct: 100 }], context_requirements: null } }).state;
    const blueprint_id = [...state.blueprints.keys()][0]!;
    const started = step(state, { op: 'craft', blueprint_id, source_container_id: 'src', target_container_id: 'dst', seed: 7 }, 'req-1');
    expect(started.defer).toBe(true);
    expect(started.sends).toHaveLength(1);
    const reserve = started.sends![0]!;
    expect(reserve.kind).toBe(ITEM_CONTAINER_KIND);
    expect(JSON.parse(reserve.key)).toEqual(['tenant-1', 'game', 'src']);
    const flow_id = (reserve.message as any).reply_to.flow_id;
    expect((reserve.message as any).call).toEqual({ op: 'reserve', flow_id, inputs: [{ definition_id: 'ore', quantity: 2 }] });

    const placed = step(started.state, answer(flow_id, 'reserve', { ok: true, reply: { reserved: [] } }));
    expect((placed.sends![0]!.message as any).call.op).toBe('place');
    const settled = step(placed.state, answer(flow_id, 'place', { ok: true, reply: { items: [{ item_id: 'i1', definition_id: 'ingot', quantity: 1 }], owner_id: 'p1' } }));
    // The commit goes one way (no answer awaited); the first claim is asked.
    expect(settled.sends!.map((send) => [send.kind, (send.message as any).op, (send.message as any).reply_to?.step])).toEqual([
      [ITEM_CONTAINER_KIND, 'commit', undefined],
      [ITEM_FIRST_KIND, 'flow-call', 'first:ingot'],
    ]);
    // A repeated (late) answer of a step already done is ignored.
    expect(step(settled.state, answer(flow_id, 'place', { ok: true, reply: { items: [], owner_id: null } })).sends).toBeUndefined();
    const done = step(settled.state, answer(flow_id, 'first:ingot', { ok: true, reply: { first: true, claimed_by: flow_id } }));
    expect(done.replies).toEqual([{ request_id: 'req-1', reply: expect.objectContaining({ global_first: true, seed: '7', consumed: [{ definition_id: 'ore', quantity: 2 }] }) }]);
    expect(done.state.flows.size).toBe(0);
    expect(done.writes).toContainEqual({ subkey: `f:${flow_id}`, value: undefined });

    // The output is known to be taken: the next craft answers right after its placement, without a claim.
    const next = step(done.state, { op: 'craft', blueprint_id, source_container_id: 'src', target_container_id: 'dst', seed: 8 }, 'req-9');
    const next_id = (next.sends![0]!.message as any).reply_to.flow_id;
    const nextPlaced = step(step(next.state, answer(next_id, 'reserve', { ok: true, reply: {} })).state, answer(next_id, 'place', { ok: true, reply: { items: [], owner_id: 'p1' } }));
    expect(nextPlaced.sends!.map((send) => (send.message as any).op)).toEqual(['commit']);
    expect(nextPlaced.replies).toEqual([{ request_id: 'req-9', reply: expect.objectContaining({ global_first: false }) }]);
  });

  it('craft: a refused placement releases the inputs, then answers the refusal', () => {
    let state = seeded();
    state = step(state, { op: 'blueprint_create', blueprint: { name: 'forge', inputs: [{ match: 'definition_id', value: 'ore', quantity: 1 }], outputs: [{ definition_id: 'sword', quantity: 1, chance: 1, initial_durability_pct: 40 }], context_requirements: null } }).state;
    const blueprint_id = [...state.blueprints.keys()][0]!;
    const started = step(state, { op: 'craft', blueprint_id, source_container_id: 'src', target_container_id: 'dst', seed: 1 }, 'req-2');
    const flow_id = (started.sends![0]!.message as any).reply_to.flow_id;
    const placing = step(started.state, answer(flow_id, 'reserve', { ok: true, reply: {} }));
    expect((placing.sends![0]!.message as any).call.placements[0].unit.durability).toEqual({ current: 20, max: 50 });
    const releasing = step(placing.state, answer(flow_id, 'place', { ok: false, error: { code: 'items_capacity_exceeded', message: 'full' } }));
    expect(releasing.sends!.map((send) => (send.message as any).call)).toEqual([{ op: 'release', flow_id }]);
    expect(releasing.replies).toBeUndefined();
    const done = step(releasing.state, answer(flow_id, 'release', { ok: true, reply: { released: true } }));
    expect(done.replies).toEqual([{ request_id: 'req-2', error: { code: 'items_capacity_exceeded', message: 'full' } }]);
  });

  it('grant: place, then the owner progress for a collection member, then a tier claim', () => {
    let state = seeded();
    state = step(state, { op: 'collection_create', collection: { name: 'metals', members: ['ore', 'ingot'], tiers: [{ required: 1, bonus_event: 'first_metal' }], duplicate_policy: 'ignore', convert_event: null } }).state;
    const started = step(state, { op: 'grant', container_id: 'src', definition_id: 'ore', quantity: 3 }, 'req-3');
    const flow_id = (started.sends![0]!.message as any).reply_to.flow_id;
    expect((started.sends![0]!.message as any).call.placements[0].unit.collection_tags).toHaveLength(1);
    const progress = step(started.state, answer(flow_id, 'place', { ok: true, reply: { items: [], owner_id: 'p1' } }));
    expect(progress.sends![0]!.kind).toBe(ITEM_PROGRESS_KIND);
    const collection_id = [...state.collections.keys()][0]!;
    const claim = step(progress.state, answer(flow_id, 'progress', { ok: true, reply: { tiers_reached: [{ collection_id, required: 1, bonus_event: 'first_metal' }] } }));
    expect(claim.sends![0]!.kind).toBe(ITEM_FIRST_KIND);
    const done = step(claim.state, answer(flow_id, `tier:${collection_id}:1`, { ok: true, reply: { first: false } }));
    expect(done.replies![0]!.reply).toMatchObject({ tier_events: [{ collection_id, required: 1, bonus_event: 'first_metal', global_first: false }] });
  });

  it('refuses unknown definitions and containers before starting anything', () => {
    const state = seeded();
    expect(codeOf(() => step(state, { op: 'grant', container_id: 'src', definition_id: 'ghost', quantity: 1 }))).toBe('items_definition_not_found');
    expect(codeOf(() => step(state, { op: 'grant', container_id: 'ghost', definition_id: 'ore', quantity: 1 }))).toBe('items_container_not_found');
    expect(state.flows.size).toBe(0);
  });
});

describe('first claim and progress', () => {
  it('the first claimant stays first; a repeat of its claim is still first', () => {
    const a = stepFirst(initialFirstState(), { op: 'claim', claimant: 'f1' }, fixedContext(5));
    expect(a.reply).toMatchObject({ first: true, claimed_by: 'f1' });
    expect(stepFirst(a.state, { op: 'claim', claimant: 'f2' }, fixedContext(6)).reply).toMatchObject({ first: false, claimed_by: 'f1' });
    expect(stepFirst(a.state, { op: 'claim', claimant: 'f1' }, fixedContext(7)).reply).toMatchObject({ first: true });
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
