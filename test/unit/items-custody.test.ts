import { describe, expect, it } from 'vitest';
import { initialContainerState, loadContainer, stepContainer, usageOf, type ContainerState } from '../../actors/items/container-state.js';
import { ITEM_CONTAINER_KIND, itemContainerKey, type ContainerConfig, type ContainerMessage, type PlacementUnit, type StoredItem } from '../../actors/items/messages.js';
import type { TurnResult } from '../../runtime/index.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/**
 * Custody of items for other areas' flows (actors/items/custody.ts): locks
 * (idempotent, tombstoned when released first), what a lock forbids, rooms,
 * and a transfer that moves exactly the locked units once.
 */
const ore: PlacementUnit = { definition_id: 'ore', stackable: true, max_stack: 50, weight_m: 1_000, volume_m: 0, durability: null, collection_tags: [] };
const sword: PlacementUnit = { definition_id: 'sword', stackable: false, max_stack: 1, weight_m: 5_000, volume_m: 0, durability: { current: 7, max: 10 }, collection_tags: [] };

function config(container_id: string, owner_id: string, slots = 4, max_weight_m: number | null = null): ContainerConfig {
  return { container_id, kind: 'slotted', owner_id, parent_container_id: null, slots, max_weight_m, max_volume_m: null, created_at_ms: 0 };
}

const holder = { area: 'test', ref: 'flow-1' };

/** One container with its records (rebuilt after every turn, as the runtime would load them). */
class Box {
  state: ContainerState = initialContainerState();
  records = new Map<string, unknown>();
  constructor(readonly id: string) {}

  step(message: ContainerMessage): TurnResult<ContainerState, any> {
    const result = stepContainer(this.state, message, fixedContext(1_000, ITEM_CONTAINER_KIND, itemContainerKey('t', 'd', this.id)));
    for (const write of result.writes ?? []) {
      if (write.value === undefined) this.records.delete(write.subkey);
      else this.records.set(write.subkey, write.value);
    }
    this.state = loadContainer('', [...this.records].sort(([a], [b]) => (a < b ? -1 : 1)));
    return result;
  }

  items(): StoredItem[] {
    return [...this.state.items.values()];
  }
}

function filled(id: string, owner: string): Box {
  const box = new Box(id);
  box.step({ op: 'place', config: config(id, owner), placements: [{ unit: ore, quantity: 30 }, { unit: sword, quantity: 1 }] });
  return box;
}

describe('items custody: locks', () => {
  it('locks units of a stack once per lock id; another owner or too many units is refused', () => {
    const box = filled('bag', 'alice');
    const stack = box.items().find((item) => item.definition_id === 'ore')!;
    expect(codeOf(() => box.step({ op: 'lock', lock_id: 'L1', item_id: stack.item_id, quantity: 10, owner_id: 'bob', holder }))).toBe('items_item_not_found');
    expect(codeOf(() => box.step({ op: 'lock', lock_id: 'L1', item_id: stack.item_id, quantity: 31, owner_id: 'alice', holder }))).toBe('items_insufficient_inputs');
    const first = box.step({ op: 'lock', lock_id: 'L1', item_id: stack.item_id, quantity: 10, owner_id: 'alice', holder });
    expect(first.reply.idempotent).toBe(false);
    expect(box.step({ op: 'lock', lock_id: 'L1', item_id: stack.item_id, quantity: 10, owner_id: 'alice', holder }).reply.idempotent).toBe(true);
    expect(codeOf(() => box.step({ op: 'lock', lock_id: 'L2', item_id: stack.item_id, quantity: 21, owner_id: 'alice', holder }))).toBe('items_item_locked');
    box.step({ op: 'lock', lock_id: 'L2', item_id: stack.item_id, quantity: 20, owner_id: 'alice', holder });
    const contents = box.step({ op: 'contents' }).reply;
    expect(contents.locks.map((lock: { lock_id: string }) => lock.lock_id).sort()).toEqual(['L1', 'L2']);
  });

  it('a locked item cannot be merged, salvaged or crafted away; crafts take only free units', () => {
    const box = filled('bag', 'alice');
    box.step({ op: 'place', config: config('bag', 'alice'), placements: [{ unit: { ...ore, max_stack: 50 }, quantity: 25 }] });
    const [a, b] = box.items().filter((item) => item.definition_id === 'ore');
    box.step({ op: 'lock', lock_id: 'L1', item_id: a.item_id, quantity: 40, owner_id: 'alice', holder });
    expect(codeOf(() => box.step({ op: 'merge', source_item_id: b.item_id, target_item_id: a.item_id, quantity: null }))).toBe('items_item_locked');
    expect(codeOf(() => box.step({ op: 'merge', source_item_id: a.item_id, target_item_id: b.item_id, quantity: 1 }))).toBe('items_item_locked');
    // 55 ore, 40 locked: 15 free.
    expect(codeOf(() => box.step({ op: 'reserve', flow_id: 'craft', inputs: [{ definition_id: 'ore', quantity: 16 }] }))).toBe('items_insufficient_inputs');
    box.step({ op: 'reserve', flow_id: 'craft', inputs: [{ definition_id: 'ore', quantity: 15 }] });
    expect(box.state.items.get(a.item_id)!.quantity).toBe(40);
    box.step({ op: 'commit', flow_id: 'craft' });
    expect(box.state.items.get(a.item_id)!.quantity).toBe(40);
  });

  it('a placement topping up a partly locked stack names it locked in its reply; the lock stays', () => {
    const box = filled('bag', 'alice');
    const stack = box.items().find((item) => item.definition_id === 'ore')!;
    box.step({ op: 'lock', lock_id: 'L1', item_id: stack.item_id, quantity: 4, owner_id: 'alice', holder });
    const topped = box.step({ op: 'place', config: config('bag', 'alice'), placements: [{ unit: ore, quantity: 1 }] }).reply;
    expect(topped.items).toMatchObject([{ item_id: stack.item_id, quantity: 31 }]);
    expect(topped.locked_item_ids).toEqual([stack.item_id]);
    const contents = box.step({ op: 'contents' }).reply;
    expect(contents.locks).toMatchObject([{ lock_id: 'L1', item_id: stack.item_id, quantity: 4, status: 'held' }]);
    // A placement touching only free items names none.
    expect(box.step({ op: 'place', config: config('bag', 'alice'), placements: [{ unit: sword, quantity: 1 }] }).reply.locked_item_ids).toEqual([]);
    // Unlocked, the same top-up is free again.
    box.step({ op: 'unlock', lock_id: 'L1' });
    expect(box.step({ op: 'place', config: config('bag', 'alice'), placements: [{ unit: ore, quantity: 1 }] }).reply.locked_item_ids).toEqual([]);
  });

  it('a craft in place consumes only the free units of a locked stack, and the lock keeps its units', () => {
    const box = filled('bag', 'alice');
    const stack = box.items().find((item) => item.definition_id === 'ore')!;
    box.step({ op: 'lock', lock_id: 'L1', item_id: stack.item_id, quantity: 25, owner_id: 'alice', holder });
    const ingot: PlacementUnit = { ...ore, definition_id: 'ingot' };
    const craft = (quantity: number) => box.step({ op: 'craft_in_place', inputs: [{ definition_id: 'ore', quantity }], config: config('bag', 'alice'), placements: [{ unit: ingot, quantity: 1 }] });
    // 30 ore, 25 locked: 5 free.
    expect(codeOf(() => craft(6))).toBe('items_insufficient_inputs');
    expect(box.state.items.get(stack.item_id)!.quantity).toBe(30);
    craft(5);
    expect(box.state.items.get(stack.item_id)!.quantity).toBe(25);
    expect(box.step({ op: 'contents' }).reply.locks).toMatchObject([{ lock_id: 'L1', quantity: 25, status: 'held' }]);
    expect(codeOf(() => craft(1))).toBe('items_insufficient_inputs');
  });

  it('unlock frees the units; an unlock before its lock leaves a tombstone that refuses the lock', () => {
    const box = filled('bag', 'alice');
    const stack = box.items().find((item) => item.definition_id === 'ore')!;
    box.step({ op: 'lock', lock_id: 'L1', item_id: stack.item_id, quantity: 30, owner_id: 'alice', holder });
    box.step({ op: 'unlock', lock_id: 'L1' });
    expect(box.step({ op: 'unlock', lock_id: 'L1' }).reply.idempotent).toBe(true);
    expect(codeOf(() => box.step({ op: 'lock', lock_id: 'L1', item_id: stack.item_id, quantity: 30, owner_id: 'alice', holder }))).toBe('items_lock_closed');
    box.step({ op: 'unlock', lock_id: 'early' });
    expect(codeOf(() => box.step({ op: 'lock', lock_id: 'early', item_id: stack.item_id, quantity: 1, owner_id: 'alice', holder }))).toBe('items_lock_closed');
    expect(box.step({ op: 'contents' }).reply.locks).toEqual([]);
  });
});

describe('items custody: rooms and transfers', () => {
  it('a room holds slots and weight against grants until the transfer lands in it', () => {
    const target = new Box('chest');
    const chest = config('chest', 'bob', 2, 10_000);
    expect(codeOf(() => target.step({ op: 'reserve_room', room_id: 'R', config: chest, owner_id: 'alice', units: [{ weight_m: 1, volume_m: 0 }], holder }))).toBe('items_container_not_found');
    expect(codeOf(() => target.step({ op: 'reserve_room', room_id: 'R', config: chest, owner_id: 'bob', units: [{ weight_m: 10_001, volume_m: 0 }], holder }))).toBe('items_capacity_exceeded');
    target.step({ op: 'reserve_room', room_id: 'R', config: chest, owner_id: 'bob', units: [{ weight_m: 5_000, volume_m: 0 }], holder });
    expect(usageOf(target.state)).toEqual({ slots_used: 1, weight_m: 5_000, volume_m: 0 });
    expect(codeOf(() => target.step({ op: 'place', config: chest, placements: [{ unit: ore, quantity: 6 }] }))).toBe('items_capacity_exceeded');
    expect(codeOf(() => target.step({ op: 'place', config: chest, placements: [{ unit: sword, quantity: 2 }] }))).toBe('items_capacity_exceeded');

    const source = filled('bag', 'alice');
    const blade = source.items().find((item) => item.definition_id === 'sword')!;
    source.step({ op: 'lock', lock_id: 'L1', item_id: blade.item_id, quantity: 1, owner_id: 'alice', holder });
    const reply_to = { kind: 'caller', key: 'k', flow_id: 'F', step: 'item:L1' };
    const sent = source.step({ op: 'flow-call', call: { op: 'transfer', lock_id: 'L1', to: { container_id: 'chest', config: chest, room_id: 'R' } }, reply_to } as never);
    expect(source.state.items.has(blade.item_id)).toBe(false);
    expect(sent.sends).toHaveLength(1);
    const receive = sent.sends![0];
    expect(receive.key).toBe(itemContainerKey('t', 'd', 'chest'));
    // A repeated transfer call sends nothing more.
    expect(source.step({ op: 'flow-call', call: { op: 'transfer', lock_id: 'L1', to: { container_id: 'chest', config: chest, room_id: 'R' } }, reply_to } as never).sends ?? []).toEqual([]);

    const landed = target.step(receive.message as ContainerMessage);
    const answer = landed.sends!.find((send) => send.kind === 'caller')!.message as { ok: boolean; reply: { items: StoredItem[] } };
    expect(answer.ok).toBe(true);
    expect(answer.reply.items[0]).toMatchObject({ item_id: blade.item_id, durability: { current: 7, max: 10 }, quantity: 1 });
    expect(usageOf(target.state)).toEqual({ slots_used: 1, weight_m: 5_000, volume_m: 0 });
    // The receive delivered twice (no outbox de-duplication here) places nothing twice.
    target.step(receive.message as ContainerMessage);
    expect(target.items()).toHaveLength(1);
  });

  it('part of a stack arrives as a new stack; the rest stays; an unlocked or unknown lock is not transferred', () => {
    const source = filled('bag', 'alice');
    const stack = source.items().find((item) => item.definition_id === 'ore')!;
    const to = { container_id: 'chest', config: config('chest', 'bob'), room_id: null };
    expect(codeOf(() => source.step({ op: 'transfer', lock_id: 'nope', to }))).toBe('items_lock_closed');
    source.step({ op: 'lock', lock_id: 'L1', item_id: stack.item_id, quantity: 12, owner_id: 'alice', holder });
    const sent = source.step({ op: 'transfer', lock_id: 'L1', to });
    expect(source.state.items.get(stack.item_id)!.quantity).toBe(18);
    expect(source.step({ op: 'contents' }).reply.locks).toEqual([]);
    expect(codeOf(() => source.step({ op: 'unlock', lock_id: 'L1' }))).toBe('items_lock_closed');
    const target = new Box('chest');
    target.step(sent.sends![0].message as ContainerMessage);
    const [arrived] = target.items();
    expect(arrived.quantity).toBe(12);
    expect(arrived.item_id).not.toBe(stack.item_id);
    // Conservation: 30 ore in all.
    expect(arrived.quantity + source.state.items.get(stack.item_id)!.quantity).toBe(30);
  });
});
