/**
 * Progress of a long operator command (drain, rebalance): how much is done out of the total and
 * when it should end, estimated from timed samples of the count done. Pure; the CLI samples at
 * each poll and prints the line (cluster/cli.ts). Tested in test/unit/cluster-progress.test.ts.
 */

export interface ProgressSample {
  at_ms: number;
  done: number;
}

export interface ProgressEstimate {
  done: number;
  total: number;
  /** 0 to 100, whole. */
  percent: number;
  /** Time left at the recent rate; null until something has been done. */
  eta_ms: number | null;
}

/** The rate is measured over the last this-many ms, so the ETA follows the current pace. */
export const RATE_WINDOW_MS = 30_000;

/** `samples` oldest first, `done` never above `total`. */
export function estimateProgress(samples: ProgressSample[], total: number, windowMs = RATE_WINDOW_MS): ProgressEstimate {
  const last = samples[samples.length - 1];
  const done = Math.min(total, Math.max(0, last?.done ?? 0));
  const percent = total === 0 ? 100 : Math.floor((done / total) * 100);
  if (!last || done >= total) return { done, total, percent, eta_ms: done >= total ? 0 : null };
  const recent = samples.find((sample) => sample.at_ms >= last.at_ms - windowMs)!;
  // Nothing moved within the window: the whole run's rate, if anything moved at all.
  const from = recent.done < last.done ? recent : samples[0]!;
  const elapsed = last.at_ms - from.at_ms;
  const moved = last.done - from.done;
  if (moved <= 0 || elapsed <= 0) return { done, total, percent, eta_ms: null };
  return { done, total, percent, eta_ms: Math.round(((total - done) * elapsed) / moved) };
}

/** "850 ms", "4.1 s", "2 min 05 s". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)} min ${String(seconds % 60).padStart(2, '0')} s`;
}

/** "drain n2: 3/8 partitions moved (37%), about 4.1 s left". */
export function formatProgress(label: string, estimate: ProgressEstimate, unit = 'partitions moved'): string {
  const head = `${label}: ${estimate.done}/${estimate.total} ${unit} (${estimate.percent}%)`;
  if (estimate.done >= estimate.total) return `${head}, done`;
  return `${head}, ${estimate.eta_ms === null ? 'time left unknown until one moves' : `about ${formatDuration(estimate.eta_ms)} left`}`;
}

/**
 * Off a terminal (a log, CI) progress is printed as lines, not redrawn: one when the count
 * changes, else one per `periodMs`, so a long wait shows it is alive without flooding the log.
 */
export function shouldPrintLine(previous: { done: number; at_ms: number } | null, done: number, now_ms: number, periodMs: number): boolean {
  return previous === null || previous.done !== done || now_ms - previous.at_ms >= periodMs;
}
