/**
 * Every bound of the liveness area, in one place (unit last). docs/api/liveness.md
 * documents each of them; change both together.
 */
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
