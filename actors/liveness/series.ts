import type { RecordWrite } from '../../runtime/index.js';
import { livenessPolicy as policy, type Aggregation, type HistorySlice, type SeriesName } from './messages.js';
import { Rows } from './rows.js';

/**
 * The time series of one entity, in three tiers (as Uptime Kuma's
 * heartbeat / stat_minutely / stat_hourly tables, or Prometheus recording
 * rules over raw samples):
 *
 * - raw samples: one per heartbeat, [server time, network delay], the newest
 *   `raw_samples_max` within `raw_retention_ms`; one record each.
 * - minute rollups (6 h) and hour rollups (7 d): per cell, heartbeat count and
 *   a mergeable latency summary (count, sum, m2, min, max, first, last).
 *
 * A heartbeat writes O(1) records. A rollup cell is written only when it has
 * to be: a cell that can be rebuilt from the finer tier at activation (every
 * sample of it is still retained there) is kept in memory only; just before
 * the finer tier drops a sample of a cell, the cell is persisted, and from then
 * on it is rewritten whenever it changes. So at steady state a heartbeat costs
 * one put (its raw sample) and one delete (the evicted sample), and a rollup
 * record is written about once per cell.
 */

/** Mergeable summary of samples (variance by Chan et al.'s parallel formula). */
export interface Summary {
  count: number;
  sum: number;
  /** Sum of squared deviations from the mean. */
  m2: number;
  min: number;
  max: number;
  first: number;
  last: number;
}

export function emptySummary(): Summary {
  return { count: 0, sum: 0, m2: 0, min: Infinity, max: -Infinity, first: NaN, last: NaN };
}

export function addValue(summary: Summary, value: number): void {
  const mean_before = summary.count === 0 ? 0 : summary.sum / summary.count;
  summary.count += 1;
  summary.sum += value;
  const mean_after = summary.sum / summary.count;
  summary.m2 += (value - mean_before) * (value - mean_after);
  if (value < summary.min) summary.min = value;
  if (value > summary.max) summary.max = value;
  if (summary.count === 1) summary.first = value;
  summary.last = value;
}

/** Merges `later` (samples after those of `target`) into `target`. */
export function mergeSummary(target: Summary, later: Summary): void {
  if (later.count === 0) return;
  if (target.count === 0) {
    Object.assign(target, later);
    return;
  }
  const count = target.count + later.count;
  const delta = later.sum / later.count - target.sum / target.count;
  target.m2 += later.m2 + (delta * delta * target.count * later.count) / count;
  target.count = count;
  target.sum += later.sum;
  target.min = Math.min(target.min, later.min);
  target.max = Math.max(target.max, later.max);
  target.last = later.last;
}

export function aggregate(summary: Summary, aggregation: Aggregation): number {
  switch (aggregation) {
    case 'avg':
      return summary.sum / summary.count;
    case 'sum':
      return summary.sum;
    case 'min':
      return summary.min;
    case 'max':
      return summary.max;
    case 'count':
      return summary.count;
    case 'first':
      return summary.first;
    case 'last':
      return summary.last;
    case 'range':
      return summary.max - summary.min;
    case 'std.p':
      return Math.sqrt(Math.max(0, summary.m2) / summary.count);
  }
}

/** The latency sample a network delay gives: clamped at 0; none (NaN) for a clock error. */
export function latencyOfDelay(delay_ms: number): number {
  if (Number.isNaN(delay_ms) || Math.abs(delay_ms) > policy.latency_clock_error_ms) return NaN;
  return Math.max(0, delay_ms);
}

/** Fixed-width base-36 so record subkeys sort in numeric order. */
export function sortableNumber(value: number): string {
  return value.toString(36).padStart(11, '0');
}

// ---- raw samples ----

const RAW_TIME = 0;
const RAW_DELAY = 1;
export const RAW_PREFIX = 'r:';

export class RawSamples {
  readonly rows = new Rows(2, policy.raw_samples_max, 16);
  /** Heartbeat number of the newest row (1 for an entity's first heartbeat). */
  newest_seq = 0;

  get length(): number {
    return this.rows.length;
  }
  time(index: number): number {
    return this.rows.get(index, RAW_TIME);
  }
  /** Network delay in ms, NaN when the heartbeat carried no client timestamp. */
  delay(index: number): number {
    return this.rows.get(index, RAW_DELAY);
  }
  latency(index: number): number {
    return latencyOfDelay(this.delay(index));
  }
  seq(index: number): number {
    return this.newest_seq - (this.rows.length - 1 - index);
  }
  subkey(index: number): string {
    return RAW_PREFIX + sortableNumber(this.seq(index));
  }
  /** First index with time >= time_ms. */
  lowerBound(time_ms: number): number {
    return this.rows.lowerBound(RAW_TIME, time_ms);
  }
}

// ---- rollups ----

const CELL_START = 0;
const CELL_HEARTBEATS = 1;
const CELL_COUNT = 2;
const CELL_SUM = 3;
const CELL_M2 = 4;
const CELL_MIN = 5;
const CELL_MAX = 6;
const CELL_FIRST = 7;
const CELL_LAST = 8;
const CELL_PERSISTED = 9;
const CELL_WIDTH = 10;

/** Stored value of a rollup cell (its start is in the subkey). */
export type CellRecord = [heartbeats: number, count: number, sum: number, m2: number, min: number, max: number, first: number, last: number];

export class Rollups {
  readonly rows: Rows;

  constructor(
    readonly prefix: string,
    readonly resolution_ms: number,
    readonly retention_ms: number,
  ) {
    this.rows = new Rows(CELL_WIDTH, Math.ceil(retention_ms / resolution_ms) + 3, 8);
  }

  get length(): number {
    return this.rows.length;
  }
  cellStart(time_ms: number): number {
    return Math.floor(time_ms / this.resolution_ms) * this.resolution_ms;
  }
  start(index: number): number {
    return this.rows.get(index, CELL_START);
  }
  heartbeats(index: number): number {
    return this.rows.get(index, CELL_HEARTBEATS);
  }
  persisted(index: number): boolean {
    return this.rows.get(index, CELL_PERSISTED) === 1;
  }
  subkey(index: number): string {
    return this.prefix + sortableNumber(this.start(index));
  }
  /** Index of the cell starting at `start`, or -1. */
  indexOf(start: number): number {
    const index = this.rows.lowerBound(CELL_START, start);
    return index < this.rows.length && this.start(index) === start ? index : -1;
  }
  lowerBound(start: number): number {
    return this.rows.lowerBound(CELL_START, start);
  }

  latencySummary(index: number): Summary {
    const rows = this.rows;
    return {
      count: rows.get(index, CELL_COUNT),
      sum: rows.get(index, CELL_SUM),
      m2: rows.get(index, CELL_M2),
      min: rows.get(index, CELL_MIN),
      max: rows.get(index, CELL_MAX),
      first: rows.get(index, CELL_FIRST),
      last: rows.get(index, CELL_LAST),
    };
  }

  /** Appends an empty cell at the back (cells are in time order). */
  pushCell(start: number, persisted: boolean): number {
    const index = this.rows.push();
    const rows = this.rows;
    rows.set(index, CELL_START, start);
    rows.set(index, CELL_HEARTBEATS, 0);
    rows.set(index, CELL_COUNT, 0);
    rows.set(index, CELL_SUM, 0);
    rows.set(index, CELL_M2, 0);
    rows.set(index, CELL_MIN, Infinity);
    rows.set(index, CELL_MAX, -Infinity);
    rows.set(index, CELL_PERSISTED, persisted ? 1 : 0);
    return index;
  }

  setCell(index: number, record: CellRecord): void {
    for (let column = 0; column < record.length; column++) this.rows.set(index, CELL_HEARTBEATS + column, record[column]);
  }

  /** Adds heartbeats and a latency summary to a cell. */
  mergeInto(index: number, heartbeats: number, latency: Summary): void {
    const rows = this.rows;
    rows.set(index, CELL_HEARTBEATS, rows.get(index, CELL_HEARTBEATS) + heartbeats);
    if (latency.count === 0) return;
    const summary = this.latencySummary(index);
    mergeSummary(summary, latency);
    rows.set(index, CELL_COUNT, summary.count);
    rows.set(index, CELL_SUM, summary.sum);
    rows.set(index, CELL_M2, summary.m2);
    rows.set(index, CELL_MIN, summary.min);
    rows.set(index, CELL_MAX, summary.max);
    rows.set(index, CELL_FIRST, summary.first);
    rows.set(index, CELL_LAST, summary.last);
  }

  /** Adds one heartbeat (with its latency, NaN for none) to the cell of `time_ms`; the cell is the last or a new one. */
  addSample(time_ms: number, latency_ms: number, writes: RecordWrite[]): void {
    const start = this.cellStart(time_ms);
    let index = this.rows.length - 1;
    if (index < 0 || this.start(index) !== start) index = this.pushCell(start, false);
    const rows = this.rows;
    rows.set(index, CELL_HEARTBEATS, rows.get(index, CELL_HEARTBEATS) + 1);
    if (!Number.isNaN(latency_ms)) {
      const count = rows.get(index, CELL_COUNT);
      const sum = rows.get(index, CELL_SUM);
      const mean_before = count === 0 ? 0 : sum / count;
      const mean_after = (sum + latency_ms) / (count + 1);
      rows.set(index, CELL_COUNT, count + 1);
      rows.set(index, CELL_SUM, sum + latency_ms);
      rows.set(index, CELL_M2, rows.get(index, CELL_M2) + (latency_ms - mean_before) * (latency_ms - mean_after));
      if (latency_ms < rows.get(index, CELL_MIN)) rows.set(index, CELL_MIN, latency_ms);
      if (latency_ms > rows.get(index, CELL_MAX)) rows.set(index, CELL_MAX, latency_ms);
      if (count === 0) rows.set(index, CELL_FIRST, latency_ms);
      rows.set(index, CELL_LAST, latency_ms);
    }
    if (this.persisted(index)) writes.push(this.write(index));
  }

  /** Makes the cell durable; from now on every change to it is written. */
  persist(index: number, writes: RecordWrite[]): void {
    if (this.persisted(index)) return;
    this.rows.set(index, CELL_PERSISTED, 1);
    writes.push(this.write(index));
  }

  write(index: number): RecordWrite {
    const rows = this.rows;
    const value: CellRecord = [
      rows.get(index, CELL_HEARTBEATS),
      rows.get(index, CELL_COUNT),
      rows.get(index, CELL_SUM),
      rows.get(index, CELL_M2),
      rows.get(index, CELL_MIN),
      rows.get(index, CELL_MAX),
      rows.get(index, CELL_FIRST),
      rows.get(index, CELL_LAST),
    ];
    return { subkey: this.subkey(index), value };
  }
}

// ---- the three tiers together ----

export const MINUTE_PREFIX = 'm:';
export const HOUR_PREFIX = 'h:';

export interface SeriesRecords {
  /** [heartbeat number, [server time, delay or null]] in heartbeat order. */
  raw: [seq: number, value: [number, number | null]][];
  minutes: [start: number, value: CellRecord][];
  hours: [start: number, value: CellRecord][];
}

export interface BucketPoint {
  timestamp_ms: number;
  value: number;
}

export interface SeriesBounds {
  first_seen_ms: number;
  last_seen_ms: number;
  heartbeat_count: number;
  /** The latest time retention was applied (cells expired by then are not rebuilt). */
  pruned_at_ms: number;
}

export class EntitySeries {
  readonly raw = new RawSamples();
  readonly minutes = new Rollups(MINUTE_PREFIX, policy.minute_resolution_ms, policy.minute_retention_ms);
  readonly hours = new Rollups(HOUR_PREFIX, policy.hour_resolution_ms, policy.hour_retention_ms);
  first_seen_ms = NaN;
  last_seen_ms = NaN;

  /**
   * Rebuilds the tiers from stored records. Stored cells are authoritative;
   * every other cell is rebuilt from the finer tier, except cells that had
   * expired when retention was last applied.
   */
  static load(records: SeriesRecords, bounds: SeriesBounds): EntitySeries {
    const series = new EntitySeries();
    series.first_seen_ms = bounds.first_seen_ms;
    series.last_seen_ms = bounds.last_seen_ms;
    const raw = series.raw;
    for (const [seq, [time_ms, delay_ms]] of records.raw) {
      const index = raw.rows.push();
      raw.rows.set(index, RAW_TIME, time_ms);
      raw.rows.set(index, RAW_DELAY, delay_ms ?? NaN);
      raw.newest_seq = seq;
    }
    if (raw.length === 0) raw.newest_seq = bounds.heartbeat_count;

    rebuildTier(series.minutes, records.minutes, bounds.pruned_at_ms, (add) => {
      for (let i = 0; i < raw.length; i++) {
        const summary = emptySummary();
        const latency = raw.latency(i);
        if (!Number.isNaN(latency)) addValue(summary, latency);
        add(raw.time(i), 1, summary);
      }
    });
    rebuildTier(series.hours, records.hours, bounds.pruned_at_ms, (add) => {
      const minutes = series.minutes;
      for (let i = 0; i < minutes.length; i++) add(minutes.start(i), minutes.heartbeats(i), minutes.latencySummary(i));
    });
    return series;
  }

  /**
   * Every sample with a server time >= this is in the tier. Computed from
   * what the tier holds (not from what it dropped), so a reloaded activation
   * gives the same answer as the one it replaces.
   */
  completeFrom(tier: RawSamples | Rollups): number {
    if (tier.length === 0) return this.raw.newest_seq > 0 ? this.last_seen_ms + 1 : -Infinity;
    if (tier instanceof RawSamples) return tier.seq(0) === 1 ? -Infinity : tier.time(0) + 1;
    return tier.start(0) <= this.first_seen_ms ? -Infinity : tier.start(0);
  }

  /** Records one heartbeat. `time_ms` is never before the previous sample. */
  append(time_ms: number, delay_ms: number, writes: RecordWrite[]): void {
    const raw = this.raw;
    while (raw.length >= policy.raw_samples_max) this.dropOldestRaw(writes);
    const index = raw.rows.push();
    raw.rows.set(index, RAW_TIME, time_ms);
    raw.rows.set(index, RAW_DELAY, delay_ms);
    raw.newest_seq += 1;
    if (raw.newest_seq === 1) this.first_seen_ms = time_ms;
    this.last_seen_ms = time_ms;
    writes.push({ subkey: raw.subkey(index), value: [time_ms, Number.isNaN(delay_ms) ? null : delay_ms] });
    const latency = latencyOfDelay(delay_ms);
    this.minutes.addSample(time_ms, latency, writes);
    this.hours.addSample(time_ms, latency, writes);
  }

  /** Drops what is past retention at `now_ms`, coarsest tier first. */
  prune(now_ms: number, writes: RecordWrite[]): void {
    const hours = this.hours;
    while (hours.length > 0 && hours.start(0) + hours.resolution_ms <= now_ms - hours.retention_ms) this.dropOldestCell(hours, null, writes);
    const minutes = this.minutes;
    while (minutes.length > 0 && minutes.start(0) + minutes.resolution_ms <= now_ms - minutes.retention_ms) {
      this.dropOldestCell(minutes, hours, writes);
    }
    const raw = this.raw;
    while (raw.length > 0 && raw.time(0) <= now_ms - policy.raw_retention_ms) this.dropOldestRaw(writes);
  }

  /** When the next item falls out of retention (Infinity if nothing is stored). */
  nextExpiryMs(): number {
    let next = Infinity;
    if (this.raw.length > 0) next = Math.min(next, this.raw.time(0) + policy.raw_retention_ms);
    for (const tier of [this.minutes, this.hours]) {
      if (tier.length > 0) next = Math.min(next, tier.start(0) + tier.resolution_ms + tier.retention_ms);
    }
    return next;
  }

  /** Deletes every record and empties the tiers. */
  deleteAll(writes: RecordWrite[]): void {
    for (let i = 0; i < this.raw.length; i++) writes.push({ subkey: this.raw.subkey(i), value: undefined });
    for (const tier of [this.minutes, this.hours]) {
      for (let i = 0; i < tier.length; i++) if (tier.persisted(i)) writes.push({ subkey: tier.subkey(i), value: undefined });
      tier.rows.clear();
    }
    this.raw.rows.clear();
    this.raw.newest_seq = 0;
    this.first_seen_ms = NaN;
    this.last_seen_ms = NaN;
  }

  private dropOldestRaw(writes: RecordWrite[]): void {
    const raw = this.raw;
    const time_ms = raw.time(0);
    const cell = this.minutes.indexOf(this.minutes.cellStart(time_ms));
    if (cell >= 0) this.minutes.persist(cell, writes);
    writes.push({ subkey: raw.subkey(0), value: undefined });
    raw.rows.shift();
  }

  private dropOldestCell(tier: Rollups, coarser: Rollups | null, writes: RecordWrite[]): void {
    const start = tier.start(0);
    if (coarser) {
      const cell = coarser.indexOf(coarser.cellStart(start));
      if (cell >= 0) coarser.persist(cell, writes);
    }
    if (tier.persisted(0)) writes.push({ subkey: tier.subkey(0), value: undefined });
    tier.rows.shift();
  }

  // ---- reads ----

  /**
   * The last `limit` raw samples with from_ms <= time <= to_ms, oldest first;
   * has_more when older samples in the range were left out.
   */
  history(from_ms: number, to_ms: number, limit: number): HistorySlice {
    const raw = this.raw;
    const low = raw.lowerBound(from_ms);
    const high = raw.lowerBound(Math.floor(to_ms) + 1);
    const total = Math.max(0, high - low);
    const start = Math.max(low, high - limit);
    const samples: HistorySlice['samples'] = [];
    for (let i = start; i < high; i++) {
      const latency = raw.latency(i);
      samples.push({ timestamp_ms: raw.time(i), latency_ms: Number.isNaN(latency) ? null : Math.round(latency) });
    }
    return { samples, total_in_range: total, has_more: start > low };
  }

  /**
   * The finest tier that holds everything from `from_ms` on: raw samples,
   * else minute rollups, else hour rollups (which hold all that is left).
   */
  sourceFor(from_ms: number): RawSamples | Rollups {
    if (this.completeFrom(this.raw) <= from_ms) return this.raw;
    if (this.completeFrom(this.minutes) <= from_ms) return this.minutes;
    return this.hours;
  }

  /**
   * Summaries per bucket of `bucket_ms` (aligned to the epoch) over
   * [from_ms, to_ms], empty buckets left out. From a rollup tier the bucket is
   * rounded up to a multiple of the tier's resolution, and a cell counts in
   * the bucket of its start (the range's first cell may reach up to one
   * resolution before from_ms). `bucket_ms` Infinity gives one summary.
   */
  buckets(series: SeriesName, from_ms: number, to_ms: number, bucket_ms: number): { bucket_ms: number; points: { timestamp_ms: number; summary: Summary }[] } {
    const source = this.sourceFor(from_ms);
    const points: { timestamp_ms: number; summary: Summary }[] = [];
    let effective_ms = bucket_ms;
    const bucketOf = (time_ms: number) => (effective_ms === Infinity ? from_ms : Math.floor(time_ms / effective_ms) * effective_ms);
    const current = (time_ms: number): Summary => {
      const bucket = bucketOf(time_ms);
      const last = points[points.length - 1];
      if (last && last.timestamp_ms === bucket) return last.summary;
      const point = { timestamp_ms: bucket, summary: emptySummary() };
      points.push(point);
      return point.summary;
    };
    if (source instanceof RawSamples) {
      const end = source.lowerBound(Math.floor(to_ms) + 1);
      for (let i = source.lowerBound(from_ms); i < end; i++) {
        if (series === 'heartbeat') addValue(current(source.time(i)), 1);
        else {
          const latency = source.latency(i);
          if (!Number.isNaN(latency)) addValue(current(source.time(i)), latency);
        }
      }
    } else {
      if (effective_ms !== Infinity) effective_ms = Math.max(1, Math.ceil(bucket_ms / source.resolution_ms)) * source.resolution_ms;
      for (let i = source.lowerBound(from_ms - source.resolution_ms + 1); i < source.length && source.start(i) <= to_ms; i++) {
        if (series === 'heartbeat') {
          const heartbeats = source.heartbeats(i);
          if (heartbeats > 0) mergeSummary(current(source.start(i)), { count: heartbeats, sum: heartbeats, m2: 0, min: 1, max: 1, first: 1, last: 1 });
        } else {
          const summary = source.latencySummary(i);
          if (summary.count > 0) mergeSummary(current(source.start(i)), summary);
        }
      }
    }
    return { bucket_ms: effective_ms, points: points.filter((point) => point.summary.count > 0) };
  }

  /** The newest `count` latency samples (walking back at most `rows_max` heartbeats). */
  recentLatencies(count: number, rows_max: number): number[] {
    const values: number[] = [];
    const raw = this.raw;
    for (let i = raw.length - 1, walked = 0; i >= 0 && values.length < count && walked < rows_max; i--, walked++) {
      const latency = raw.latency(i);
      if (!Number.isNaN(latency)) values.push(latency);
    }
    return values;
  }
}

/** Loads stored cells of a tier and rebuilds the others from the finer tier. */
function rebuildTier(
  tier: Rollups,
  stored: [start: number, value: CellRecord][],
  pruned_at_ms: number,
  source: (add: (time_ms: number, heartbeats: number, latency: Summary) => void) => void,
): void {
  const storedStarts = new Set<number>();
  for (const [start] of stored) storedStarts.add(start);
  const rebuilt = new Map<number, { heartbeats: number; latency: Summary }>();
  source((time_ms, heartbeats, latency) => {
    const start = tier.cellStart(time_ms);
    // Same rule as EntitySeries.prune: such a cell had expired (and was dropped).
    if (storedStarts.has(start) || start + tier.resolution_ms <= pruned_at_ms - tier.retention_ms) return;
    let cell = rebuilt.get(start);
    if (!cell) rebuilt.set(start, (cell = { heartbeats: 0, latency: emptySummary() }));
    cell.heartbeats += heartbeats;
    mergeSummary(cell.latency, latency);
  });
  const cells: { start: number; stored?: CellRecord; rebuilt?: { heartbeats: number; latency: Summary } }[] = [];
  for (const [start, value] of stored) cells.push({ start, stored: value });
  for (const [start, value] of rebuilt) cells.push({ start, rebuilt: value });
  cells.sort((a, b) => a.start - b.start);
  for (const cell of cells) {
    const index = tier.pushCell(cell.start, cell.stored !== undefined);
    if (cell.stored) tier.setCell(index, cell.stored);
    else tier.mergeInto(index, cell.rebuilt!.heartbeats, cell.rebuilt!.latency);
  }
}
