/**
 * The presence area's public surface: the actor kinds and keys, the enums and
 * bounds, the messages the context and subject actors take and the views they
 * answer with. Other layers import this file only.
 */
import type { ErrorCode } from '../../runtime/index.js';
import type { GeoPoint } from './geo.js';

export { RADIUS_METERS_MAX, type GeoPoint } from './geo.js';

/** One actor per (tenant, context id): keyed records, one per session. */
export const PRESENCE_CONTEXT_KIND = 'presence-context';
/** One small actor per (tenant, subject id): last seen per context. */
export const PRESENCE_SUBJECT_KIND = 'presence-subject';

/** The context actor's key: tenant and context id. */
export function presenceContextKey(tenant: string, context_id: string): string {
  return JSON.stringify([tenant, context_id]);
}

export function presenceSubjectKey(tenant: string, subject_id: string): string {
  return JSON.stringify([tenant, subject_id]);
}

/** One short-lived coordinator per multiplex request (actors/presence/flows.ts): snapshot storage. */
export const PRESENCE_MULTIPLEX_KIND = 'presence-multiplex';

/** The multiplex coordinator's key: tenant and an id the edge makes for the request. */
export function presenceMultiplexKey(tenant: string, multiplex_id: string): string {
  return JSON.stringify([tenant, multiplex_id]);
}

export const cognitiveStates = ['available', 'thinking', 'busy', 'offline'] as const;
export type CognitiveState = (typeof cognitiveStates)[number];
export const activities = ['active', 'idle', 'stale'] as const;
export type Activity = (typeof activities)[number];
export const subjectKinds = ['user', 'agent', 'service', 'device'] as const;
export type SubjectKind = (typeof subjectKinds)[number];
export const overflowPolicies = ['reject', 'observe'] as const;
export type OverflowPolicy = (typeof overflowPolicies)[number];
/** Stored coordinates are snapped to the centre of a geohash cell of this length ('exact': as sent). */
export const geoPrecisions = { exact: null, street: 7, neighborhood: 6, city: 5, region: 4 } as const;
export type GeoPrecision = keyof typeof geoPrecisions;
export type OccupancyState = 'open' | 'busy' | 'full';
export type Admission = 'admitted' | 'downgraded';

export const presenceLimits = {
  /** Live sessions (participants and observers) in one context. */
  sessions_per_context_max: 100_000,
  /** Live sessions of one subject in one context. */
  sessions_per_subject_max: 64,
  metadata_bytes_max: 4096,
  metadata_keys_max: 64,
  allowed_keys_max: 256,
  /** Transitions one sweep or alarm turn applies; more are left for the next (the alarm re-fires at once). */
  reconcile_per_turn_max: 10_000,
  list_limit_default: 100,
  list_limit_max: 1000,
  nearby_limit_default: 50,
  nearby_limit_max: 1000,
  /** A live session reports its subject's last-seen time to the subject index at most this often. */
  last_seen_report_interval_ms: 30_000,
  /** Heartbeats in one multiplex request. */
  multiplex_items_max: 100,
  /** A multiplex coordinator's state is deleted this long after it started, finished or not. */
  multiplex_cleanup_ms: 60_000,
} as const;


// ---- configuration ----

export interface HeartbeatSettings {
  ttl_seconds: number;
  idle_after_seconds: number;
  stale_after_seconds: number;
}

export interface CapacitySettings {
  max_active: number;
  soft_limit: number;
  overflow_policy: OverflowPolicy;
}

export interface PresenceContextConfig {
  id: string;
  kind: string;
  resource_id: string;
  heartbeat: HeartbeatSettings;
  capacity: CapacitySettings;
  geo: { enabled: boolean; precision: GeoPrecision };
  metadata_schema: { allowed_keys: string[] };
  created_ms: number;
  updated_ms: number;
  version: number;
}

/** Create input: everything but id and kind optional. */
export interface ContextInput {
  id: string;
  kind: string;
  resource_id?: string;
  heartbeat?: Partial<HeartbeatSettings>;
  capacity?: Partial<CapacitySettings>;
  geo?: Partial<PresenceContextConfig['geo']>;
  metadata_schema?: { allowed_keys?: string[] };
}

/** Update input: any part; nested objects are merged with the current settings. */
export type ContextChanges = Partial<Omit<ContextInput, 'id'>>;

// ---- sessions ----

export interface Subject {
  id: string;
  kind: SubjectKind;
}

export interface HeartbeatInput {
  subject?: Subject;
  session_id?: string;
  device_id?: string;
  connection_id?: string;
  state?: CognitiveState;
  metadata?: Record<string, unknown>;
  geo?: GeoPoint;
  observer?: boolean;
}

export interface OccupancyView {
  active: number;
  idle: number;
  stale: number;
  observers: number;
  total: number;
  available_agents: number;
  capacity_remaining: number;
  occupancy_state: OccupancyState;
  max_active: number;
  soft_limit: number;
}

// ---- context messages and replies ----

export interface ListFilters {
  state?: CognitiveState;
  activity?: Activity;
  kind?: SubjectKind;
  aggregate_by_subject?: boolean;
  limit?: number;
  offset?: number;
}

export type PresenceMessage =
  | { op: 'create'; context: ContextInput }
  | { op: 'update'; changes: ContextChanges }
  | { op: 'get' }
  | { op: 'heartbeat'; heartbeat: HeartbeatInput }
  | { op: 'state'; session_id: string; state: CognitiveState }
  | { op: 'leave'; session_id?: string; subject_id?: string }
  | { op: 'list'; filters: ListFilters }
  | { op: 'count' }
  | { op: 'nearby'; lat: number; lon: number; radius_meters: number; limit?: number }
  | { op: 'sweep' }
  | { op: 'subject_presence'; subject_id: string }
  | MultiplexHeartbeatMessage;

export interface SessionView {
  session_id: string;
  subject: Subject;
  device_id: string | null;
  connection_id: string | null;
  state: CognitiveState;
  activity: Activity;
  observer: boolean;
  metadata: Record<string, unknown>;
  geo: GeoPoint | null;
  opened_ms: number;
  last_heartbeat_ms: number;
  expires_ms: number;
  /** aggregate_by_subject only: the subject's matching sessions. */
  session_count?: number;
}

export interface ContextView {
  context: PresenceContextConfig;
  occupancy: OccupancyView;
}

export interface HeartbeatReply {
  session_id: string;
  opened: boolean;
  admission: Admission;
  activity: Activity;
  state: CognitiveState;
  observer: boolean;
  last_heartbeat_ms: number;
  expires_ms: number;
  occupancy: OccupancyView;
}

export interface StateReply {
  session_id: string;
  state: CognitiveState;
  previous_state: CognitiveState;
}

export interface LeaveReply {
  removed_sessions: number;
}

export interface ListReply {
  total: number;
  sessions: SessionView[];
}

export interface CountReply {
  by_state: Record<CognitiveState, number>;
  occupancy: OccupancyView;
}

export interface NearbyReply {
  total: number;
  sessions: { session_id: string; subject: Subject; geo: GeoPoint; distance_meters: number; observer: boolean; activity: Activity; state: CognitiveState }[];
}

export interface SweepReply {
  reconciled: number;
  transitions: Record<string, Activity>;
  expired: string[];
  /** More transitions were due than one turn applies; the alarm continues at once. */
  remaining: boolean;
}

export interface SubjectPresenceReply {
  /** Null when the subject has no live session here. */
  last_seen_ms: number | null;
  last_state: CognitiveState | null;
  online: boolean;
}

export type PresenceReply =
  | ContextView
  | HeartbeatReply
  | StateReply
  | LeaveReply
  | ListReply
  | CountReply
  | NearbyReply
  | SweepReply
  | SubjectPresenceReply
  | undefined;

// ---- the multiplex flow ----

/** The outcome of one multiplex item: the heartbeat's reply, or the error it would have had on its own. */
export type MultiplexItemResult =
  | { success: true; heartbeat: HeartbeatReply }
  | { success: false; error: ErrorCode; message: string; status: number };

/** One item of a multiplex start: a heartbeat to apply, or an item the edge already failed (invalid). */
export type MultiplexItem =
  | { context_id: string; heartbeat: HeartbeatInput }
  | { context_id: string; result: MultiplexItemResult };

/** Coordinator -> context (outbox): apply item `index` of flow `flow` (the coordinator's key). */
export interface MultiplexHeartbeatMessage {
  op: 'multiplex_heartbeat';
  flow: string;
  index: number;
  heartbeat: HeartbeatInput;
}

export type MultiplexMessage =
  /** Asked by the edge; answered (deferred) with a MultiplexReply once every item has its result. */
  | { op: 'start'; items: MultiplexItem[] }
  /** Context -> coordinator (outbox): the result of item `index`. */
  | { op: 'multiplex_result'; index: number; result: MultiplexItemResult };

/** `results[i]` answers `items[i]`. */
export interface MultiplexReply {
  results: MultiplexItemResult[];
}

// ---- the subject index ----

export interface SubjectSeenMessage {
  op: 'seen';
  context_id: string;
  context_kind: string;
  subject_kind: string;
  last_seen_ms: number;
  last_state: string;
  /** The subject still has a live session in the context. */
  online: boolean;
  reported_ms: number;
}

export type SubjectMessage = SubjectSeenMessage | { op: 'get' };

export interface SubjectContextEntry {
  context_kind: string;
  last_seen_ms: number;
  last_state: string;
  online: boolean;
  reported_ms: number;
}

export interface SubjectIndexState {
  subject_kind: string | null;
  contexts: Record<string, SubjectContextEntry>;
}

/**
 * The presence directory: one actor per tenant listing its context ids, for the
 * administrators' list (GET /admin/presence/contexts). A context tells it once, through the
 * outbox, at its creation (an older context at its next change); contexts are never deleted.
 */
export const PRESENCE_DIRECTORY_KIND = 'presence-directory';

export function presenceDirectoryKey(tenant: string): string {
  return JSON.stringify([tenant]);
}

export type PresenceDirectoryMessage =
  | { op: 'add'; context_id: string }
  | { op: 'list'; offset: number; limit: number };

export interface PresenceDirectoryView {
  total: number;
  context_ids: string[];
}
