import { waitingRoomLimits, type AnalyticsReport } from './messages.js';

/**
 * Hourly analytics and the observed admission rate of a room (pure helpers).
 * Hour buckets are keyed by the hour's start (epoch-ms); each is one record.
 */
export const HOUR_MS = 3_600_000;
const MINUTE_MS = 60_000;

export interface HourStats {
  admissions: number;
  rejections: number;
  abandonments: number;
  /** Sum, min and max of admitted members' wait, ms. */
  wait_ms_sum: number;
  wait_ms_min: number | null;
  wait_ms_max: number | null;
}

export interface Totals {
  admitted: number;
  rejected: number;
  abandoned: number;
  wait_ms_sum: number;
}

/** Admissions per minute for the recent minutes: [minute index, count]. */
export type RateBuckets = [number, number][];

export function hourOf(now: number): number {
  return Math.floor(now / HOUR_MS) * HOUR_MS;
}

export function emptyHour(): HourStats {
  return { admissions: 0, rejections: 0, abandonments: 0, wait_ms_sum: 0, wait_ms_min: null, wait_ms_max: null };
}

export function recordAdmission(hour: HourStats, wait_ms: number): void {
  hour.admissions++;
  hour.wait_ms_sum += wait_ms;
  hour.wait_ms_min = hour.wait_ms_min === null ? wait_ms : Math.min(hour.wait_ms_min, wait_ms);
  hour.wait_ms_max = hour.wait_ms_max === null ? wait_ms : Math.max(hour.wait_ms_max, wait_ms);
}

/** Counts `admitted` admissions at `now` into the minute buckets, dropping old minutes. */
export function addToRate(buckets: RateBuckets, now: number, admitted: number): RateBuckets {
  const minute = Math.floor(now / MINUTE_MS);
  const oldest = minute - waitingRoomLimits.admission_rate_window_ms / MINUTE_MS + 1;
  const kept = buckets.filter(([m]) => m >= oldest);
  const last = kept[kept.length - 1];
  if (last && last[0] === minute) last[1] += admitted;
  else kept.push([minute, admitted]);
  return kept;
}

/**
 * Members admitted per second, observed over the last ten minutes (or the
 * room's age, at least one admission interval, for a younger room). 0 when
 * nothing was admitted in that window.
 */
export function observedRate(buckets: RateBuckets, now: number, created_at: number, interval_seconds: number): number {
  const minute = Math.floor(now / MINUTE_MS);
  const oldest = minute - waitingRoomLimits.admission_rate_window_ms / MINUTE_MS + 1;
  let admitted = 0;
  for (const [m, count] of buckets) if (m >= oldest && m <= minute) admitted += count;
  if (admitted === 0) return 0;
  const window_s = Math.min(waitingRoomLimits.admission_rate_window_ms / 1000, Math.max(interval_seconds, (now - created_at) / 1000));
  return admitted / window_s;
}

/**
 * The report for [start_ms, end_ms): every hour overlapping the range, zero
 * filled, oldest first; at most `limit` of them (the most recent ones). The
 * summary covers every hour of the range, whatever the limit.
 */
export function analyticsReport(hours: Map<number, HourStats>, start_ms: number, end_ms: number, limit: number): AnalyticsReport {
  const first = hourOf(start_ms);
  const rows: AnalyticsReport['hourly_stats'] = [];
  let admissions = 0;
  let rejections = 0;
  let abandonments = 0;
  let wait_ms_sum = 0;
  let wait_ms_min: number | null = null;
  let wait_ms_max: number | null = null;
  for (let hour = first; hour < end_ms; hour += HOUR_MS) {
    const stats = hours.get(hour) ?? emptyHour();
    admissions += stats.admissions;
    rejections += stats.rejections;
    abandonments += stats.abandonments;
    wait_ms_sum += stats.wait_ms_sum;
    if (stats.wait_ms_min !== null) wait_ms_min = wait_ms_min === null ? stats.wait_ms_min : Math.min(wait_ms_min, stats.wait_ms_min);
    if (stats.wait_ms_max !== null) wait_ms_max = wait_ms_max === null ? stats.wait_ms_max : Math.max(wait_ms_max, stats.wait_ms_max);
    rows.push({
      hour,
      admissions: stats.admissions,
      rejections: stats.rejections,
      abandonments: stats.abandonments,
      average_wait_time_seconds: stats.admissions > 0 ? stats.wait_ms_sum / stats.admissions / 1000 : 0,
    });
  }
  const outcomes = admissions + rejections + abandonments;
  const ratio = (part: number) => (outcomes > 0 ? part / outcomes : 0);
  return {
    hourly_stats: rows.length > limit ? rows.slice(rows.length - limit) : rows,
    summary: {
      abandonment_rate: ratio(abandonments),
      admission_rate: ratio(admissions),
      average_wait_time_seconds: admissions > 0 ? wait_ms_sum / admissions / 1000 : 0,
      max_wait_time_seconds: wait_ms_max === null ? 0 : Math.round(wait_ms_max / 1000),
      min_wait_time_seconds: wait_ms_min === null ? 0 : Math.round(wait_ms_min / 1000),
      rejection_rate: ratio(rejections),
      total_abandonments: abandonments,
      total_admissions: admissions,
      total_rejections: rejections,
    },
    start_ms,
    end_ms,
  };
}
