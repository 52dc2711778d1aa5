/**
 * The liveness area's public surface: the actor kinds and keys (every key
 * carries the tenant), the bounds, the messages the entity and index actors
 * take and the views they answer with. Other layers import this file only.
 */
export { parseWindow } from './uptime.js';

export const LIVENESS_KIND = 'liveness';
export const LIVENESS_INDEX_KIND = 'liveness-index';

/** One actor per (tenant, entity). */
export function livenessActorKey(tenant: string, entity_id: string): string {
  return JSON.stringify([tenant, entity_id]);
}

/** One index actor per tenant. */
export function livenessIndexKey(tenant: string): string {
  return JSON.stringify([tenant]);
}

/** Every bound of the liveness area, in one place (unit last). docs/api/liveness.md documents each of them; change both together. */
const SECOND_MS = 1000;
const MINUTE_MS = 60 * SECOND_MS;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

export const livenessPolicy = {
  /** Alive while now < last heartbeat + grace. Overridable per node with LIVENESS_GRACE_SECONDS. */
  grace_ms_default: 30 * SECOND_MS,
  grace_ms_min: 1 * SECOND_MS,
  grace_ms_max: DAY_MS,

  /** Raw heartbeat samples kept per entity: the newest this many, none older than raw_retention_ms. */
  raw_samples_max: 3_600,
  raw_retention_ms: 7 * DAY_MS,
  /** One-minute rollups, kept this long. */
  minute_resolution_ms: MINUTE_MS,
  minute_retention_ms: 6 * HOUR_MS,
  /** One-hour rollups, kept this long (the longest aggregation range). */
  hour_resolution_ms: HOUR_MS,
  hour_retention_ms: 7 * DAY_MS,
  /** Longest range of aggregations and latency reads. */
  series_range_ms_max: 7 * DAY_MS,

  /** Outages (gaps longer than the grace window) kept per entity: this many, none ended longer ago than outage_retention_ms. */
  outages_max: 2_000,
  outage_retention_ms: 30 * DAY_MS,
  /** Longest uptime window and list range. */
  uptime_window_ms_max: 30 * DAY_MS,

  /** A dead entity's expired data is pruned by an alarm at most this often. */
  retention_sweep_interval_ms: HOUR_MS,

  /** A latency sample further than this from the server time is a clock error: no latency sample. */
  latency_clock_error_ms: HOUR_MS,

  /** Anomaly rule: |latency - mean| > z_max * max(std_dev, floor_ms, floor_ratio * mean) over the last window samples. */
  anomaly_window_samples: 60,
  anomaly_samples_min: 20,
  anomaly_z_max: 4,
  anomaly_std_dev_floor_ms: 1,
  anomaly_std_dev_floor_ratio: 0.05,
  /** Raw rows walked back to collect the anomaly window (heartbeats without a latency are skipped). */
  anomaly_scan_rows_max: 600,

  /** Summary window in LivenessStatus: the last this many samples. */
  summary_samples: 60,

  /** A deleted entity's tombstone in the index (guards against late messages) is kept this long. */
  index_tombstone_retention_ms: DAY_MS,

  /** Request bounds. */
  entity_id_length_max: 256,
  metadata_bytes_max: 16 * 1024,
  labels_max: 64,
  label_key_length_max: 128,
  label_value_length_max: 256,
  history_limit_default: 100,
  history_limit_max: 1_000,
  list_limit_default: 100,
  list_limit_max: 1_000,
  uptime_windows_max: 10,
} as const;

export type LivenessPolicy = typeof livenessPolicy;

export const aggregations = ['avg', 'sum', 'min', 'max', 'count', 'first', 'last', 'range', 'std.p'] as const;
export type Aggregation = (typeof aggregations)[number];
export const seriesNames = ['latency', 'heartbeat'] as const;
export type SeriesName = (typeof seriesNames)[number];

export interface UptimeFigures {
  percentage: number;
  outages: number;
  downtime_seconds: number;
}

export interface HistorySlice {
  samples: { timestamp_ms: number; latency_ms: number | null }[];
  total_in_range: number;
  has_more: boolean;
}

export const STATUS_CHANGED_EVENT = 'entity.status_changed';
export const ANOMALY_EVENT = 'entity.liveness_anomaly';

export type StatusName = 'alive' | 'dead';

export type LivenessMessage =
  | {
      op: 'heartbeat';
      client_timestamp_ms?: number;
      metadata?: Record<string, unknown>;
      labels?: Record<string, string>;
      grace_ms: number;
    }
  | { op: 'status' }
  /** What the list needs of an entity: exact last_seen_ms and alive. */
  | { op: 'brief' }
  /** from_ms defaults to to_ms - 1 hour, to_ms to now. */
  | { op: 'history'; from_ms: number | null; to_ms: number | null; limit: number }
  | { op: 'aggregate'; range_ms: number; bucket_ms: number; aggregation: Aggregation; series: SeriesName }
  | { op: 'latency'; range_ms: number; bucket_ms: number }
  | { op: 'uptime'; windows: { name: string; ms: number }[] }
  /** The entity's latest latency anomalies (kept for the administrators' list). */
  | { op: 'anomalies' }
  | { op: 'delete' };

export interface HeartbeatAck {
  alive: boolean;
  entity_id: string;
  client_timestamp_ms: number | null;
  network_delay_ms: number | null;
  server_timestamp_ms: number;
}

export interface LatencyWindow {
  samples: number;
  avg_ms: number | null;
  min_ms: number | null;
  max_ms: number | null;
  std_dev_ms: number | null;
}

export interface StatusSummary {
  status: StatusName;
  status_since_ms: number;
  first_seen_ms: number;
  grace_ms: number;
  /** When the entity turns dead if no heartbeat comes (last_seen + grace). */
  dead_after_ms: number;
  heartbeat_count: number;
  /** Mean gap between the recent heartbeats (null with fewer than two). */
  interval_avg_ms: number | null;
  uptime_24h: UptimeFigures;
  latency_recent: LatencyWindow;
}

export interface StatusView {
  alive: boolean;
  entity_id: string;
  labels: Record<string, string>;
  metadata: Record<string, unknown>;
  last_seen_server_ms: number;
  last_seen_client_ms: number | null;
  latency_ms: number | null;
  network_delay_ms: number | null;
  summary: StatusSummary;
}

export interface HistoryView extends HistorySlice {
  entity_id: string;
}

export interface AggregationView {
  entity_id: string;
  aggregation: Aggregation;
  series: SeriesName;
  bucket_ms: number;
  data: { timestamp_ms: number; value: number }[];
}

export interface LatencyView {
  entity_id: string;
  current_ms: number | null;
  bucket_ms: number;
  stats: { avg: number | null; max: number | null; min: number | null; std_dev: number | null };
  trend: { timestamp_ms: number; avg: number }[];
}

export interface UptimeView {
  entity_id: string;
  uptime: Record<string, UptimeFigures>;
}

export interface BriefView {
  entity_id: string;
  alive: boolean;
  last_seen_ms: number;
}

/** A latency anomaly as published in `entity.liveness_anomaly`, without the entity fields. */
export interface AnomalyEntry {
  timestamp_ms: number;
  latency_ms: number;
  mean_ms: number;
  std_dev_ms: number;
  z_score: number;
  direction: 'high' | 'low';
  window_samples: number;
}

/** Anomalies an entity keeps (the newest; its events carry them all). */
export const ANOMALIES_KEPT = 20;

export interface AnomaliesView {
  entity_id: string;
  alive: boolean;
  last_seen_ms: number;
  labels: Record<string, string>;
  /** Anomalies since the entity was first seen (this incarnation). */
  anomaly_count: number;
  /** The newest ANOMALIES_KEPT, newest first. */
  anomalies: AnomalyEntry[];
}

export type LivenessReply = HeartbeatAck | StatusView | BriefView | AnomaliesView | HistoryView | AggregationView | LatencyView | UptimeView | { deleted: true } | undefined;

/** Messages from an entity to its tenant's index (see index-state.ts). */
export type IndexMessage =
  | {
      op: 'upsert';
      entity_id: string;
      incarnation: string;
      seq: number;
      first_seen_ms: number;
      last_seen_ms: number;
      alive: boolean;
      history_start_ms: number | null;
      /** [start, end] of an outage that began or ended (end -1: ongoing). */
      outage?: [number, number];
    }
  | { op: 'remove'; entity_id: string; incarnation: string };

// ---- the index (one per tenant) ----

export type IndexQuery = {
  op: 'list';
  range_ms: number;
  alive?: boolean;
  uptime_below?: number;
  limit: number;
};

export interface EntityBrief {
  entity_id: string;
  alive: boolean;
  last_seen_ms: number;
  uptime: number;
}

export interface IndexListView {
  entities: EntityBrief[];
  total_matched: number;
}
