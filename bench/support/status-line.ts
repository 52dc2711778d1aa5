import { FILE_POSITION_ENV, formatBenchProgress, parsePosition, type BenchProgress } from './progress-format.js';

/**
 * The bench process's progress on stderr (stdout is the table's). On a terminal, one status line
 * redrawn in place while a timed phase runs (twice a second: a write of a few bytes, nothing a
 * benchmark notices); other lines (scenario started, done, failed) print above it. Off a
 * terminal, only those lines, each with the run's position, and one line per timed phase.
 */
const stderr = process.stderr;
const state: BenchProgress = { file: parsePosition(process.env[FILE_POSITION_ENV]), area: '' };
let drawn = false;
let ticker: NodeJS.Timeout | undefined;

function draw(): void {
  if (!stderr.isTTY) return;
  stderr.write(`\r[bench] ${formatBenchProgress(state, performance.now())}\x1b[K`);
  drawn = true;
}

function clear(): void {
  if (drawn) stderr.write('\r\x1b[K');
  drawn = false;
}

/** A line of its own: the status line is cleared first and drawn again below it. */
export function printLine(message: string): void {
  clear();
  const position = state.file ? `[${state.file.index}/${state.file.count}] ` : '';
  stderr.write(`[bench] ${position}${message}\n`);
  if (state.phase) draw();
}

/** The bench file's area, for phases outside runScenarios (run-one.ts sets it from the file name). */
export function setArea(area: string): void {
  state.area = area;
}

export function setScenario(area: string, index: number, count: number, name: string): void {
  state.area = area;
  state.scenario = { index, count, name };
}

/**
 * A phase of known length starts (a load run, a loop bounded by time); the returned function
 * ends it. Phases do not nest: an inner one replaces the outer until it ends.
 */
export function startPhase(label: string, seconds: number, upTo = false): () => void {
  const phase = { label, started_ms: performance.now(), duration_ms: seconds * 1000, upTo };
  state.phase = phase;
  if (stderr.isTTY) {
    draw();
    clearInterval(ticker);
    ticker = setInterval(draw, 500);
    ticker.unref();
  } else {
    stderr.write(`[bench] ${formatBenchProgress(state, phase.started_ms)}\n`);
  }
  return () => {
    if (state.phase !== phase) return;
    state.phase = undefined;
    clearInterval(ticker);
    ticker = undefined;
    clear();
  };
}
