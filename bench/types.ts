/**
 * One row of the benchmark table. Every bench/*.bench.ts module exports
 * `run(): Promise<BenchRow[]>`; bench/run-all.ts runs them all and prints one table.
 */
export interface BenchRow {
  /** Group, e.g. "runtime", "locks (HTTP)", "waiting room". */
  area: string;
  /** What was measured, e.g. "tell messages". */
  scenario: string;
  /** e.g. 5_300_000 */
  value: number;
  /** e.g. "msg/s", "req/s", "ms", "bytes" */
  unit: string;
  /** Latency percentiles, target, or other context. */
  note?: string;
}
