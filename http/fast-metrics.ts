import type { Registry } from 'prom-client';

/**
 * Counters and histograms for the per-request path, registered in a
 * prom-client Registry and read like prom-client's own (`get()` gives the
 * same values, /metrics the same text). What differs is the write: prom-client
 * builds and hashes a label string on every `inc` or `observe`, which costs
 * about a microsecond each, six times a request. Here the caller finds a
 * series once by a key of its own (a route's method and path, a kind) and
 * each observation is a few additions on a held object.
 */
type Labels = Record<string, string | number>;

interface MetricValue {
  labels: Labels;
  value: number;
  metricName?: string;
}

interface MetricJson {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  values: MetricValue[];
  aggregator: 'sum';
}

/** Series are kept per label set; past this many, new label sets share one overflow series. */
const SERIES_MAX = 10_000;

/** The series of one metric, each found by the caller's key for its label set. */
abstract class FastMetric<Series extends { readonly labels: Labels }> {
  readonly aggregator = 'sum';
  protected readonly series = new Map<string, Series>();
  private overflow?: Series;
  /** Counts resets: a caller holding a series (seriesOf's result) finds it again once this changed. */
  generation = 0;

  constructor(
    readonly name: string,
    readonly help: string,
    registry: Registry,
  ) {
    registry.registerMetric(this as never);
  }

  protected abstract create(labels: Labels): Series;

  /** The series of `labels`, found by `key` (the caller's name for that label set). */
  seriesOf(key: string, labels: () => Labels): Series {
    let series = this.series.get(key);
    if (series !== undefined) return series;
    if (this.series.size >= SERIES_MAX) return (this.overflow ??= this.create({ overflow: 'true' }));
    series = this.create(labels());
    this.series.set(key, series);
    return series;
  }

  protected all(): Series[] {
    const all = [...this.series.values()];
    if (this.overflow) all.push(this.overflow);
    return all;
  }

  reset(): void {
    this.series.clear();
    this.overflow = undefined;
    this.generation++;
  }
}

export interface CounterSeries {
  readonly labels: Labels;
  value: number;
}

export class FastCounter extends FastMetric<CounterSeries> {
  readonly type = 'counter';

  protected create(labels: Labels): CounterSeries {
    return { labels, value: 0 };
  }

  async get(): Promise<MetricJson> {
    return { name: this.name, help: this.help, type: this.type, values: this.all().map(({ labels, value }) => ({ labels: { ...labels }, value })), aggregator: this.aggregator };
  }
}

export interface HistogramSeries {
  readonly labels: Labels;
  /** Observations per bucket (not cumulative): counts[i] are those <= upperBounds[i] and > upperBounds[i - 1]. */
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

export class FastHistogram extends FastMetric<HistogramSeries> {
  readonly type = 'histogram';

  constructor(
    name: string,
    help: string,
    private readonly upperBounds: readonly number[],
    registry: Registry,
  ) {
    super(name, help, registry);
  }

  protected create(labels: Labels): HistogramSeries {
    return { labels, counts: new Float64Array(this.upperBounds.length), sum: 0, count: 0 };
  }

  observe(series: HistogramSeries, value: number): void {
    const bounds = this.upperBounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        series.counts[i]!++;
        break;
      }
    }
    series.sum += value;
    series.count++;
  }

  /** prom-client's shape: cumulative `_bucket` values with `le`, then +Inf, `_sum` and `_count`, per series. */
  async get(): Promise<MetricJson> {
    const values: MetricValue[] = [];
    for (const { labels, counts, sum, count } of this.all()) {
      let cumulative = 0;
      for (let i = 0; i < this.upperBounds.length; i++) {
        cumulative += counts[i]!;
        values.push({ labels: { le: this.upperBounds[i]!, ...labels }, value: cumulative, metricName: `${this.name}_bucket` });
      }
      values.push({ labels: { le: '+Inf', ...labels }, value: count, metricName: `${this.name}_bucket` });
      values.push({ labels: { ...labels }, value: sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...labels }, value: count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}
