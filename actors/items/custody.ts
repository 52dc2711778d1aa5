import { ServiceError, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { type FlowCall, type FlowAnswer } from '../flow-call.js';
import { dropItem, heldSlots, putItem, reservedUnits, sameConfig, usageOf, type ContainerState, type Receipt } from './container-state.js';
import {
  ITEM_CONTAINER_KIND,
  itemContainerKey,
  itemsPolicy as policy,
  type ContainerConfig,
  type ContainerMessage,
  type CustodyCall,
  type ItemLock,
  type ItemRoom,
  type LockReply,
  type ReceiveReply,
  type RoomReply,
  type StoredItem,
} from './messages.js';

/**
 * Custody: what a container does for another area's flow (a handshake
 * settlement, an auction), pure logic of the `item-container` actor.
 *
 * - A **lock** keeps units of one item for a holder: they stay in the item
 *   (and count in the container's usage), but crafts take only the free
 *   units, and merge and salvage refuse a locked item (items_item_locked).
 *   Idempotent by lock id; a lock moves from held to released or
 *   transferred once. An unlock that arrives before its lock (the flow
 *   rolled back while the lock was on its way) leaves a released tombstone,
 *   so the lock is refused when it arrives and nothing stays locked.
 * - A **room** holds free slots, weight and volume for items a flow will
 *   transfer in, so the transfer cannot fail for lack of space after the
 *   flow's commit point. Same lifecycle and tombstones as a lock.
 * - A **transfer** consumes a held lock: the units leave the item (the item
 *   is removed when emptied) and, in the same commit, a `receive` carries
 *   them to the target through the outbox as a flow-call that answers the
 *   transfer's own caller (its reply_to). The receiver places them in the
 *   room held for them (or in free slots of a container made for them), and
 *   records the transfer id: a repeated receive changes nothing (besides
 *   the runtime's de-duplication by message id). So the units
 *   are in exactly one container at every commit, also across kill -9: the
 *   outbox delivers the receive once in effect.
 *
 * A whole item keeps its item_id (and durability) when it moves; part of a
 * stack arrives as a new stack with an id drawn in the transfer's turn (so a
 * redelivery carries the same id). Received items never join existing
 * stacks (the owner may merge them).
 */
type Result = TurnResult<ContainerState, unknown>;

/** Locked units per item (held locks only). */
export function lockedUnits(state: ContainerState): Map<string, number> {
  const units = new Map<string, number>();
  for (const lock of state.locks.values()) if (lock.status === 'held') units.set(lock.item_id, (units.get(lock.item_id) ?? 0) + lock.quantity);
  return units;
}

/** Subkeys of the closed locks and rooms, oldest closed first (rebuilt at load). */
export function custodyClosedOrder(state: ContainerState): string[] {
  const closed: [string, number][] = [];
  for (const lock of state.locks.values()) if (lock.status !== 'held') closed.push([`l:${lock.lock_id}`, lock.closed_at_ms ?? 0]);
  for (const room of state.rooms.values()) if (room.status !== 'held') closed.push([`m:${room.room_id}`, room.closed_at_ms ?? 0]);
  for (const receipt of state.receipts.values()) closed.push([`t:${receipt.transfer_id}`, receipt.at_ms]);
  return closed.sort((a, b) => a[1] - b[1]).map(([subkey]) => subkey);
}

function writeLock(state: ContainerState, writes: RecordWrite[], lock: ItemLock): void {
  state.locks.set(lock.lock_id, lock);
  writes.push({ subkey: `l:${lock.lock_id}`, value: lock });
  if (lock.status !== 'held') remember(state, writes, `l:${lock.lock_id}`);
}

function writeRoom(state: ContainerState, writes: RecordWrite[], room: ItemRoom): void {
  state.rooms.set(room.room_id, room);
  writes.push({ subkey: `m:${room.room_id}`, value: room });
  if (room.status !== 'held') remember(state, writes, `m:${room.room_id}`);
}

/** A closed lock or room is kept for repeats; past the bound the oldest are forgotten. */
function remember(state: ContainerState, writes: RecordWrite[], subkey: string): void {
  state.closed.push(subkey);
  while (state.closed.length > policy.custody_closed_kept_max) {
    const oldest = state.closed.shift()!;
    if (oldest.startsWith('l:')) state.locks.delete(oldest.slice(2));
    else if (oldest.startsWith('m:')) state.rooms.delete(oldest.slice(2));
    else state.receipts.delete(oldest.slice(2));
    writes.push({ subkey: oldest, value: undefined });
  }
}

function closedRefusal(what: 'Lock' | 'Room', id: string, status: string): ServiceError {
  return new ServiceError('items_lock_closed', `${what} ${id} is already ${status}.`, { details: { id, status } });
}

export function stepCustody(state: ContainerState, message: CustodyCall | Extract<ContainerMessage, { op: 'receive' }> | FlowCall<CustodyCall>, context: TurnContext): Result {
  switch (message.op) {
    case 'lock':
      return lock(state, message, context);
    case 'unlock':
      return unlock(state, message.lock_id, context);
    case 'reserve_room':
      return reserveRoom(state, message, context);
    case 'release_room':
      return releaseRoom(state, message.room_id, context);
    case 'transfer':
      return transfer(state, message, null, context);
    case 'receive':
      return receive(state, message, context);
    case 'flow-call':
      return transfer(state, message.call as Extract<CustodyCall, { op: 'transfer' }>, message, context);
    default:
      return { state };
  }
}

function lock(state: ContainerState, call: Extract<CustodyCall, { op: 'lock' }>, context: TurnContext): TurnResult<ContainerState, LockReply> {
  const existing = state.locks.get(call.lock_id);
  if (existing) {
    if (existing.status !== 'held') throw closedRefusal('Lock', call.lock_id, existing.status);
    if (existing.item_id !== call.item_id || existing.quantity !== call.quantity) throw new ServiceError('conflict', `Lock ${call.lock_id} exists for another item or quantity.`);
    return { state, reply: { lock: existing, idempotent: true } };
  }
  const item = state.items.get(call.item_id);
  if (!item || state.config?.owner_id !== call.owner_id) {
    throw new ServiceError('items_item_not_found', `No item ${call.item_id} in container ${state.config?.container_id ?? '(empty)'} owned by ${call.owner_id}.`, {
      details: { item_id: call.item_id },
    });
  }
  if (item.quantity < call.quantity) {
    throw new ServiceError('items_insufficient_inputs', `Item ${call.item_id} holds ${item.quantity}, fewer than the ${call.quantity} to lock.`, {
      details: { missing: [{ definition_id: item.definition_id, required: call.quantity, available: item.quantity }] },
    });
  }
  const locked = lockedUnits(state).get(call.item_id) ?? 0;
  if (item.quantity - locked < call.quantity) {
    throw new ServiceError('items_item_locked', `Item ${call.item_id} has ${locked} of its ${item.quantity} unit(s) locked already; ${call.quantity} cannot be locked.`, {
      details: { item_id: call.item_id, locked_quantity: locked },
    });
  }
  const created: ItemLock = {
    lock_id: call.lock_id,
    item_id: call.item_id,
    quantity: call.quantity,
    holder: call.holder,
    status: 'held',
    item: { ...item },
    to_container_id: null,
    created_at_ms: context.now,
    closed_at_ms: null,
  };
  const writes: RecordWrite[] = [];
  writeLock(state, writes, created);
  return { state, reply: { lock: created, idempotent: false }, writes };
}

function unlock(state: ContainerState, lock_id: string, context: TurnContext): TurnResult<ContainerState, LockReply> {
  const existing = state.locks.get(lock_id);
  if (existing?.status === 'released') return { state, reply: { lock: existing, idempotent: true } };
  if (existing?.status === 'transferred') throw closedRefusal('Lock', lock_id, 'transferred');
  const released: ItemLock = existing
    ? { ...existing, status: 'released', closed_at_ms: context.now }
    : { lock_id, item_id: '', quantity: 0, holder: null, status: 'released', item: null, to_container_id: null, created_at_ms: context.now, closed_at_ms: context.now };
  const writes: RecordWrite[] = [];
  writeLock(state, writes, released);
  return { state, reply: { lock: released, idempotent: false }, writes };
}

function reserveRoom(state: ContainerState, call: Extract<CustodyCall, { op: 'reserve_room' }>, context: TurnContext): TurnResult<ContainerState, RoomReply> {
  const existing = state.rooms.get(call.room_id);
  if (existing) {
    if (existing.status !== 'held') throw closedRefusal('Room', call.room_id, existing.status);
    return { state, reply: { room: existing, idempotent: true } };
  }
  const { config } = call;
  if (config.owner_id !== call.owner_id) {
    throw new ServiceError('items_container_not_found', `No container ${config.container_id} owned by ${call.owner_id}.`, { details: [{ field: 'body.receive_container_id', message: 'is not a container you own' }] });
  }
  const usage = usageOf(state);
  const weight_m = call.units.reduce((sum, unit) => sum + unit.weight_m, 0);
  const volume_m = call.units.reduce((sum, unit) => sum + unit.volume_m, 0);
  const occupied = heldSlots(state);
  for (const item of state.items.values()) occupied.add(item.slot);
  const free: number[] = [];
  for (let slot = 0; slot < config.slots && free.length < call.units.length; slot++) if (!occupied.has(slot)) free.push(slot);
  const refuse = (limit: 'slots' | 'weight' | 'volume', needed: number, available: number) => {
    const show = (value: number) => (limit === 'slots' ? value : value / policy.measure_scale);
    return new ServiceError('items_capacity_exceeded', `Container ${config.container_id} cannot take the items: not enough ${limit} (needs ${show(needed)}, has ${show(available)} free).`, {
      details: { limit, needed: show(needed), available: show(Math.max(0, available)), container_id: config.container_id },
    });
  };
  if (free.length < call.units.length) throw refuse('slots', call.units.length, config.slots - occupied.size);
  if (config.max_weight_m !== null && usage.weight_m + weight_m > config.max_weight_m) throw refuse('weight', weight_m, config.max_weight_m - usage.weight_m);
  if (config.max_volume_m !== null && usage.volume_m + volume_m > config.max_volume_m) throw refuse('volume', volume_m, config.max_volume_m - usage.volume_m);
  const room: ItemRoom = { room_id: call.room_id, slots: free, weight_m, volume_m, holder: call.holder, status: 'held', created_at_ms: context.now, closed_at_ms: null };
  const writes: RecordWrite[] = [];
  if (!sameConfig(state.config, config)) {
    state.config = config;
    writes.push({ subkey: 'c', value: config });
  }
  writeRoom(state, writes, room);
  return { state, reply: { room, idempotent: false }, writes };
}

function releaseRoom(state: ContainerState, room_id: string, context: TurnContext): TurnResult<ContainerState, RoomReply> {
  const existing = state.rooms.get(room_id);
  if (existing?.status === 'released') return { state, reply: { room: existing, idempotent: true } };
  if (existing?.status === 'transferred') throw closedRefusal('Room', room_id, 'transferred');
  const released: ItemRoom = existing
    ? { ...existing, status: 'released', closed_at_ms: context.now }
    : { room_id, slots: [], weight_m: 0, volume_m: 0, holder: null, status: 'released', created_at_ms: context.now, closed_at_ms: context.now };
  const writes: RecordWrite[] = [];
  writeRoom(state, writes, released);
  return { state, reply: { room: released, idempotent: false }, writes };
}

/** The answer a transfer's caller gets from this container (a refusal, or a repeat of a transfer already sent). */
function answerTo(call: FlowCall<CustodyCall> | null, outcome: { ok: true; reply: unknown } | { ok: false; error: { code: ServiceError['code']; message: string; details?: unknown } }) {
  if (!call) return [];
  const { reply_to } = call;
  return [{ kind: reply_to.kind, key: reply_to.key, message: { op: 'flow-answer', flow_id: reply_to.flow_id, step: reply_to.step, ...outcome } as FlowAnswer }];
}

function transfer(state: ContainerState, call: Extract<CustodyCall, { op: 'transfer' }>, asked: FlowCall<CustodyCall> | null, context: TurnContext): Result {
  const existing = state.locks.get(call.lock_id);
  if (!existing || existing.status !== 'held') {
    if (existing?.status === 'transferred') {
      // Sent before (its receive answers the caller); a repeated call changes nothing.
      return { state, reply: { transferred: false, lock: existing } };
    }
    const error = existing ? closedRefusal('Lock', call.lock_id, existing.status) : new ServiceError('items_lock_closed', `No lock ${call.lock_id} in this container.`, { details: { id: call.lock_id, status: 'unknown' } });
    if (!asked) throw error;
    return { state, reply: { refused: error.code }, sends: answerTo(asked, { ok: false, error: { code: error.code, message: error.message, details: error.details } }) };
  }
  const item = state.items.get(existing.item_id)!;
  const writes: RecordWrite[] = [];
  const whole = item.quantity === existing.quantity;
  // A craft's reservation holding units of this stack brings them back under its id if the craft is refused
  // (release): the stack is then not whole, and what leaves is a new stack, so no id is ever in two containers.
  const keepsId = whole && !reservedUnits(state).has(item.item_id);
  const moved: StoredItem = { ...item, quantity: existing.quantity, item_id: keepsId ? item.item_id : context.newId('itm_'), updated_at_ms: context.now };
  if (whole) dropItem(state, writes, item.item_id);
  else putItem(state, writes, { ...item, quantity: item.quantity - existing.quantity, updated_at_ms: context.now });
  writeLock(state, writes, { ...existing, status: 'transferred', to_container_id: call.to.container_id, closed_at_ms: context.now });
  const [tenant, domain] = JSON.parse(context.key) as [string, string, string];
  const receive: ContainerMessage = { op: 'receive', transfer_id: call.lock_id, room_id: call.to.room_id, config: call.to.config, items: [moved] };
  const target = itemContainerKey(tenant, domain, call.to.container_id);
  const send = asked
    ? { kind: ITEM_CONTAINER_KIND, key: target, message: { op: 'flow-call', call: receive, reply_to: asked.reply_to } satisfies FlowCall<ContainerMessage> }
    : { kind: ITEM_CONTAINER_KIND, key: target, message: receive };
  return { state, reply: { transferred: true, item: moved }, writes, sends: [send] };
}

function receive(state: ContainerState, message: Extract<ContainerMessage, { op: 'receive' }>, context: TurnContext): TurnResult<ContainerState, ReceiveReply> {
  const config: ContainerConfig = message.config;
  const receipt = state.receipts.get(message.transfer_id);
  if (receipt) {
    const items = receipt.item_ids.map((item_id) => state.items.get(item_id)).filter((item): item is StoredItem => item !== undefined);
    return { state, reply: { transfer_id: message.transfer_id, container_id: config.container_id, items, idempotent: true } };
  }
  const writes: RecordWrite[] = [];
  if (!sameConfig(state.config, config)) {
    state.config = config;
    writes.push({ subkey: 'c', value: config });
  }
  const room = message.room_id === null ? undefined : state.rooms.get(message.room_id);
  const slots: number[] = [];
  if (room?.status === 'held') {
    slots.push(...room.slots);
    writeRoom(state, writes, { ...room, status: 'transferred', closed_at_ms: context.now });
  }
  // Without a held room (a container made for the transfer) the lowest free slots; past the
  // slot count only if the caller broke its promise of room (the items are never dropped).
  const occupied = heldSlots(state);
  for (const item of state.items.values()) occupied.add(item.slot);
  for (let slot = 0; slots.length < message.items.length; slot++) if (!occupied.has(slot) && !slots.includes(slot)) slots.push(slot);
  // Never dropped: an arriving id already here (which custody does not let happen) is placed under a new id.
  const placed = message.items.map((item, index) => ({
    ...item,
    item_id: state.items.has(item.item_id) ? context.newId('itm_') : item.item_id,
    slot: slots[index],
    updated_at_ms: context.now,
  }));
  for (const item of placed) putItem(state, writes, item);
  const received: Receipt = { transfer_id: message.transfer_id, item_ids: placed.map((item) => item.item_id), at_ms: context.now };
  state.receipts.set(received.transfer_id, received);
  writes.push({ subkey: `t:${received.transfer_id}`, value: received });
  remember(state, writes, `t:${received.transfer_id}`);
  return { state, reply: { transfer_id: message.transfer_id, container_id: config.container_id, items: placed, idempotent: false }, writes };
}
