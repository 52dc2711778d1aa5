import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadContainer, initialContainerState, stepContainer, usageOf, type ContainerState } from '../../actors/items/container-state.js';
import type { ContainerConfig, ContainerMessage, Placement, PlacementUnit } from '../../actors/items/messages.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/**
 * The container's pure step under random grant / craft / merge / salvage
 * sequences, crafts in place among them (fast-check): the slot, weight and volume limits always hold,
 * every stack stays within its max_stack, and no item is duplicated or lost:
 * the total quantity per definition (in stacks and in reservations) changes
 * only by grants, committed crafts and salvage. A refused message changes nothing, and the
 * records each turn writes rebuild exactly the state it left.
 */
const units: PlacementUnit[] = [
  { definition_id: 'ore', stackable: true, max_stack: 5, weight_m: 2_000, volume_m: 500, durability: null, collection_tags: [] },
  { definition_id: 'gem', stackable: true, max_stack: 3, weight_m: 100, volume_m: 100, durability: null, collection_tags: ['c1'] },
  { definition_id: 'sword', stackable: false, max_stack: 1, weight_m: 5_000, volume_m: 2_000, durability: { current: 10, max: 10 }, collection_tags: [] },
  { definition_id: 'shield', stackable: false, max_stack: 1, weight_m: 4_000, volume_m: 3_000, durability: null, collection_tags: [] },
];
const ids = units.map((unit) => unit.definition_id);

function config(container_id: string, slots: number, max_weight_m: number | null, max_volume_m: number | null): ContainerConfig {
  return { container_id, kind: 'slotted', owner_id: null, parent_container_id: null, slots, max_weight_m, max_volume_m, created_at_ms: 0 };
}

type Command =
  | { kind: 'grant'; at: number; unit: number; quantity: number }
  | { kind: 'reserve'; at: number; inputs: { unit: number; quantity: number }[]; outputs: { unit: number; quantity: number }[] }
  | { kind: 'finish'; pick: number }
  /** A craft whose source is its target: inputs out and outputs in, one turn. */
  | { kind: 'in_place'; at: number; inputs: { unit: number; quantity: number }[]; outputs: { unit: number; quantity: number }[] }
  | { kind: 'merge'; at: number; source: number; target: number; quantity: number | null }
  | { kind: 'salvage'; at: number; pick: number; quantity: number };

/** What one unit of a definition salvages into (the property test's fixed outputs). */
const salvageOutputs: Record<string, { unit: number; quantity: number }[]> = {
  ore: [{ unit: 1, quantity: 1 }],
  sword: [{ unit: 0, quantity: 2 }, { unit: 1, quantity: 1 }],
  shield: [{ unit: 0, quantity: 3 }],
  gem: [],
};

const unitIndex = fc.integer({ min: 0, max: units.length - 1 });
const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ kind: fc.constant('grant' as const), at: fc.integer({ min: 0, max: 1 }), unit: unitIndex, quantity: fc.integer({ min: 1, max: 12 }) }),
  fc.record({
    kind: fc.constant('reserve' as const),
    at: fc.integer({ min: 0, max: 1 }),
    inputs: fc.array(fc.record({ unit: unitIndex, quantity: fc.integer({ min: 1, max: 6 }) }), { minLength: 1, maxLength: 2 }),
    outputs: fc.array(fc.record({ unit: unitIndex, quantity: fc.integer({ min: 1, max: 4 }) }), { minLength: 0, maxLength: 2 }),
  }),
  fc.record({ kind: fc.constant('finish' as const), pick: fc.nat() }),
  fc.record({
    kind: fc.constant('in_place' as const),
    at: fc.integer({ min: 0, max: 1 }),
    inputs: fc.array(fc.record({ unit: unitIndex, quantity: fc.integer({ min: 1, max: 6 }) }), { minLength: 1, maxLength: 2 }),
    outputs: fc.array(fc.record({ unit: unitIndex, quantity: fc.integer({ min: 1, max: 4 }) }), { minLength: 0, maxLength: 2 }),
  }),
  fc.record({ kind: fc.constant('merge' as const), at: fc.integer({ min: 0, max: 1 }), source: fc.nat(), target: fc.nat(), quantity: fc.option(fc.integer({ min: 1, max: 5 })) }),
  fc.record({ kind: fc.constant('salvage' as const), at: fc.integer({ min: 0, max: 1 }), pick: fc.nat(), quantity: fc.integer({ min: 1, max: 4 }) }),
);

interface World {
  configs: ContainerConfig[];
  states: ContainerState[];
  /** Records as the runtime would hold them, rebuilt into a state after every turn. */
  records: Map<string, unknown>[];
  ledger: Map<string, number>;
  crafts: { flow_id: string; source: number; target: number; inputs: { definition_id: string; quantity: number }[]; outputs: Placement[] }[];
}

let turn = 0;
function run(world: World, at: number, message: ContainerMessage): { ok: true; reply: any } | { ok: false; code: string } {
  const before = JSON.stringify(snapshot(world.states[at]!));
  const context = fixedContext(1_000 + ++turn, 'item-container', `c${at}`);
  let result;
  try {
    result = stepContainer(world.states[at]!, message, context);
  } catch (error) {
    const code = codeOf(() => {
      throw error;
    })!;
    expect(JSON.stringify(snapshot(world.states[at]!)), 'a refusal changes nothing').toBe(before);
    return { ok: false, code };
  }
  for (const write of result.writes ?? []) {
    if (write.value === undefined) world.records[at]!.delete(write.subkey);
    else world.records[at]!.set(write.subkey, structuredClone(write.value));
  }
  world.states[at] = result.state;
  const rebuilt = loadContainer('k', [...world.records[at]!].sort(([a], [b]) => (a < b ? -1 : 1)));
  expect(snapshot(rebuilt), 'the writes rebuild the state').toEqual(snapshot(result.state));
  return { ok: true, reply: result.reply };
}

function snapshot(state: ContainerState) {
  return {
    config: state.config,
    items: [...state.items.values()].sort((a, b) => (a.item_id < b.item_id ? -1 : 1)),
    reservations: [...state.reservations.values()].sort((a, b) => (a.flow_id < b.flow_id ? -1 : 1)),
  };
}

function totals(world: World): Map<string, number> {
  const sum = new Map<string, number>();
  for (const state of world.states) {
    for (const item of state.items.values()) sum.set(item.definition_id, (sum.get(item.definition_id) ?? 0) + item.quantity);
    for (const reservation of state.reservations.values()) {
      for (const { item, quantity } of reservation.taken) sum.set(item.definition_id, (sum.get(item.definition_id) ?? 0) + quantity);
    }
  }
  return sum;
}

function checkInvariants(world: World): void {
  world.states.forEach((state, index) => {
    const config = world.configs[index]!;
    const usage = usageOf(state);
    expect(usage.slots_used).toBeLessThanOrEqual(config.slots);
    if (config.max_weight_m !== null) expect(usage.weight_m).toBeLessThanOrEqual(config.max_weight_m);
    if (config.max_volume_m !== null) expect(usage.volume_m).toBeLessThanOrEqual(config.max_volume_m);
    const slots = [...state.items.values()].map((item) => item.slot);
    expect(new Set(slots).size, 'one item per slot').toBe(slots.length);
    for (const item of state.items.values()) {
      expect(item.slot).toBeGreaterThanOrEqual(0);
      expect(item.slot).toBeLessThan(config.slots);
      expect(item.quantity).toBeGreaterThanOrEqual(1);
      expect(Number.isInteger(item.quantity)).toBe(true);
      const reserved = [...state.reservations.values()].flatMap((r) => r.taken).filter((t) => t.item.item_id === item.item_id).reduce((s, t) => s + t.quantity, 0);
      expect(item.quantity + reserved).toBeLessThanOrEqual(item.max_stack);
      if (item.durability !== null) expect(item.quantity).toBe(1);
    }
  });
  const actual = totals(world);
  for (const id of ids) expect(actual.get(id) ?? 0, `total of ${id}`).toBe(world.ledger.get(id) ?? 0);
}

function apply(world: World, cmd: Command): void {
  switch (cmd.kind) {
    case 'grant': {
      const unit = units[cmd.unit]!;
      const outcome = run(world, cmd.at, { op: 'place', config: world.configs[cmd.at]!, placements: [{ unit, quantity: cmd.quantity }] });
      if (outcome.ok) world.ledger.set(unit.definition_id, (world.ledger.get(unit.definition_id) ?? 0) + cmd.quantity);
      else expect(outcome.code).toBe('items_capacity_exceeded');
      return;
    }
    case 'reserve': {
      const flow_id = `crf_${++turn}`;
      const inputs = cmd.inputs.map((input) => ({ definition_id: units[input.unit]!.definition_id, quantity: input.quantity }));
      const outcome = run(world, cmd.at, { op: 'reserve', flow_id, inputs });
      if (!outcome.ok) {
        expect(outcome.code).toBe('items_insufficient_inputs');
        return;
      }
      const outputs = cmd.outputs.map((output) => ({ unit: units[output.unit]!, quantity: output.quantity }));
      world.crafts.push({ flow_id, source: cmd.at, target: 1 - cmd.at, inputs, outputs });
      return;
    }
    case 'finish': {
      if (world.crafts.length === 0) return;
      const [craft] = world.crafts.splice(cmd.pick % world.crafts.length, 1);
      const { flow_id, source, target, inputs, outputs } = craft!;
      const placed = outputs.length === 0 ? { ok: true as const, reply: null } : run(world, target, { op: 'place', config: world.configs[target]!, placements: outputs });
      if (placed.ok) {
        expect(run(world, source, { op: 'commit', flow_id }).ok).toBe(true);
        for (const input of inputs) world.ledger.set(input.definition_id, world.ledger.get(input.definition_id)! - input.quantity);
        for (const output of outputs) world.ledger.set(output.unit.definition_id, (world.ledger.get(output.unit.definition_id) ?? 0) + output.quantity);
      } else {
        expect(placed.code).toBe('items_capacity_exceeded');
        expect(run(world, source, { op: 'release', flow_id }).ok).toBe(true);
      }
      return;
    }
    case 'in_place': {
      const inputs = cmd.inputs.map((input) => ({ definition_id: units[input.unit]!.definition_id, quantity: input.quantity }));
      const outputs = cmd.outputs.map((output) => ({ unit: units[output.unit]!, quantity: output.quantity }));
      const outcome = run(world, cmd.at, { op: 'craft_in_place', inputs, config: world.configs[cmd.at]!, placements: outputs });
      if (!outcome.ok) {
        expect(['items_insufficient_inputs', 'items_capacity_exceeded']).toContain(outcome.code);
        return;
      }
      for (const input of inputs) world.ledger.set(input.definition_id, world.ledger.get(input.definition_id)! - input.quantity);
      for (const output of outputs) world.ledger.set(output.unit.definition_id, (world.ledger.get(output.unit.definition_id) ?? 0) + output.quantity);
      return;
    }
    case 'salvage': {
      const items = [...world.states[cmd.at]!.items.values()].sort((a, b) => a.slot - b.slot);
      if (items.length === 0) return;
      const item = items[cmd.pick % items.length]!;
      const per = salvageOutputs[item.definition_id]!;
      if (per.length === 0) return;
      const outputs = per.map((output) => ({ unit: units[output.unit]!, quantity: output.quantity * cmd.quantity }));
      const plan = { container: world.configs[cmd.at]!, definition_id: item.definition_id, quantity: cmd.quantity, seed: 0, outputs };
      const outcome = run(world, cmd.at, { op: 'salvage', item_id: item.item_id, plan });
      if (!outcome.ok) {
        expect(['items_capacity_exceeded', 'items_insufficient_inputs']).toContain(outcome.code);
        return;
      }
      world.ledger.set(item.definition_id, world.ledger.get(item.definition_id)! - cmd.quantity);
      for (const output of outputs) world.ledger.set(output.unit.definition_id, (world.ledger.get(output.unit.definition_id) ?? 0) + output.quantity);
      return;
    }
    case 'merge': {
      const items = [...world.states[cmd.at]!.items.values()].sort((a, b) => a.slot - b.slot);
      if (items.length === 0) return;
      const source = items[cmd.source % items.length]!;
      const target = items[cmd.target % items.length]!;
      const outcome = run(world, cmd.at, { op: 'merge', source_item_id: source.item_id, target_item_id: target.item_id, quantity: cmd.quantity });
      if (!outcome.ok) expect(['items_merge_incompatible', 'items_stack_full', 'BAD_REQUEST']).toContain(outcome.code);
      return;
    }
  }
}

describe('item container (pure step)', () => {
  it('keeps slot, weight and volume limits and conserves items under random grant/craft/merge/salvage sequences', () => {
    fc.assert(
      fc.property(
        fc.array(command, { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 1, max: 8 }),
        fc.option(fc.integer({ min: 5_000, max: 60_000 })),
        fc.option(fc.integer({ min: 3_000, max: 40_000 })),
        (commands, slots, max_weight_m, max_volume_m) => {
          const world: World = {
            configs: [config('a', slots, max_weight_m, max_volume_m), config('b', 10, null, 30_000)],
            states: [initialContainerState(), initialContainerState()],
            records: [new Map(), new Map()],
            ledger: new Map(),
            crafts: [],
          };
          for (const cmd of commands) {
            apply(world, cmd);
            checkInvariants(world);
          }
          // Every craft still open ends; then nothing is reserved any more.
          while (world.crafts.length > 0) {
            apply(world, { kind: 'finish', pick: 0 });
            checkInvariants(world);
          }
          for (const state of world.states) expect(state.reservations.size).toBe(0);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('stacks into existing stacks first, then the lowest free slots', () => {
    const state = initialContainerState();
    const cfg = config('a', 4, null, null);
    const ore = units[0]!;
    const first = stepContainer(state, { op: 'place', config: cfg, placements: [{ unit: ore, quantity: 3 }] }, fixedContext(1));
    const second = stepContainer(first.state, { op: 'place', config: cfg, placements: [{ unit: ore, quantity: 9 }] }, fixedContext(2));
    expect((second.reply as any).items.map((item: any) => [item.slot, item.quantity])).toEqual([[0, 5], [1, 5], [2, 2]]);
  });

  it('refuses a placement naming the limit, and a reservation of missing inputs', () => {
    const cfg = config('a', 1, 1_000, null);
    const state = initialContainerState();
    expect(codeOf(() => stepContainer(state, { op: 'place', config: cfg, placements: [{ unit: units[2]!, quantity: 1 }] }, fixedContext(1)))).toBe('items_capacity_exceeded');
    expect(codeOf(() => stepContainer(state, { op: 'reserve', flow_id: 'f', inputs: [{ definition_id: 'ore', quantity: 1 }] }, fixedContext(1)))).toBe('items_insufficient_inputs');
    expect(state.items.size).toBe(0);
  });

  it('a reservation keeps its room: released units always fit back', () => {
    const cfg = config('a', 2, null, null);
    const ore = units[0]!;
    let state = stepContainer(initialContainerState(), { op: 'place', config: cfg, placements: [{ unit: ore, quantity: 10 }] }, fixedContext(1)).state;
    state = stepContainer(state, { op: 'reserve', flow_id: 'f1', inputs: [{ definition_id: 'ore', quantity: 7 }] }, fixedContext(2)).state;
    // 3 left in sight; the stack emptied by the reservation keeps its slot, and the other stack its room.
    expect(codeOf(() => stepContainer(state, { op: 'place', config: cfg, placements: [{ unit: ore, quantity: 1 }] }, fixedContext(3)))).toBe('items_capacity_exceeded');
    state = stepContainer(state, { op: 'release', flow_id: 'f1' }, fixedContext(4)).state;
    expect([...state.items.values()].map((item) => item.quantity).sort()).toEqual([5, 5]);
  });
});
