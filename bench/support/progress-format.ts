/**
 * Where a benchmark run is, as one line for stderr: which file of the run, which scenario of the
 * file, and in a timed load phase how long it has left ("[3/12] mq 4/6: send + receive over
 * HTTP, load 4.1 s left"). Pure: bench/support/status-line.ts draws it, run-all.ts passes each
 * file its place in the run. Tested in test/unit/bench-progress.test.ts.
 */

export interface Position {
  index: number;
  count: number;
}

export interface BenchProgress {
  /** The bench file's place in the run (BENCH_FILE_POSITION, set by run-all.ts). */
  file?: Position;
  area: string;
  scenario?: Position & { name: string };
  /** A phase of known length: a load run of fixed duration, or a loop bounded by time (`upTo`). */
  phase?: { label: string; started_ms: number; duration_ms: number; upTo: boolean };
}

/** The variable run-all.ts gives each bench process: "3/12". */
export const FILE_POSITION_ENV = 'BENCH_FILE_POSITION';

export function formatPosition(position: Position): string {
  return `${position.index}/${position.count}`;
}

export function parsePosition(text: string | undefined): Position | undefined {
  const match = /^(\d+)\/(\d+)$/.exec(text ?? '');
  if (!match) return undefined;
  const position = { index: Number(match[1]), count: Number(match[2]) };
  return position.index >= 1 && position.index <= position.count ? position : undefined;
}

/** "4.1 s", "2 min 05 s". */
export function formatSeconds(ms: number): string {
  if (ms < 60_000) return `${(Math.max(0, ms) / 1000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)} min ${String(seconds % 60).padStart(2, '0')} s`;
}

export function formatBenchProgress(progress: BenchProgress, now_ms: number): string {
  const file = progress.file ? `[${formatPosition(progress.file)}] ` : '';
  const scenario = progress.scenario ? ` ${formatPosition(progress.scenario)}: ${progress.scenario.name}` : '';
  let line = `${file}${progress.area}${scenario}`;
  if (progress.phase) {
    const left = progress.phase.started_ms + progress.phase.duration_ms - now_ms;
    line += `, ${progress.phase.label} ${progress.phase.upTo ? 'at most ' : ''}${formatSeconds(left)} left`;
  }
  return line;
}

/**
 * run-all.ts's line as a file starts: its place, and the time the run has taken so far with a
 * guess at what is left (the mean of the files done times those still to run; files differ a
 * lot, so it is marked as a guess).
 */
export function formatRunProgress(position: Position, name: string, doneSeconds: number[]): string {
  const head = `[${formatPosition(position)}] ${name}`;
  if (doneSeconds.length === 0) return head;
  const elapsed = doneSeconds.reduce((sum, s) => sum + s, 0);
  const guess = (elapsed / doneSeconds.length) * (position.count - position.index + 1);
  return `${head} (${doneSeconds.length} done in ${formatSeconds(elapsed * 1000)}; about ${formatSeconds(guess * 1000)} left at their mean)`;
}
