import { ServiceError } from '../../runtime/index.js';
import type { ContainerConfig, ContainerUsage, Placement, StoredItem } from './messages.js';

/**
 * Where new items go in a container, all or nothing: a stackable unit tops up
 * the existing stacks of the same definition (in slot order, up to their
 * max_stack) and the rest opens new stacks in the lowest free slots; an item
 * with durability, or of a definition that does not stack, takes one slot per
 * unit. The whole placement is refused (items_capacity_exceeded, naming the
 * limit) when the slots, the weight or the volume cannot take all of it.
 *
 * Pure: the caller passes the items, the slots held by reservations and the
 * usage, and gets back the items to write.
 */
export interface PlacementPlan {
  /** Existing items with a larger quantity, and new items. */
  items: StoredItem[];
  usage: ContainerUsage;
}

/** A stack a new unit may join: same definition, same recorded measures, no durability, room left. */
function joins(item: StoredItem, placement: Placement, reserved: number): boolean {
  const { unit } = placement;
  return (
    item.definition_id === unit.definition_id &&
    item.durability === null &&
    item.unit_weight_m === unit.weight_m &&
    item.unit_volume_m === unit.volume_m &&
    item.max_stack === unit.max_stack &&
    item.quantity + reserved < item.max_stack
  );
}

export function stacksOf(placement: Placement): boolean {
  return placement.unit.stackable && placement.unit.max_stack > 1 && placement.unit.durability === null;
}

function refuse(limit: 'slots' | 'weight' | 'volume', needed: number, available: number, scale: number): ServiceError {
  const show = (value: number) => (limit === 'slots' ? value : value / scale);
  return new ServiceError('items_capacity_exceeded', `The container cannot take the items: not enough ${limit} (needs ${show(needed)}, has ${show(available)} free). Nothing was placed.`, {
    details: { limit, needed: show(needed), available: show(available) },
  });
}

export function planPlacement(
  config: ContainerConfig,
  current: Iterable<StoredItem>,
  heldSlots: ReadonlySet<number>,
  /** Units of a stack a craft in progress has reserved: they come back on release, so they keep their room. */
  reservedUnits: ReadonlyMap<string, number>,
  usage: ContainerUsage,
  requested: Placement[],
  now: number,
  newId: () => string,
  scale: number,
): PlacementPlan {
  // One placement per unit, so the slot count below is exact.
  const byUnit = new Map<string, Placement>();
  for (const placement of requested) {
    const key = JSON.stringify(placement.unit);
    const seen = byUnit.get(key);
    byUnit.set(key, { unit: placement.unit, quantity: (seen?.quantity ?? 0) + placement.quantity });
  }
  const placements = [...byUnit.values()];
  const touched = new Map<string, StoredItem>();
  const bySlot = [...current].sort((a, b) => a.slot - b.slot);
  const occupied = new Set<number>(heldSlots);
  for (const item of bySlot) occupied.add(item.slot);

  let weight_m = usage.weight_m;
  let volume_m = usage.volume_m;
  let slots_used = usage.slots_used;
  for (const placement of placements) {
    weight_m += placement.quantity * placement.unit.weight_m;
    volume_m += placement.quantity * placement.unit.volume_m;
  }
  if (config.max_weight_m !== null && weight_m > config.max_weight_m) {
    throw refuse('weight', weight_m - usage.weight_m, Math.max(0, config.max_weight_m - usage.weight_m), scale);
  }
  if (config.max_volume_m !== null && volume_m > config.max_volume_m) {
    throw refuse('volume', volume_m - usage.volume_m, Math.max(0, config.max_volume_m - usage.volume_m), scale);
  }

  // Slots: first count what the existing stacks absorb, so a refusal builds nothing.
  let newSlots = 0;
  const room = new Map<string, number>();
  for (const placement of placements) {
    let remaining = placement.quantity;
    if (stacksOf(placement)) {
      for (const item of bySlot) {
        if (remaining === 0) break;
        const reserved = reservedUnits.get(item.item_id) ?? 0;
        if (!joins(item, placement, reserved)) continue;
        const free = item.max_stack - item.quantity - reserved - (room.get(item.item_id) ?? 0);
        const take = Math.min(free, remaining);
        if (take <= 0) continue;
        room.set(item.item_id, (room.get(item.item_id) ?? 0) + take);
        remaining -= take;
      }
      newSlots += Math.ceil(remaining / placement.unit.max_stack);
    } else {
      newSlots += remaining;
    }
  }
  const freeSlots = config.slots - occupied.size;
  if (newSlots > freeSlots) throw refuse('slots', newSlots, Math.max(0, freeSlots), scale);

  let nextSlot = 0;
  const takeSlot = (): number => {
    while (occupied.has(nextSlot)) nextSlot++;
    occupied.add(nextSlot);
    return nextSlot;
  };
  const fresh = (placement: Placement, quantity: number): StoredItem => {
    const { unit } = placement;
    slots_used++;
    return {
      item_id: newId(),
      definition_id: unit.definition_id,
      quantity,
      slot: takeSlot(),
      durability: unit.durability ? { ...unit.durability } : null,
      unit_weight_m: unit.weight_m,
      unit_volume_m: unit.volume_m,
      max_stack: stacksOf(placement) ? unit.max_stack : 1,
      collection_tags: unit.collection_tags,
      created_at_ms: now,
      updated_at_ms: now,
    };
  };
  const live = new Map(bySlot.map((item) => [item.item_id, item]));
  for (const placement of placements) {
    let remaining = placement.quantity;
    if (stacksOf(placement)) {
      for (const original of bySlot) {
        if (remaining === 0) break;
        const item = live.get(original.item_id)!;
        const reserved = reservedUnits.get(item.item_id) ?? 0;
        if (!joins(item, placement, reserved)) continue;
        const take = Math.min(item.max_stack - item.quantity - reserved, remaining);
        const grown = { ...item, quantity: item.quantity + take, updated_at_ms: now };
        live.set(item.item_id, grown);
        touched.set(item.item_id, grown);
        remaining -= take;
      }
      while (remaining > 0) {
        const quantity = Math.min(placement.unit.max_stack, remaining);
        const item = fresh(placement, quantity);
        live.set(item.item_id, item);
        bySlot.push(item);
        touched.set(item.item_id, item);
        remaining -= quantity;
      }
    } else {
      for (; remaining > 0; remaining--) {
        const item = fresh(placement, 1);
        touched.set(item.item_id, item);
      }
    }
  }
  return { items: [...touched.values()], usage: { slots_used, weight_m, volume_m } };
}
