import { isAlarm, ServiceError, type AlarmMessage, type DeferredReply, type RecordWrite, type TurnContext, type TurnResult, serialisedBytes } from '../../runtime/index.js';
import {
  CONNECTION_REPORT_TTL_MS,
  MUTATIONS_PER_BATCH_MAX,
  TICK_RATE_MS_DEFAULT,
  TICK_RATE_MS_MAX,
  TICK_RATE_MS_MIN,
  type CoordinatorView,
  type EcsMessage,
  type EntityChange,
  type MutationsReply,
  type SnapshotReply,
  type TickRecord,
  type TicksReply,
} from './messages.js';
import { applyMutation, type Entity } from './mutations.js';
import { oldestResumableTick, pushTick, ticksSince } from './tick-ring.js';

/**
 * One ECS index (key JSON [tenant, index]), a `records` actor:
 * - `meta`: running, tick_rate_ms, tick, last_tick_at_ms;
 * - `e/<entity_id>`: an entity (version, components);
 * - `p/<entity_id>`: its change waiting for the next tick;
 * - `t/<tick>`: a committed tick of the ring.
 *
 * Mutations apply at once (their versions are checked and bumped in their own
 * turn, and the reply leaves after the commit); the tick alarm then commits
 * every pending change as one tick, which followers stream to WebSockets. The
 * tick alarm is durable: an index that was running keeps ticking after a
 * restart (missed ticks are not replayed: the next tick comes one period
 * after the restart).
 *
 * In memory only (rebuilt empty on activation): the followers' waiting asks
 * (deferred replies, answered by the next tick) and the connection counts
 * each node reported.
 */

interface Meta {
  running: boolean;
  tick_rate_ms: number;
  tick: number;
  last_tick_at_ms: number | null;
}

interface Waiter {
  request_id: string;
  since: number;
}

export interface IndexState {
  meta: Meta;
  entities: Map<string, Entity>;
  pending: Map<string, EntityChange>;
  ring: TickRecord[];
  /** By node id (one waiting ask per node): memory only. */
  waiters: Map<string, Waiter>;
  connections: Map<string, { count: number; at_ms: number }>;
}

const TICK_ALARM = 'tick';
const META = 'meta';
const entityKey = (id: string) => `e/${id}`;
const pendingKey = (id: string) => `p/${id}`;
const tickKey = (tick: number) => `t/${String(tick).padStart(15, '0')}`;

function initialMeta(): Meta {
  return { running: false, tick_rate_ms: TICK_RATE_MS_DEFAULT, tick: 0, last_tick_at_ms: null };
}

export function loadIndex(_key: string, records: Iterable<[string, unknown]>): IndexState {
  const state: IndexState = { meta: initialMeta(), entities: new Map(), pending: new Map(), ring: [], waiters: new Map(), connections: new Map() };
  for (const [subkey, value] of records) {
    if (subkey === META) state.meta = value as Meta;
    else if (subkey.startsWith('e/')) state.entities.set(subkey.slice(2), value as Entity);
    else if (subkey.startsWith('p/')) state.pending.set(subkey.slice(2), value as EntityChange);
    // Subkeys are in order, and ticks are zero-padded: the ring loads oldest first.
    else if (subkey.startsWith('t/')) state.ring.push(value as TickRecord);
  }
  return state;
}

function connectedSystems(state: IndexState, now: number): number {
  let total = 0;
  for (const [node, report] of state.connections) {
    if (report.at_ms + CONNECTION_REPORT_TTL_MS < now) state.connections.delete(node);
    else total += report.count;
  }
  return total;
}

export function coordinatorView(state: IndexState, now: number): CoordinatorView {
  const { meta } = state;
  return {
    running: meta.running,
    tick: meta.tick,
    tick_rate_ms: meta.tick_rate_ms,
    last_tick_at_ms: meta.last_tick_at_ms,
    connected_systems: connectedSystems(state, now),
    entities: state.entities.size,
    oldest_tick: oldestResumableTick(state.ring, meta.tick),
  };
}

function ticksReply(state: IndexState, since: number): TicksReply {
  const { meta, ring } = state;
  const found = ticksSince(ring, meta.tick, since);
  return {
    tick: meta.tick,
    oldest_tick: oldestResumableTick(ring, meta.tick),
    running: meta.running,
    tick_rate_ms: meta.tick_rate_ms,
    gap: found.gap,
    ticks: found.gap ? [] : found.ticks,
  };
}

function checkTickRate(tick_rate_ms: number | undefined): void {
  if (tick_rate_ms === undefined) return;
  if (!Number.isInteger(tick_rate_ms) || tick_rate_ms < TICK_RATE_MS_MIN || tick_rate_ms > TICK_RATE_MS_MAX) {
    throw new ServiceError('BAD_REQUEST', `tick_rate_ms must be an integer from ${TICK_RATE_MS_MIN} to ${TICK_RATE_MS_MAX}.`, {
      details: [{ field: 'body.tick_rate_ms', message: `must be from ${TICK_RATE_MS_MIN} to ${TICK_RATE_MS_MAX}` }],
    });
  }
}

type Result = TurnResult<IndexState, unknown>;

function onTick(state: IndexState, alarm: AlarmMessage, context: TurnContext): Result {
  const { meta } = state;
  if (!meta.running) return { state };
  const tick = meta.tick + 1;
  const changes = [...state.pending.values()];
  const record: TickRecord = { tick, at_ms: context.now, changes, bytes: changes.length === 0 ? 2 : serialisedBytes(changes) };
  const writes: RecordWrite[] = [{ subkey: tickKey(tick), value: record }];
  for (const entity_id of state.pending.keys()) writes.push({ subkey: pendingKey(entity_id), value: undefined });
  state.pending.clear();
  for (const evicted of pushTick(state.ring, record)) writes.push({ subkey: tickKey(evicted.tick), value: undefined });
  state.meta = { ...meta, tick, last_tick_at_ms: context.now };
  writes.push({ subkey: META, value: state.meta });
  // Keep the cadence: a tick up to one period late (a slow commit) is followed at once by the next
  // one; after a longer pause (a restart, a failover) the missed ticks are skipped instead of burst.
  let due_ms = alarm.due_ms + meta.tick_rate_ms;
  if (due_ms <= context.now - meta.tick_rate_ms) due_ms = context.now + meta.tick_rate_ms;
  const replies: DeferredReply[] = [];
  for (const waiter of state.waiters.values()) replies.push({ request_id: waiter.request_id, reply: ticksReply(state, waiter.since) });
  state.waiters.clear();
  return { state, writes, alarms: [{ name: TICK_ALARM, due_ms }], replies };
}

export function stepIndex(state: IndexState, message: EcsMessage | AlarmMessage, context: TurnContext): Result {
  if (isAlarm(message)) return message.name === TICK_ALARM ? onTick(state, message, context) : { state };
  switch (message.op) {
    case 'status':
      return { state, reply: coordinatorView(state, context.now) };
    case 'start': {
      checkTickRate(message.tick_rate_ms);
      const tick_rate_ms = message.tick_rate_ms ?? state.meta.tick_rate_ms;
      // Already running at that rate: nothing changes (start is idempotent).
      if (state.meta.running && tick_rate_ms === state.meta.tick_rate_ms) return { state, reply: coordinatorView(state, context.now) };
      state.meta = { ...state.meta, running: true, tick_rate_ms };
      return {
        state,
        writes: [{ subkey: META, value: state.meta }],
        alarms: [{ name: TICK_ALARM, due_ms: context.now + tick_rate_ms }],
        reply: coordinatorView(state, context.now),
      };
    }
    case 'stop': {
      if (!state.meta.running) return { state, reply: coordinatorView(state, context.now) };
      state.meta = { ...state.meta, running: false };
      return {
        state,
        writes: [{ subkey: META, value: state.meta }],
        alarms: [{ name: TICK_ALARM, due_ms: null }],
        reply: coordinatorView(state, context.now),
      };
    }
    case 'mutations': {
      const { mutations } = message;
      if (!Array.isArray(mutations) || mutations.length === 0 || mutations.length > MUTATIONS_PER_BATCH_MAX) {
        throw new ServiceError('BAD_REQUEST', `mutations must hold 1 to ${MUTATIONS_PER_BATCH_MAX} entries.`);
      }
      const writes: RecordWrite[] = [];
      const reply: MutationsReply = { results: [], succeeded: 0, failed: 0, tick: state.meta.tick + 1 };
      for (const mutation of mutations) {
        const outcome = applyMutation(mutation, state.entities.get(mutation.entity_id), state.entities.size);
        reply.results.push(outcome.result);
        if (!outcome.change) {
          reply.failed++;
          continue;
        }
        reply.succeeded++;
        const { entity_id } = mutation;
        if (outcome.entity) state.entities.set(entity_id, outcome.entity);
        else state.entities.delete(entity_id);
        state.pending.set(entity_id, outcome.change);
        writes.push({ subkey: entityKey(entity_id), value: outcome.entity ?? undefined }, { subkey: pendingKey(entity_id), value: outcome.change });
      }
      return { state, writes, reply };
    }
    case 'ticks_since': {
      if (message.node_id !== undefined && message.connections !== undefined) {
        state.connections.set(message.node_id, { count: message.connections, at_ms: context.now });
      }
      const reply = ticksReply(state, message.since);
      if (!message.wait || reply.gap || reply.ticks.length > 0 || context.request_id === null) return { state, reply };
      // Nothing newer: the answer waits for the next tick. One waiting ask per node; an older one gets its empty answer now.
      const waiterKey = message.node_id ?? context.request_id;
      const previous = state.waiters.get(waiterKey);
      state.waiters.set(waiterKey, { request_id: context.request_id, since: message.since });
      return { state, defer: true, replies: previous ? [{ request_id: previous.request_id, reply }] : [] };
    }
    case 'connections':
      state.connections.set(message.node_id, { count: message.connections, at_ms: context.now });
      return { state, reply: { connected_systems: connectedSystems(state, context.now) } };
    case 'snapshot': {
      const entities = [...state.entities].map(([entity_id, entity]) => ({ entity_id, version: entity.version, components: entity.components }));
      return { state, reply: { tick: state.meta.tick, entities } satisfies SnapshotReply };
    }
    default:
      throw new ServiceError('BAD_REQUEST', 'Unknown ECS index operation.');
  }
}
