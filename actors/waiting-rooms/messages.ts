/**
 * The waiting-rooms area's public surface: the actor kinds and keys, the room
 * configuration and bounds, the messages the room and directory actors take
 * and the views they answer with (times in epoch-ms; the edge formats them).
 * Other layers import this file only.
 */
import type { MatchRules } from './rules.js';

export type { MatchRules } from './rules.js';

export const WAITING_ROOM_KIND = 'waiting-room';
export const WAITING_ROOM_DIRECTORY_KIND = 'waiting-room-directory';

/** Actor key of a room: tenant and room id, unambiguously joined. */
export function waitingRoomKey(tenant: string, room_id: string): string {
  return JSON.stringify([tenant, room_id]);
}

/** Actor key of a tenant's room directory (list index and global bans). */
export function waitingRoomDirectoryKey(tenant: string): string {
  return JSON.stringify([tenant]);
}

// ---- room configuration ----

export interface PriorityGroup {
  name: string;
  boost: number;
  match_rules: MatchRules;
}

export interface AdmissionRate {
  batch_size: number;
  interval_seconds: number;
}

export interface AntiGaming {
  /** Joins a member may attempt per window; 0 turns the limit off. */
  join_rate_limit_max_attempts: number;
  join_rate_limit_window_seconds: number;
  /** A member who left or was rejected may not join again for this long. */
  rejoin_cooldown_seconds: number;
}

export const ROOM_STATUSES = ['active', 'paused'] as const;
export type RoomStatus = (typeof ROOM_STATUSES)[number];
export const QUEUE_STRATEGIES = ['fifo'] as const;
export type QueueStrategy = (typeof QUEUE_STRATEGIES)[number];

export interface RoomConfig {
  room_id: string;
  capacity: number;
  admission_rate: AdmissionRate;
  anti_gaming: AntiGaming;
  auto_admit: boolean;
  priority_groups: PriorityGroup[];
  queue_strategy: QueueStrategy;
  session_ttl_seconds: number;
  metadata: Record<string, unknown>;
  status: RoomStatus;
  created_at: number;
  created_by: string;
  updated_at: number;
}

/** What create and replace accept; every field optional for replace. */
export interface RoomInput {
  capacity?: number;
  admission_rate?: Partial<AdmissionRate>;
  anti_gaming?: Partial<AntiGaming>;
  auto_admit?: boolean;
  priority_groups?: { name: string; boost?: number; match_rules?: unknown }[];
  queue_strategy?: string;
  session_ttl_seconds?: number;
  metadata?: Record<string, unknown>;
  status?: string;
}

export const waitingRoomLimits = {
  room_id_length_max: 128,
  capacity_max: 1_000_000,
  batch_size_max: 10_000,
  interval_seconds_max: 86_400,
  session_ttl_seconds_max: 7 * 86_400,
  join_rate_limit_max_attempts_max: 10_000,
  join_rate_limit_window_seconds_max: 86_400,
  rejoin_cooldown_seconds_max: 86_400,
  priority_groups_max: 16,
  group_name_length_max: 64,
  boost_max: 1_000,
  room_metadata_bytes_max: 16 * 1024,
  member_metadata_bytes_max: 2 * 1024,
  member_id_length_max: 256,
  /** Waiting members of one room; a join beyond it is refused (409 room_limit_reached). */
  waiting_members_max: 1_000_000,
  /** Room bans kept per room (active or expired within retention). */
  bans_max: 10_000,
  ban_duration_seconds_max: 10 * 365 * 86_400,
  /** Expired bans stay listable (include_expired) this long after banned_until. */
  expired_ban_retention_ms: 30 * 86_400_000,
  admit_count_max: 10_000,
  member_ids_per_request_max: 1_000,
  reason_length_max: 512,
  /** Members listed by GET members / group status in one reply. */
  members_page_max: 1_000,
  /** Hourly analytics kept (90 days). */
  analytics_retention_hours: 90 * 24,
  /** A rejected member can read its rejection (GET position) at least this long. */
  rejection_visible_ms: 24 * 3_600_000,
  /** The observed admission rate looks back this far. */
  admission_rate_window_ms: 10 * 60_000,
  /** At most this many records are purged by one housekeeping turn. */
  gc_batch_max: 10_000,
  /** Housekeeping runs at most once per this period. */
  gc_period_ms: 60_000,
} as const;

// ---- the room actor ----

export interface Ban {
  member_id: string;
  reason: string;
  banned_at: number;
  banned_by: string;
  /** Epoch-ms; null: permanent. */
  banned_until: number | null;
  /** Also applies in every other room of the tenant. */
  global: boolean;
}

export type RoomMessage =
  | { op: 'create'; room_id: string; input: RoomInput; by: string }
  | { op: 'get' }
  | { op: 'replace'; input: RoomInput }
  | { op: 'delete' }
  | { op: 'join'; member_id: string; priority_group?: string; metadata?: Record<string, unknown> }
  | { op: 'leave'; member_id: string }
  | { op: 'position'; member_id: string }
  | { op: 'refresh'; member_id: string }
  | { op: 'admit'; count?: number; member_ids?: string[]; group?: string }
  | { op: 'reject'; member_ids: string[]; reason: string }
  | { op: 'ban'; member_id: string; reason: string; duration_seconds?: number; global?: boolean; by: string }
  | { op: 'get-ban'; member_id: string }
  | { op: 'list-bans'; include_expired: boolean }
  | { op: 'unban'; member_id: string }
  | { op: 'group-status'; group_id: string; limit?: number }
  | { op: 'members'; status?: 'waiting' | 'active'; limit?: number; offset?: number }
  | { op: 'analytics'; start_ms?: number; end_ms?: number; limit?: number }
  | { op: 'global-ban-apply'; member_id: string; origin_room_id: string; banned_until: number | null }
  | { op: 'global-ban-remove'; member_id: string; origin_room_id: string }
  | { op: 'global-bans-sync'; bans: GlobalBanEntry[] };

export interface GlobalBanEntry {
  member_id: string;
  origin_room_id: string;
  banned_until: number | null;
}

// ---- views (times in epoch-ms; the edge formats them) ----

export interface RoomStatistics {
  active_count: number;
  average_wait_seconds: number;
  current_admission_rate: number;
  total_admitted: number;
  waiting_count: number;
}

export interface RoomDetailView {
  room: RoomConfig;
  statistics: RoomStatistics;
}

export interface PositionView {
  room_id: string;
  member_id: string;
  status: 'waiting' | 'active' | 'rejected';
  position: number;
  ahead_count: number;
  estimated_wait_seconds: number;
  joined_at: number;
  priority_group: string;
  priority_effective: number;
  expires_at: number | null;
  rejection_reason: string | null;
}

export interface AdmitView {
  admitted: { member_id: string; admitted_at: number; wait_time_seconds: number }[];
  capacity_reached: boolean;
  failed: { member_id: string; reason: string }[];
}

export interface MemberView {
  room_id: string;
  member_id: string;
  status: 'waiting' | 'active';
  group_id: string;
  priority: number;
  position: number;
  joined_at: number;
  admitted_at: number | null;
  expires_at: number | null;
  metadata: Record<string, unknown>;
}

export interface MembersView {
  total: number;
  limit: number;
  offset: number;
  members: MemberView[];
}

export interface GroupStatusView {
  group_id: string;
  average_position: number;
  can_be_admitted: boolean;
  members: { member_id: string; joined_at: number; position: number; status: 'waiting' | 'active' }[];
  members_active: number;
  members_waiting: number;
  total_members: number;
}

export interface BanView extends Ban {
  room_id: string;
  active: boolean;
}

export type AnalyticsView = AnalyticsReport & { room_id: string };


export interface AnalyticsReport {
  hourly_stats: { hour: number; admissions: number; rejections: number; abandonments: number; average_wait_time_seconds: number }[];
  summary: {
    abandonment_rate: number;
    admission_rate: number;
    average_wait_time_seconds: number;
    max_wait_time_seconds: number;
    min_wait_time_seconds: number;
    rejection_rate: number;
    total_abandonments: number;
    total_admissions: number;
    total_rejections: number;
  };
  start_ms: number;
  end_ms: number;
}

// ---- the directory actor (one per tenant) ----

/** A room in the directory's list. */
export interface RoomSummary {
  room_id: string;
  auto_admit: boolean;
  capacity: number;
  created_at: number;
  created_by: string;
  queue_strategy: QueueStrategy;
  status: RoomStatus;
  updated_at: number;
}

export type FilterOperator = 'eq' | 'ne' | 'lt' | 'lte' | 'gt' | 'gte' | 'contains' | 'in';
export interface RoomFilter {
  field: 'status' | 'queue_strategy' | 'created_by' | 'capacity';
  operator: FilterOperator;
  value: string;
}

export interface RoomListQuery {
  q?: string;
  sort_by?: 'created_at' | 'updated_at' | 'capacity';
  sort_order?: 'asc' | 'desc';
  filters?: RoomFilter[];
  page: number;
  page_size: number;
}

export type DirectoryMessage =
  | { op: 'room-upsert'; rev: number; summary: RoomSummary }
  | { op: 'room-remove'; room_id: string; rev: number }
  | { op: 'global-ban'; member_id: string; origin_room_id: string; banned_until: number | null }
  | { op: 'global-unban'; member_id: string; origin_room_id: string }
  | { op: 'list'; query: RoomListQuery }
  | { op: 'global-bans'; member_id: string };

export interface RoomListView {
  total: number;
  rooms: RoomSummary[];
}

export const FILTER_FIELDS = ['status', 'queue_strategy', 'created_by', 'capacity'] as const;
export const FILTER_OPERATORS: readonly FilterOperator[] = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'contains', 'in'];
