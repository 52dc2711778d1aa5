/**
 * The ECS coordinator's public surface: the actor kind, how a key is built,
 * the messages the index actor takes, the views it answers with and the
 * limits the edge validates against. Other layers import this file only.
 */

export const ECS_INDEX_KIND = 'ecs-index';

/** Actor key of an ECS index: tenant and index name, unambiguously joined. */
export function ecsIndexKey(tenant: string, index: string): string {
  return JSON.stringify([tenant, index]);
}

/** Bounds of the tick loop (docs/api/ecs.md). */
export const TICK_RATE_MS_MIN = 10;
export const TICK_RATE_MS_MAX = 10_000;
export const TICK_RATE_MS_DEFAULT = 50;
/** The ring of recent ticks a client can resume from: at most this many ticks ... */
export const TICK_RING_TICKS_MAX = 256;
/** ... and at most this many bytes of serialised changes (the newest tick is always kept). */
export const TICK_RING_BYTES_MAX = 8 * 1024 * 1024;
/** Ticks in one `ticks_since` answer; a follower behind by more asks again at once. */
export const TICKS_PER_REPLY_MAX = 64;
export const MUTATIONS_PER_BATCH_MAX = 500;
export const ENTITIES_PER_INDEX_MAX = 10_000;
/** An entity's components, serialised as JSON, after the mutation is applied. */
export const COMPONENTS_BYTES_MAX = 2 * 1024;
/** A node's connection count is believed for this long after it was reported. */
export const CONNECTION_REPORT_TTL_MS = 30_000;

/** Components of an entity: component name to any JSON value. */
export type Components = Record<string, unknown>;

/**
 * One mutation of a batch. `create` needs an absent entity; `update` and
 * `delete` need `expected_version` equal to the entity's version. An update's
 * components are merged into the entity's (a component set to null is removed).
 */
export interface EntityMutation {
  entity_id: string;
  op: 'create' | 'update' | 'delete';
  expected_version?: number;
  components?: Components;
}

/** Why one mutation failed; the others of the batch are unaffected. */
export type MutationErrorCode = 'entity_not_found' | 'entity_exists' | 'version_conflict' | 'version_required' | 'index_full' | 'components_too_large';

export interface MutationResult {
  entity_id: string;
  success: boolean;
  /** The entity's version after the mutation (a delete's version is the old one plus one); null when it failed. */
  new_version: number | null;
  /** The entity's version when the mutation was looked at (0: absent). */
  current_version: number;
  error: MutationErrorCode | null;
}

/** What a tick carries for one entity: its full state after the tick, so applying a change twice is harmless. */
export type EntityChange =
  | { entity_id: string; op: 'upsert'; version: number; components: Components }
  | { entity_id: string; op: 'delete'; version: number };

export interface TickRecord {
  tick: number;
  at_ms: number;
  changes: EntityChange[];
  /** Serialised size of `changes`, for the ring's byte bound. */
  bytes: number;
}

export interface EntityView {
  entity_id: string;
  version: number;
  components: Components;
}

export type EcsMessage =
  | { op: 'status' }
  | { op: 'start'; tick_rate_ms?: number }
  | { op: 'stop' }
  | { op: 'mutations'; mutations: EntityMutation[] }
  /**
   * Ticks after `since`. With `wait` and nothing newer, the answer waits for
   * the next tick (a deferred reply). `node_id` and `connections` report the
   * asking node's live WebSocket count for connected_systems.
   */
  | { op: 'ticks_since'; since: number; wait: boolean; node_id?: string; connections?: number }
  /** A node's live connection count, sent at once when it changes. */
  | { op: 'connections'; node_id: string; connections: number }
  | { op: 'snapshot' };

export interface CoordinatorView {
  running: boolean;
  tick: number;
  tick_rate_ms: number;
  last_tick_at_ms: number | null;
  connected_systems: number;
  entities: number;
  /** The oldest tick a client can still resume after (ticks after it are in the ring). */
  oldest_tick: number;
}

export interface MutationsReply {
  results: MutationResult[];
  succeeded: number;
  failed: number;
  /** The tick that will carry these changes to subscribers. */
  tick: number;
}

/** `gap`: ticks after `since` are no longer all in the ring; the caller needs a snapshot. */
export interface TicksReply {
  tick: number;
  oldest_tick: number;
  running: boolean;
  tick_rate_ms: number;
  gap: boolean;
  ticks: TickRecord[];
}

export interface SnapshotReply {
  tick: number;
  entities: EntityView[];
}
