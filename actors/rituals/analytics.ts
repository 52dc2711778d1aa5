import type { AnalyticsView, LatenessLeader } from './messages.js';

/**
 * Ritual analytics, pure: the numbers an analytics reply shows, from the
 * running totals (kept incrementally from outcome and lateness deltas) or
 * from a sample of the most recent terminal attempts.
 */
export interface Outcome {
  attempt_id: string;
  outcome: 'completed' | 'failed';
  spread_ms: number | null;
  /** Parts named late by this attempt, with how late when they performed later (null: never). */
  late: Record<string, number | null>;
  /** Of those, the parts whose late performance was a near miss. */
  near_misses: string[];
}

export interface PartLateness {
  late_count: number;
  near_miss_count: number;
  total_late_ms: number;
}

export interface Totals {
  completed: number;
  failed: number;
  parts: Record<string, PartLateness>;
}

/** The lower median (an integer: the spreads are whole ms); 0 for none. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

export function leaders(parts: Record<string, PartLateness>, max: number): LatenessLeader[] {
  return Object.entries(parts)
    .filter(([, lateness]) => lateness.late_count > 0)
    .map(([part_id, lateness]) => ({ part_id, ...lateness }))
    .sort((a, b) => b.late_count - a.late_count || b.near_miss_count - a.near_miss_count || b.total_late_ms - a.total_late_ms || (a.part_id < b.part_id ? -1 : 1))
    .slice(0, max);
}

/**
 * The lateness entry of `part_id` in `parts`, made when missing: always an
 * own property, whatever the id (`parts[id] ??= ...` would return
 * Object.prototype for `__proto__`, and the counts would land on every
 * object of the process).
 */
export function latenessEntry(parts: Record<string, PartLateness>, part_id: string): PartLateness {
  if (Object.hasOwn(parts, part_id)) return parts[part_id];
  const entry: PartLateness = { late_count: 0, near_miss_count: 0, total_late_ms: 0 };
  Object.defineProperty(parts, part_id, { value: entry, enumerable: true, writable: true, configurable: true });
  return entry;
}

/** Lateness per part over some outcomes. */
export function latenessOf(outcomes: readonly Outcome[]): Record<string, PartLateness> {
  const parts: Record<string, PartLateness> = {};
  for (const outcome of outcomes) {
    for (const [part_id, late_by_ms] of Object.entries(outcome.late)) {
      const entry = latenessEntry(parts, part_id);
      entry.late_count += 1;
      if (late_by_ms !== null) entry.total_late_ms += late_by_ms;
      if (outcome.near_misses.includes(part_id)) entry.near_miss_count += 1;
    }
  }
  return parts;
}

export function analyticsView(completed: number, failed: number, spreads: readonly number[], parts: Record<string, PartLateness>, sampled: number, leadersMax: number): AnalyticsView {
  const total = completed + failed;
  return {
    total_attempts: total,
    completed,
    failed,
    success_rate: total === 0 ? 0 : Math.round((completed / total) * 10_000) / 10_000,
    median_spread_ms: median(spreads),
    lateness_leaders: leaders(parts, leadersMax),
    sampled,
  };
}
