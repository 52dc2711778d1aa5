import { ServiceError, type AlarmChange, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { livenessPolicy as policy, type EntityBrief, type IndexListView, type IndexMessage, type IndexQuery } from './messages.js';
import { emptyOutageLog, pruneOutages, upsertOutage, uptimeOver, type OutageLog } from './uptime.js';

/**
 * The per-tenant index of liveness entities (`liveness-index` actor, storage
 * `records`, one record per entity): what GET /api/v1/liveness filters, with
 * no scan of storage and no call to every entity.
 *
 * Entity actors keep it up to date through the outbox (at-least-once, de-
 * duplicated by the runtime) on their first heartbeat, on every status change
 * (with the exact start or end of the outage), when their history start moves,
 * and on delete: traffic follows status changes, not heartbeats. Messages
 * carry the entity's incarnation and a sequence number: a late message of an
 * older incarnation or an older sequence changes nothing, and outage updates
 * are merges (an end is never undone), so reordered or repeated deliveries
 * converge to the entity's own state.
 *
 * alive and uptime are exact up to the outbox delay (milliseconds). The
 * `last_seen_ms` held here is exact for a dead entity; for an alive one it is
 * the time it last became alive, and the list endpoint asks the alive
 * entities it returns for their latest heartbeat.
 */
export interface IndexEntry {
  incarnation: string;
  seq: number;
  first_seen_ms: number;
  last_seen_ms: number;
  alive: boolean;
  outages: OutageLog;
}

interface StoredEntry {
  incarnation: string;
  seq: number;
  first_seen_ms: number;
  last_seen_ms: number;
  alive: boolean;
  history_start_ms: number | null;
  outages: number[];
}

interface Tombstone {
  incarnation: string;
  removed_ms: number;
}

export interface IndexState {
  readonly tenant: string;
  entries: Map<string, IndexEntry>;
  tombstones: Map<string, Tombstone>;
  prune_alarm_ms: number | null;
}

export const TOMBSTONE_ALARM = 'tombstones';
const ENTRY_PREFIX = 'e:';
const TOMBSTONE_PREFIX = 't:';

export function loadIndex(key: string, records: Iterable<[string, unknown]>): IndexState {
  const [tenant] = JSON.parse(key) as [string];
  const state: IndexState = { tenant, entries: new Map(), tombstones: new Map(), prune_alarm_ms: null };
  for (const [subkey, value] of records) {
    if (subkey.startsWith(ENTRY_PREFIX)) {
      const stored = value as StoredEntry;
      state.entries.set(subkey.slice(ENTRY_PREFIX.length), {
        incarnation: stored.incarnation,
        seq: stored.seq,
        first_seen_ms: stored.first_seen_ms,
        last_seen_ms: stored.last_seen_ms,
        alive: stored.alive,
        outages: { pairs: stored.outages, history_start_ms: stored.history_start_ms ?? -Infinity },
      });
    } else if (subkey.startsWith(TOMBSTONE_PREFIX)) {
      state.tombstones.set(subkey.slice(TOMBSTONE_PREFIX.length), value as Tombstone);
    }
  }
  return state;
}

type Result = TurnResult<IndexState, IndexListView | undefined>;

export function stepIndex(state: IndexState, message: IndexMessage | IndexQuery | AlarmMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'upsert':
      return upsert(state, message, context.now);
    case 'remove':
      return remove(state, message, context.now);
    case 'list':
      return { state, reply: list(state, message, context.now) };
    case '$alarm':
      return message.name === TOMBSTONE_ALARM ? pruneTombstones(state, context.now) : { state };
    default:
      throw new ServiceError('BAD_REQUEST', 'Unknown liveness index operation.');
  }
}

function entryWrite(entity_id: string, entry: IndexEntry): RecordWrite {
  const value: StoredEntry = {
    incarnation: entry.incarnation,
    seq: entry.seq,
    first_seen_ms: entry.first_seen_ms,
    last_seen_ms: entry.last_seen_ms,
    alive: entry.alive,
    history_start_ms: entry.outages.history_start_ms === -Infinity ? null : entry.outages.history_start_ms,
    outages: entry.outages.pairs,
  };
  return { subkey: ENTRY_PREFIX + entity_id, value };
}

function upsert(state: IndexState, message: Extract<IndexMessage, { op: 'upsert' }>, now: number): Result {
  const { entity_id } = message;
  const tombstone = state.tombstones.get(entity_id);
  // A late message of a deleted incarnation.
  if (tombstone && tombstone.incarnation === message.incarnation) return { state };
  const writes: RecordWrite[] = [];
  let entry = state.entries.get(entity_id);
  if (entry && entry.incarnation !== message.incarnation) {
    // Two incarnations: the one first seen later is the current one.
    if (message.first_seen_ms < entry.first_seen_ms) return { state };
    entry = undefined;
  }
  if (!entry) {
    entry = {
      incarnation: message.incarnation,
      seq: 0,
      first_seen_ms: message.first_seen_ms,
      last_seen_ms: message.last_seen_ms,
      alive: message.alive,
      outages: emptyOutageLog(),
    };
    state.entries.set(entity_id, entry);
  }
  if (tombstone) {
    state.tombstones.delete(entity_id);
    writes.push({ subkey: TOMBSTONE_PREFIX + entity_id, value: undefined });
  }
  if (message.seq > entry.seq) {
    entry.seq = message.seq;
    entry.last_seen_ms = message.last_seen_ms;
    entry.alive = message.alive;
  }
  if (message.history_start_ms !== null) entry.outages.history_start_ms = Math.max(entry.outages.history_start_ms, message.history_start_ms);
  if (message.outage) upsertOutage(entry.outages, message.outage[0], message.outage[1]);
  pruneOutages(entry.outages, now);
  writes.push(entryWrite(entity_id, entry));
  return { state, writes };
}

function remove(state: IndexState, message: Extract<IndexMessage, { op: 'remove' }>, now: number): Result {
  const { entity_id } = message;
  const writes: RecordWrite[] = [];
  const entry = state.entries.get(entity_id);
  if (entry && entry.incarnation === message.incarnation) {
    state.entries.delete(entity_id);
    writes.push({ subkey: ENTRY_PREFIX + entity_id, value: undefined });
  }
  // Kept even when the entry is already gone: an upsert of this incarnation
  // that arrives after the remove must not bring the entity back.
  const tombstone: Tombstone = { incarnation: message.incarnation, removed_ms: now };
  state.tombstones.set(entity_id, tombstone);
  writes.push({ subkey: TOMBSTONE_PREFIX + entity_id, value: tombstone });
  const alarms: AlarmChange[] = [];
  if (state.prune_alarm_ms === null) {
    state.prune_alarm_ms = now + policy.index_tombstone_retention_ms;
    alarms.push({ name: TOMBSTONE_ALARM, due_ms: state.prune_alarm_ms });
  }
  return { state, writes, alarms };
}

function pruneTombstones(state: IndexState, now: number): Result {
  state.prune_alarm_ms = null;
  const writes: RecordWrite[] = [];
  let oldest_ms = Infinity;
  for (const [entity_id, tombstone] of state.tombstones) {
    if (tombstone.removed_ms <= now - policy.index_tombstone_retention_ms) {
      state.tombstones.delete(entity_id);
      writes.push({ subkey: TOMBSTONE_PREFIX + entity_id, value: undefined });
    } else oldest_ms = Math.min(oldest_ms, tombstone.removed_ms);
  }
  const alarms: AlarmChange[] = [];
  if (oldest_ms !== Infinity) {
    state.prune_alarm_ms = oldest_ms + policy.index_tombstone_retention_ms;
    alarms.push({ name: TOMBSTONE_ALARM, due_ms: state.prune_alarm_ms });
  }
  return { state, writes, alarms };
}

/** Entities of the tenant matching the filters, by entity_id; total_matched counts all matches. */
function list(state: IndexState, query: IndexQuery, now: number): IndexListView {
  const matched: EntityBrief[] = [];
  for (const [entity_id, entry] of state.entries) {
    if (query.alive !== undefined && entry.alive !== query.alive) continue;
    // An ongoing outage is in the log once the entity is dead; none is implied.
    const uptime = uptimeOver(entry.outages, entry.first_seen_ms, now, query.range_ms, null).percentage;
    if (query.uptime_below !== undefined && !(uptime < query.uptime_below)) continue;
    matched.push({ entity_id, alive: entry.alive, last_seen_ms: entry.last_seen_ms, uptime });
  }
  matched.sort((a, b) => (a.entity_id < b.entity_id ? -1 : a.entity_id > b.entity_id ? 1 : 0));
  return { entities: matched.slice(0, query.limit), total_matched: matched.length };
}
