import { ServiceError, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall, type FlowCall } from '../flow-call.js';
import {
  itemsPolicy,
  type ContainerConfig,
  type ContainerMessage,
  type ContainerUsage,
  type ContentsView,
  type CustodyCall,
  type ItemLock,
  type ItemRoom,
  type MergeReply,
  type Placement,
  type PlaceReply,
  type QuantityOf,
  type SalvagePlan,
  type SalvageReply,
  type StoredItem,
} from './messages.js';
import { planPlacement } from './placement.js';
import type { ContainerFlow } from './flows.js';
import { custodyClosedOrder, lockedUnits, stepCustody } from './custody.js';

/**
 * One container's items: pure domain logic of the `item-container` actor
 * (storage `records`, key = itemContainerKey(tenant, domain, container_id)).
 *
 * Records: `c` (the config as of the last placement; the catalog owns it and
 * sends it with every placement), `i:<item_id>` (an item or stack),
 * `r:<flow_id>` (the inputs a craft in progress has taken out of use),
 * `f:<flow_id>` (a grant or craft this container coordinates, flows.ts),
 * `l:<lock_id>` (units locked for another area's flow), `m:<room_id>`
 * (room held for arriving items) and `t:<transfer_id>` (a transfer
 * received), all custody.ts.
 *
 * A reservation takes quantities out of their stacks at once (they are no
 * longer listed and cannot be taken twice), but they still count toward the
 * weight and volume, and a stack it emptied keeps its slot, until the craft
 * commits (the quantities are gone) or releases (they come back to their
 * stacks, or to their slot). So a release always fits, and a craft in
 * progress never lets another placement overfill the container.
 */
export interface Reservation {
  flow_id: string;
  /** What was taken from which item, with the item as it was (to restore an emptied stack). */
  taken: { item: StoredItem; quantity: number }[];
}

export interface Receipt {
  transfer_id: string;
  item_ids: string[];
  at_ms: number;
}

export interface ContainerState {
  config: ContainerConfig | null;
  items: Map<string, StoredItem>;
  reservations: Map<string, Reservation>;
  /** Grants and crafts this container coordinates (flows.ts), by flow id. */
  flows: Map<string, ContainerFlow>;
  /** Locks by lock id, held and the newest closed ones (custody.ts). */
  locks: Map<string, ItemLock>;
  /** Rooms by room id, held and the newest closed ones (custody.ts). */
  rooms: Map<string, ItemRoom>;
  /** Transfers received, by transfer id (custody.ts): a repeated arrival changes nothing. */
  receipts: Map<string, Receipt>;
  /** Subkeys of closed locks and rooms and of receipts, oldest first (pruned past custody_closed_kept_max). */
  closed: string[];
}

type Result = TurnResult<ContainerState, unknown>;

export function initialContainerState(): ContainerState {
  return { config: null, items: new Map(), reservations: new Map(), flows: new Map(), locks: new Map(), rooms: new Map(), receipts: new Map(), closed: [] };
}

export function loadContainer(_key: string, records: Iterable<[string, unknown]>): ContainerState {
  const state = initialContainerState();
  for (const [subkey, value] of records) {
    if (subkey === 'c') state.config = value as ContainerConfig;
    else if (subkey.startsWith('i:')) state.items.set(subkey.slice(2), value as StoredItem);
    else if (subkey.startsWith('r:')) state.reservations.set(subkey.slice(2), value as Reservation);
    else if (subkey.startsWith('f:')) state.flows.set(subkey.slice(2), value as ContainerFlow);
    else if (subkey.startsWith('l:')) state.locks.set(subkey.slice(2), value as ItemLock);
    else if (subkey.startsWith('m:')) state.rooms.set(subkey.slice(2), value as ItemRoom);
    else if (subkey.startsWith('t:')) state.receipts.set(subkey.slice(2), value as Receipt);
  }
  state.closed = custodyClosedOrder(state);
  return state;
}

/** Slots held by reservations for stacks they emptied, and by rooms for arriving items. */
export function heldSlots(state: ContainerState): Set<number> {
  const held = new Set<number>();
  for (const room of state.rooms.values()) if (room.status === 'held') for (const slot of room.slots) held.add(slot);
  for (const reservation of state.reservations.values()) {
    for (const { item } of reservation.taken) if (!state.items.has(item.item_id)) held.add(item.slot);
  }
  return held;
}

/** Units of each stack that reservations took (they come back on release). */
export function reservedUnits(state: ContainerState): Map<string, number> {
  const units = new Map<string, number>();
  for (const reservation of state.reservations.values()) {
    for (const { item, quantity } of reservation.taken) units.set(item.item_id, (units.get(item.item_id) ?? 0) + quantity);
  }
  return units;
}

/** Slots, weight and volume in use, reservations and held rooms included. */
export function usageOf(state: ContainerState): ContainerUsage {
  let weight_m = 0;
  let volume_m = 0;
  for (const item of state.items.values()) {
    weight_m += item.quantity * item.unit_weight_m;
    volume_m += item.quantity * item.unit_volume_m;
  }
  for (const reservation of state.reservations.values()) {
    for (const { item, quantity } of reservation.taken) {
      weight_m += quantity * item.unit_weight_m;
      volume_m += quantity * item.unit_volume_m;
    }
  }
  for (const room of state.rooms.values()) {
    if (room.status !== 'held') continue;
    weight_m += room.weight_m;
    volume_m += room.volume_m;
  }
  const slots = new Set(heldSlots(state));
  for (const item of state.items.values()) slots.add(item.slot);
  return { slots_used: slots.size, weight_m, volume_m };
}

export function sortedItems(state: ContainerState): StoredItem[] {
  return [...state.items.values()].sort((a, b) => a.slot - b.slot || (a.item_id < b.item_id ? -1 : 1));
}

export function putItem(state: ContainerState, writes: RecordWrite[], item: StoredItem): void {
  state.items.set(item.item_id, item);
  writes.push({ subkey: `i:${item.item_id}`, value: item });
}

export function dropItem(state: ContainerState, writes: RecordWrite[], item_id: string): void {
  state.items.delete(item_id);
  writes.push({ subkey: `i:${item_id}`, value: undefined });
}

export function stepContainer(state: ContainerState, message: ContainerMessage | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'contents':
      return {
        state,
        reply: { config: state.config, items: sortedItems(state), usage: usageOf(state), locks: [...state.locks.values()].filter((lock) => lock.status === 'held') } satisfies ContentsView,
      };
    case 'lock':
    case 'unlock':
    case 'reserve_room':
    case 'release_room':
    case 'transfer':
    case 'receive':
      return stepCustody(state, message, context);
    case 'place':
      return place(state, message.config, message.placements, context);
    case 'reserve':
      return reserve(state, message.flow_id, message.inputs);
    case 'craft_in_place':
      return craftInPlace(state, message.inputs, message.config, message.placements, context);
    case 'commit': {
      if (!state.reservations.has(message.flow_id)) return { state, reply: { committed: false } };
      state.reservations.delete(message.flow_id);
      return { state, reply: { committed: true }, writes: [{ subkey: `r:${message.flow_id}`, value: undefined }] };
    }
    case 'release':
      return release(state, message.flow_id, context.now);
    case 'merge':
      return merge(state, message.source_item_id, message.target_item_id, message.quantity, context.now);
    case 'salvage':
      return salvage(state, message.item_id, message.plan, context);
    case 'flow-call':
      // A transfer is answered by its target (the receive it forwards the caller's reply_to with).
      if ((message.call as { op?: string }).op === 'transfer') return stepCustody(state, message as FlowCall<CustodyCall>, context);
      return answerFlowCall(stepContainer, state, message as never, context);
    default:
      return { state };
  }
}

function lockedRefusal(item_id: string, locked: number): ServiceError {
  return new ServiceError('items_item_locked', `Item ${item_id} has ${locked} unit(s) locked by a trade or an auction; they cannot be moved, merged, salvaged or crafted until the lock is released.`, {
    details: { item_id, locked_quantity: locked },
  });
}

export function sameConfig(a: ContainerConfig | null, b: ContainerConfig): boolean {
  return (
    a !== null &&
    a.container_id === b.container_id &&
    a.owner_id === b.owner_id &&
    a.parent_container_id === b.parent_container_id &&
    a.slots === b.slots &&
    a.max_weight_m === b.max_weight_m &&
    a.max_volume_m === b.max_volume_m
  );
}

function place(state: ContainerState, config: ContainerConfig, placements: Extract<ContainerMessage, { op: 'place' }>['placements'], context: TurnContext): Result {
  const plan = planPlacement(config, state.items.values(), heldSlots(state), reservedUnits(state), usageOf(state), placements, context.now, () => context.newId('itm_'), itemsPolicy.measure_scale);
  const writes: RecordWrite[] = [];
  if (!sameConfig(state.config, config)) {
    state.config = config;
    writes.push({ subkey: 'c', value: config });
  }
  for (const item of plan.items) putItem(state, writes, item);
  return { state, reply: { items: plan.items, owner_id: config.owner_id, locked_item_ids: lockedAmong(state, plan.items) } satisfies PlaceReply, writes };
}

function reserve(state: ContainerState, flow_id: string, inputs: QuantityOf[]): Result {
  if (state.reservations.has(flow_id)) return { state, reply: { reserved: inputs } };
  const writes: RecordWrite[] = [];
  // Refused (items_insufficient_inputs) before anything is taken.
  const { taken, required } = takeInputs(state, writes, inputs);
  const reservation: Reservation = { flow_id, taken };
  state.reservations.set(flow_id, reservation);
  writes.push({ subkey: `r:${flow_id}`, value: reservation });
  return { state, reply: { reserved: required }, writes };
}

/**
 * Takes a craft's inputs out of their stacks (the lowest slots first), all or
 * nothing: every input is checked before anything is taken
 * (items_insufficient_inputs). Locked units are not there for crafts: only
 * the free part of each stack counts and is taken, so a locked stack is never
 * emptied.
 */
function takeInputs(state: ContainerState, writes: RecordWrite[], inputs: QuantityOf[]): { taken: Reservation['taken']; required: QuantityOf[] } {
  const locked = lockedUnits(state);
  const items = sortedItems(state)
    .map((item) => ({ ...item, quantity: item.quantity - (locked.get(item.item_id) ?? 0) }))
    .filter((item) => item.quantity > 0);
  const missing: { definition_id: string; required: number; available: number }[] = [];
  const required = new Map<string, number>();
  for (const input of inputs) required.set(input.definition_id, (required.get(input.definition_id) ?? 0) + input.quantity);
  for (const [definition_id, quantity] of required) {
    const available = items.filter((item) => item.definition_id === definition_id).reduce((sum, item) => sum + item.quantity, 0);
    if (available < quantity) missing.push({ definition_id, required: quantity, available });
  }
  if (missing.length > 0) {
    const names = missing.map((entry) => `${entry.definition_id} (needs ${entry.required}, has ${entry.available})`).join(', ');
    throw new ServiceError('items_insufficient_inputs', `The source container lacks the inputs: ${names}. Nothing was consumed.`, { details: { missing } });
  }
  const taken: Reservation['taken'] = [];
  for (const [definition_id, quantity] of required) {
    let remaining = quantity;
    for (const item of items) {
      if (remaining === 0) break;
      if (item.definition_id !== definition_id) continue;
      const current = state.items.get(item.item_id)!;
      const take = Math.min(item.quantity, remaining);
      taken.push({ item: current, quantity: take });
      remaining -= take;
      if (take === current.quantity) dropItem(state, writes, current.item_id);
      else putItem(state, writes, { ...current, quantity: current.quantity - take });
    }
  }
  return { taken, required: [...required].map(([definition_id, quantity]) => ({ definition_id, quantity })) };
}

/**
 * A craft whose source is also its target, in one turn, all or nothing: the
 * inputs leave and the outputs are placed in the container as it is after
 * the removal, so the slots, weight and volume the inputs free count (as for
 * salvage). Nothing is reserved (no step waits between the two), so there is
 * no compensation to run and nothing that could come back twice. Both checks
 * run on a copy first: missing inputs (items_insufficient_inputs) or no room
 * (items_capacity_exceeded) refuse before anything changes. Other crafts'
 * reservations, held rooms and locked units keep their room and their units.
 */
function craftInPlace(state: ContainerState, inputs: QuantityOf[], config: ContainerConfig, placements: Placement[], context: TurnContext): Result {
  const after: ContainerState = { ...state, items: new Map(state.items) };
  const writes: RecordWrite[] = [];
  takeInputs(after, writes, inputs);
  const plan = planPlacement(config, after.items.values(), heldSlots(after), reservedUnits(after), usageOf(after), placements, context.now, () => context.newId('itm_'), itemsPolicy.measure_scale);
  // Both checks passed: the copy's items become the container's.
  state.items = after.items;
  if (!sameConfig(state.config, config)) {
    state.config = config;
    writes.push({ subkey: 'c', value: config });
  }
  for (const item of plan.items) putItem(state, writes, item);
  return { state, reply: { items: plan.items, owner_id: config.owner_id, locked_item_ids: lockedAmong(state, plan.items) } satisfies PlaceReply, writes };
}

/** Ids of these items that have units locked (held locks): their view shows `state: "locked"`. */
export function lockedAmong(state: ContainerState, items: readonly StoredItem[]): string[] {
  const locked = lockedUnits(state);
  return items.filter((item) => locked.has(item.item_id)).map((item) => item.item_id);
}

function release(state: ContainerState, flow_id: string, now: number): Result {
  const reservation = state.reservations.get(flow_id);
  if (!reservation) return { state, reply: { released: false } };
  const writes: RecordWrite[] = [];
  state.reservations.delete(flow_id);
  writes.push({ subkey: `r:${flow_id}`, value: undefined });
  for (const { item, quantity } of reservation.taken) {
    const current = state.items.get(item.item_id);
    // A stack still there takes its units back: placements and merges left
    // room for them (reservedUnits), so it never passes max_stack.
    if (current) putItem(state, writes, { ...current, quantity: current.quantity + quantity, updated_at_ms: now });
    else putItem(state, writes, { ...item, quantity, updated_at_ms: now });
  }
  return { state, reply: { released: true }, writes };
}

function merge(state: ContainerState, source_item_id: string, target_item_id: string, quantity: number | null, now: number): Result {
  const source = state.items.get(source_item_id);
  const target = state.items.get(target_item_id);
  if (!source || !target) {
    throw new ServiceError('items_item_not_found', `No item ${!source ? source_item_id : target_item_id} in this container.`);
  }
  if (source_item_id === target_item_id) {
    throw new ServiceError('items_merge_incompatible', 'source_item_id and target_item_id are the same stack.');
  }
  const locked = lockedUnits(state);
  for (const item_id of [source_item_id, target_item_id]) if (locked.has(item_id)) throw lockedRefusal(item_id, locked.get(item_id)!);
  const compatible =
    source.definition_id === target.definition_id &&
    source.durability === null &&
    target.durability === null &&
    source.max_stack > 1 &&
    source.max_stack === target.max_stack &&
    source.unit_weight_m === target.unit_weight_m &&
    source.unit_volume_m === target.unit_volume_m;
  if (!compatible) {
    throw new ServiceError(
      'items_merge_incompatible',
      'Only two stacks of the same stackable definition (no durability, placed with the same max_stack, weight and volume) merge.',
    );
  }
  if (quantity !== null && quantity > source.quantity) {
    throw new ServiceError('BAD_REQUEST', `quantity ${quantity} is more than the source stack holds (${source.quantity}).`, {
      details: [{ field: 'body.quantity', message: 'is more than the source stack holds' }],
    });
  }
  const room = target.max_stack - target.quantity - (reservedUnits(state).get(target.item_id) ?? 0);
  if (room <= 0) throw new ServiceError('items_stack_full', `The target stack is full (${target.quantity} of ${target.max_stack}).`);
  const moved = Math.min(quantity ?? source.quantity, room);
  const writes: RecordWrite[] = [];
  const grown = { ...target, quantity: target.quantity + moved, updated_at_ms: now };
  putItem(state, writes, grown);
  let left: StoredItem | null = null;
  if (moved === source.quantity) dropItem(state, writes, source.item_id);
  else {
    left = { ...source, quantity: source.quantity - moved, updated_at_ms: now };
    putItem(state, writes, left);
  }
  return { state, reply: { moved, source: left, target: grown, config: state.config } satisfies MergeReply, writes };
}

/**
 * Salvage: the units leave the item and the plan's outputs are placed in
 * this container, in one turn, all or nothing. The placement is planned on
 * the container as it would be after the removal (so the freed room counts),
 * and refused (items_capacity_exceeded) before anything changes.
 */
function salvage(state: ContainerState, item_id: string, plan: SalvagePlan, context: TurnContext): Result {
  const item = state.items.get(item_id);
  if (!item) throw new ServiceError('items_item_not_found', `No item ${item_id} in this container.`);
  if (item.definition_id !== plan.definition_id) throw new ServiceError('conflict', 'The item changed while its salvage was planned; retry.');
  const locked = lockedUnits(state).get(item_id);
  if (locked !== undefined) throw lockedRefusal(item_id, locked);
  if (item.quantity < plan.quantity) {
    throw new ServiceError('items_insufficient_inputs', `The item holds ${item.quantity}, fewer than the ${plan.quantity} to salvage. Nothing was salvaged.`, {
      details: { missing: [{ definition_id: item.definition_id, required: plan.quantity, available: item.quantity }] },
    });
  }
  const left = item.quantity - plan.quantity;
  const remaining: StoredItem | null = left === 0 ? null : { ...item, quantity: left, updated_at_ms: context.now };
  // The container as it would be after the removal.
  const after: ContainerState = { ...state, items: new Map(state.items) };
  if (remaining) after.items.set(item_id, remaining);
  else after.items.delete(item_id);
  const plan_ = planPlacement(plan.container, after.items.values(), heldSlots(after), reservedUnits(after), usageOf(after), plan.outputs, context.now, () => context.newId('itm_'), itemsPolicy.measure_scale);
  const writes: RecordWrite[] = [];
  if (remaining) putItem(state, writes, remaining);
  else dropItem(state, writes, item_id);
  if (!sameConfig(state.config, plan.container)) {
    state.config = plan.container;
    writes.push({ subkey: 'c', value: plan.container });
  }
  for (const placed of plan_.items) putItem(state, writes, placed);
  const reply: SalvageReply = {
    consumed: { item_id, definition_id: item.definition_id, quantity: plan.quantity },
    remaining,
    produced: plan_.items,
    locked_item_ids: lockedAmong(state, plan_.items),
    config: plan.container,
  };
  return { state, reply, writes };
}
