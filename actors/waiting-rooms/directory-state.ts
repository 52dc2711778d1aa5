import { ServiceError, type ActorSend, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import {
  FILTER_FIELDS,
  FILTER_OPERATORS,
  WAITING_ROOM_KIND,
  waitingRoomKey,
  type DirectoryMessage,
  type GlobalBanEntry,
  type RoomFilter,
  type RoomListQuery,
  type RoomListView,
  type RoomSummary,
} from './messages.js';

/**
 * The waiting-room directory of one tenant (a `records` actor keyed by the
 * tenant): the index behind GET /api/v1/waiting-rooms and the tenant's global
 * bans. Room actors keep it current through their outbox (`room-upsert`,
 * `room-remove`, `global-ban`, `global-unban`); each room change carries the
 * room's revision, so a late or repeated delivery never undoes a newer one.
 *
 * Records:
 *   r:<room_id>  {summary, rev}     a live room
 *   t:<room_id>  rev                a deleted room's last revision (tombstone)
 *   g:["<member_id>","<origin room>"]  banned_until (epoch-ms) or null (permanent)
 *
 * A global ban is fanned out to every other room of the tenant (each room
 * enforces it locally, so a join never waits on this actor); a room that
 * appears in the directory for the first time is sent every active global ban.
 */
export interface DirectoryState {
  rooms: Map<string, { summary: RoomSummary; rev: number }>;
  tombstones: Map<string, number>;
  /** member_id -> origin room -> banned_until. */
  globalBans: Map<string, Map<string, number | null>>;
}

export function emptyDirectory(): DirectoryState {
  return { rooms: new Map(), tombstones: new Map(), globalBans: new Map() };
}

export function loadDirectory(_key: string, records: Iterable<[string, unknown]>): DirectoryState {
  const state = emptyDirectory();
  for (const [subkey, value] of records) {
    const rest = subkey.slice(2);
    if (subkey.startsWith('r:')) state.rooms.set(rest, value as { summary: RoomSummary; rev: number });
    else if (subkey.startsWith('t:')) state.tombstones.set(rest, value as number);
    else if (subkey.startsWith('g:')) {
      const [member_id, origin] = JSON.parse(rest) as [string, string];
      setBan(state, member_id, origin, value as number | null);
    }
  }
  return state;
}

function setBan(state: DirectoryState, member_id: string, origin: string, until: number | null): void {
  let origins = state.globalBans.get(member_id);
  if (!origins) state.globalBans.set(member_id, (origins = new Map()));
  origins.set(origin, until);
}

function banKey(member_id: string, origin: string): string {
  return 'g:' + JSON.stringify([member_id, origin]);
}

function tenantOf(key: string): string {
  return (JSON.parse(key) as [string])[0];
}

function activeBans(state: DirectoryState, now: number): GlobalBanEntry[] {
  const entries: GlobalBanEntry[] = [];
  for (const [member_id, origins] of state.globalBans) {
    for (const [origin_room_id, banned_until] of origins) {
      if (banned_until === null || banned_until > now) entries.push({ member_id, origin_room_id, banned_until });
    }
  }
  return entries;
}

/** Checks a parsed filter list; throws BAD_REQUEST for an unusable one. */
export function validateFilters(filters: RoomFilter[]): void {
  for (const filter of filters) {
    const field = `querystring.filter`;
    if (filter.field === 'capacity') {
      if (filter.operator === 'contains') throw new ServiceError('BAD_REQUEST', 'capacity does not support contains', { details: [{ field, message: 'capacity does not support contains' }] });
      const values = filter.operator === 'in' ? filter.value.split('|') : [filter.value];
      if (values.some((value) => !/^-?\d+$/.test(value))) {
        throw new ServiceError('BAD_REQUEST', 'capacity filters take integer values', { details: [{ field, message: 'capacity filters take integer values' }] });
      }
    }
  }
}

function matchesFilter(summary: RoomSummary, filter: RoomFilter): boolean {
  const raw = summary[filter.field];
  if (filter.field === 'capacity') {
    const value = raw as number;
    const operands = filter.value.split('|').map(Number);
    const operand = operands[0];
    switch (filter.operator) {
      case 'eq': return value === operand;
      case 'ne': return value !== operand;
      case 'lt': return value < operand;
      case 'lte': return value <= operand;
      case 'gt': return value > operand;
      case 'gte': return value >= operand;
      case 'in': return operands.includes(value);
      default: return false;
    }
  }
  const value = String(raw);
  const operand = filter.value;
  switch (filter.operator) {
    case 'eq': return value === operand;
    case 'ne': return value !== operand;
    case 'lt': return value < operand;
    case 'lte': return value <= operand;
    case 'gt': return value > operand;
    case 'gte': return value >= operand;
    case 'contains': return value.includes(operand);
    case 'in': return operand.split('|').includes(value);
  }
}

export function listRooms(state: DirectoryState, query: RoomListQuery): RoomListView {
  const filters = query.filters ?? [];
  validateFilters(filters);
  const q = query.q?.toLowerCase();
  const sort_by = query.sort_by ?? 'created_at';
  const direction = (query.sort_order ?? 'desc') === 'asc' ? 1 : -1;
  const matched: RoomSummary[] = [];
  for (const { summary } of state.rooms.values()) {
    if (q && !summary.room_id.toLowerCase().includes(q)) continue;
    if (!filters.every((filter) => matchesFilter(summary, filter))) continue;
    matched.push(summary);
  }
  matched.sort((a, b) => direction * (a[sort_by] - b[sort_by]) || (a.room_id < b.room_id ? -1 : a.room_id > b.room_id ? 1 : 0));
  const start = (Math.max(1, query.page) - 1) * query.page_size;
  return { total: matched.length, rooms: matched.slice(start, start + query.page_size) };
}

export function stepDirectory(state: DirectoryState, message: DirectoryMessage | AlarmMessage, context: TurnContext): TurnResult<DirectoryState, unknown> {
  const now = context.now;
  const tenant = tenantOf(context.key);
  const toRoom = (room_id: string, body: unknown): ActorSend => ({ kind: WAITING_ROOM_KIND, key: waitingRoomKey(tenant, room_id), message: body });
  switch (message.op) {
    case '$alarm':
      return { state };

    case 'room-upsert': {
      const { room_id } = message.summary;
      const known = state.rooms.get(room_id);
      const lastRev = known?.rev ?? state.tombstones.get(room_id) ?? 0;
      if (message.rev <= lastRev) return { state };
      state.rooms.set(room_id, { summary: message.summary, rev: message.rev });
      const writes: RecordWrite[] = [{ subkey: 'r:' + room_id, value: { summary: message.summary, rev: message.rev } }];
      if (state.tombstones.delete(room_id)) writes.push({ subkey: 't:' + room_id, value: undefined });
      // A room new to the directory learns the tenant's global bans.
      const sends = known ? [] : [toRoom(room_id, { op: 'global-bans-sync', bans: activeBans(state, now) })];
      return { state, writes, sends };
    }

    case 'room-remove': {
      const known = state.rooms.get(message.room_id);
      const lastRev = known?.rev ?? state.tombstones.get(message.room_id) ?? 0;
      if (message.rev <= lastRev) return { state };
      state.rooms.delete(message.room_id);
      state.tombstones.set(message.room_id, message.rev);
      return {
        state,
        writes: [
          { subkey: 'r:' + message.room_id, value: undefined },
          { subkey: 't:' + message.room_id, value: message.rev },
        ],
      };
    }

    case 'global-ban': {
      const { member_id, origin_room_id, banned_until } = message;
      setBan(state, member_id, origin_room_id, banned_until);
      const sends: ActorSend[] = [];
      for (const room_id of state.rooms.keys()) {
        if (room_id !== origin_room_id) sends.push(toRoom(room_id, { op: 'global-ban-apply', member_id, origin_room_id, banned_until }));
      }
      return { state, writes: [{ subkey: banKey(member_id, origin_room_id), value: banned_until }], sends };
    }

    case 'global-unban': {
      const { member_id, origin_room_id } = message;
      const origins = state.globalBans.get(member_id);
      if (!origins || !origins.delete(origin_room_id)) return { state };
      if (origins.size === 0) state.globalBans.delete(member_id);
      const sends: ActorSend[] = [];
      for (const room_id of state.rooms.keys()) {
        if (room_id !== origin_room_id) sends.push(toRoom(room_id, { op: 'global-ban-remove', member_id, origin_room_id }));
      }
      return { state, writes: [{ subkey: banKey(member_id, origin_room_id), value: undefined }], sends };
    }

    case 'list':
      return { state, reply: listRooms(state, message.query) };

    case 'global-bans': {
      const origins = state.globalBans.get(message.member_id);
      if (!origins) return { state, reply: [] };
      const active: string[] = [];
      const writes: RecordWrite[] = [];
      for (const [origin, until] of [...origins]) {
        if (until === null || until > now) active.push(origin);
        else {
          // Expired: forget it (rooms drop their copies in their own housekeeping).
          origins.delete(origin);
          writes.push({ subkey: banKey(message.member_id, origin), value: undefined });
        }
      }
      if (origins.size === 0) state.globalBans.delete(message.member_id);
      return { state, reply: active.sort(), writes };
    }
  }
}
