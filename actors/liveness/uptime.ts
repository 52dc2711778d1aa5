import { livenessPolicy as policy, type UptimeFigures } from './messages.js';

/**
 * Uptime from heartbeat gaps. An entity is up from each heartbeat until that
 * heartbeat + the grace window; a gap between two heartbeats longer than the
 * grace window is an outage from (previous heartbeat + grace) to the next
 * heartbeat, or to now while no heartbeat has come. That is exactly the time
 * during which GET /liveness/{id} answers alive=false, so the uptime
 * percentage is the share of the observed time the entity was reported alive.
 *
 * Observed time of a window W: from max(now - W, first heartbeat, history
 * start) to now. The history start moves forward only when the oldest outage
 * is dropped to keep at most `outages_max`; the window then covers only the
 * part of time whose outages are all still known, so the figures stay exact.
 */
export interface OutageLog {
  /** [start_ms, end_ms, start_ms, end_ms, ...] in start order; end -1 = ongoing. */
  pairs: number[];
  history_start_ms: number;
}

export const ONGOING = -1;

export function emptyOutageLog(): OutageLog {
  return { pairs: [], history_start_ms: -Infinity };
}

/** Index of the pair starting at start_ms, or -1. */
export function findOutage(log: OutageLog, start_ms: number): number {
  for (let i = log.pairs.length - 2; i >= 0; i -= 2) {
    if (log.pairs[i] === start_ms) return i;
    if (log.pairs[i] < start_ms) break;
  }
  return -1;
}

/**
 * Adds or updates the outage starting at start_ms. An end never goes back
 * to ongoing, so re-delivered or reordered updates converge.
 */
export function upsertOutage(log: OutageLog, start_ms: number, end_ms: number): void {
  const index = findOutage(log, start_ms);
  if (index >= 0) {
    if (end_ms !== ONGOING) log.pairs[index + 1] = end_ms;
    return;
  }
  let at = log.pairs.length;
  while (at > 0 && log.pairs[at - 2] > start_ms) at -= 2;
  log.pairs.splice(at, 0, start_ms, end_ms);
}

/**
 * Drops outages that ended before now - retention, and the oldest beyond
 * outages_max (moving the history start past them). Returns the dropped starts.
 */
export function pruneOutages(log: OutageLog, now_ms: number): number[] {
  const dropped: number[] = [];
  const pairs = log.pairs;
  let drop = 0;
  while (drop < pairs.length) {
    const end = pairs[drop + 1];
    const tooMany = (pairs.length - drop) / 2 > policy.outages_max;
    const expired = end !== ONGOING && end < now_ms - policy.outage_retention_ms;
    if (!tooMany && !expired) break;
    if (tooMany) log.history_start_ms = Math.max(log.history_start_ms, end === ONGOING ? now_ms : end);
    dropped.push(pairs[drop]);
    drop += 2;
  }
  if (drop > 0) pairs.splice(0, drop);
  return dropped;
}

/**
 * Uptime over the window [now - window_ms, now]. `overdue_from_ms` is the
 * start of an outage not yet in the log (the entity is past its grace window
 * and the alarm has not recorded it yet), or null.
 */
export function uptimeOver(
  log: OutageLog,
  first_seen_ms: number,
  now_ms: number,
  window_ms: number,
  overdue_from_ms: number | null,
): UptimeFigures {
  const from_ms = Math.max(now_ms - window_ms, first_seen_ms, log.history_start_ms);
  const observed_ms = now_ms - from_ms;
  if (observed_ms <= 0) return { percentage: 100, outages: 0, downtime_seconds: 0 };
  let downtime_ms = 0;
  let outages = 0;
  const count = (start_ms: number, end_ms: number) => {
    const overlap_ms = Math.min(end_ms, now_ms) - Math.max(start_ms, from_ms);
    if (overlap_ms > 0) {
      downtime_ms += overlap_ms;
      outages += 1;
    }
  };
  const pairs = log.pairs;
  for (let i = 0; i < pairs.length; i += 2) count(pairs[i], pairs[i + 1] === ONGOING ? now_ms : pairs[i + 1]);
  if (overdue_from_ms !== null) count(overdue_from_ms, now_ms);
  return {
    percentage: roundTo(100 * (1 - downtime_ms / observed_ms), 4),
    outages,
    downtime_seconds: Math.round(downtime_ms / 1000),
  };
}

export function roundTo(value: number, decimals: number): number {
  const factor = 10 ** decimals;
  return Math.round(value * factor) / factor;
}

const windowUnits_ms: Record<string, number> = { s: 1000, m: 60_000, h: 3600_000, d: 86_400_000, w: 604_800_000 };

/**
 * Parses an uptime window such as "90s", "15m", "1h", "24h", "7d", "2w".
 * Returns its length in ms, or an error text.
 */
export function parseWindow(text: string): { ms: number } | { error: string } {
  const match = /^([1-9][0-9]{0,6})([smhdw])$/.exec(text);
  if (!match) return { error: 'must be a positive integer followed by s, m, h, d or w (for example 1h, 24h, 7d)' };
  const ms = Number(match[1]) * windowUnits_ms[match[2]];
  if (ms > policy.uptime_window_ms_max) return { error: `must be at most ${policy.uptime_window_ms_max / 86_400_000}d` };
  return { ms };
}
