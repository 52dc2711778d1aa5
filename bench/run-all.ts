import { fork, type ChildProcess } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startCpuMeter } from './support/cpu-meter.js';
import { WRITE_PATH_ROUNDS } from './support/write-path-rounds.js';
import type { RunOneMessage } from './support/run-one.js';
import { FILE_POSITION_ENV, formatRunProgress, type Position } from './support/progress-format.js';
import { isFailedRow, progress } from './support/scenarios.js';
import { formatMarkdownTable, formatTable } from './support/table.js';
import type { BenchRow } from './types.js';

/**
 * `npm run bench [-- <filter>] [--markdown]`: runs every dist/bench/*.bench.js
 * whose file name contains <filter> (all of them without one), one after
 * another, each in its own node process (with --expose-gc). Progress goes to
 * stderr; at the end one table goes to stdout (as Markdown with --markdown,
 * for docs/performance.md) and the rows to bench-results.json. A failed file
 * or scenario is reported and the run goes on; the exit code is then 1.
 *
 * Env: BENCH_FILE_TIMEOUT_SECONDS bounds each file (default 300 s, more for
 * the files in LONG_FILES, and scaled by BENCH_WRITE_PATH_ROUNDS / 3 for the write-path files);
 * BENCH_CPU_PROF=1 writes a V8 CPU profile of each bench process to
 * .bench-data/profiles (servers started by a bench are not profiled).
 */
const benchDir = dirname(fileURLToPath(import.meta.url));
/** dist/bench -> the project root, where bench-results.json goes. */
const projectRoot = dirname(dirname(benchDir));
const runOne = join(benchDir, 'support', 'run-one.js');
/**
 * Files that need more than the default 300 s on this 2-core machine, so that
 * a full run does not kill them: the 100-node simulation took 433 s
 * (2026-11-28), the write-path peers file 260 s with its clusters' warm-up,
 * the instruction count (BENCH_INSTRUCTIONS=1) about 10 minutes under valgrind.
 */
const LONG_FILES: Record<string, number> = { 'cluster-scale': 900, 'write-path-peers': 450, 'write-path-instructions': 2400 };
/** The write-path files' run time grows with their rounds (BENCH_WRITE_PATH_ROUNDS, default 3): so does their bound. */
const ROUNDS_FILES = new Set(['write-path', 'write-path-peers']);
function fileTimeout_ms(area: string): number {
  const base = Number(process.env.BENCH_FILE_TIMEOUT_SECONDS ?? LONG_FILES[area] ?? 300);
  const scale = process.env.BENCH_FILE_TIMEOUT_SECONDS === undefined && ROUNDS_FILES.has(area) ? Math.max(1, WRITE_PATH_ROUNDS / 3) : 1;
  return base * scale * 1000;
}

/** The bench process of the file being run. */
let running: ChildProcess | undefined;

/** SIGKILL to a bench process's group: the process and every process it started that did not leave the group. */
function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // The group is gone already.
  }
}

// A detached group does not get the terminal's Ctrl-C: pass an interruption of the run on to it.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    if (running) killGroup(running);
    process.kill(process.pid, signal);
  });
}

function runFile(file: string, position: Position): Promise<BenchRow[]> {
  const area = basename(file, '.bench.js');
  const failed = (message: string): BenchRow[] => [{ area, scenario: 'run()', value: Number.NaN, unit: '', note: `FAILED: ${message}` }];
  const execArgv = ['--expose-gc'];
  if (process.env.BENCH_CPU_PROF === '1') execArgv.push('--cpu-prof', `--cpu-prof-dir=${join(projectRoot, '.bench-data', 'profiles')}`);
  return new Promise((resolve) => {
    // The child's stdout goes to our stderr: stdout is the table only.
    // Its progress lines say where in the run it is ("[3/12] mq 2/6: ...").
    const env = { ...process.env, [FILE_POSITION_ENV]: `${position.index}/${position.count}` };
    // Its own process group (detached), so that a kill reaches the servers, clusters and etcd it
    // started too: killed alone, they would run on and load the machine under the next files.
    const child = fork(runOne, [file], { execArgv, env, stdio: ['ignore', 2, 2, 'ipc'], detached: true });
    running = child;
    let result: RunOneMessage | undefined;
    const timer = setTimeout(() => {
      process.stderr.write(`[bench] ${area}: no result after ${fileTimeout_ms(area) / 1000} s, killing it and what it started\n`);
      killGroup(child);
    }, fileTimeout_ms(area));
    child.on('message', (message: RunOneMessage) => {
      result = message;
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      running = undefined;
      if (result && 'rows' in result) resolve(result.rows);
      else if (result && 'error' in result) {
        process.stderr.write(`[bench] ${area} FAILED:\n${result.error}\n`);
        resolve(failed(result.error.split('\n')[0]));
      } else resolve(failed(`process exited with ${signal ?? `code ${code}`} and no result`));
    });
  });
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const markdown = args.includes('--markdown');
  const filter = args.find((arg) => !arg.startsWith('--')) ?? '';
  const files = readdirSync(benchDir)
    .filter((name) => name.endsWith('.bench.js') && name.includes(filter))
    .sort();
  if (files.length === 0) {
    process.stderr.write(`[bench] no dist/bench/*.bench.js matches ${JSON.stringify(filter)}\n`);
    return 1;
  }
  const started_ms = performance.now();
  // Figures are only comparable on an otherwise idle machine: look for one
  // second what the rest of the machine is doing, and say so when it is busy.
  const load_1min_at_start = Math.round(loadavg()[0] * 100) / 100;
  const stopMeter = startCpuMeter([process.pid]);
  await sleep(1000);
  const other_cores_before_start = stopMeter()?.others_cores ?? null;
  if (other_cores_before_start !== null && other_cores_before_start > 0.2) {
    progress(`warning: other processes used ${other_cores_before_start} cores just before the start; they will skew the figures`);
  }
  const rows: BenchRow[] = [];
  const doneSeconds: number[] = [];
  for (const [index, name] of files.entries()) {
    const fileStarted_ms = performance.now();
    const position = { index: index + 1, count: files.length };
    progress(`=== ${formatRunProgress(position, name, doneSeconds)}`);
    const produced = await runFile(join(benchDir, name), position);
    rows.push(...produced);
    doneSeconds.push((performance.now() - fileStarted_ms) / 1000);
    progress(`=== ${name}: ${produced.length} rows in ${doneSeconds[index]!.toFixed(1)} s`);
  }
  const failures = rows.filter(isFailedRow);
  const total_s = (performance.now() - started_ms) / 1000;

  process.stdout.write((markdown ? formatMarkdownTable(rows) : formatTable(rows)) + '\n');
  const cpuList = cpus();
  writeFileSync(join(projectRoot, 'bench-results.json'), JSON.stringify({
    generated_at: new Date().toISOString(),
    node_version: process.version,
    cpu_count: cpuList.length,
    cpu_model: cpuList[0]?.model ?? 'unknown',
    filter,
    load_1min_at_start,
    other_cores_before_start,
    total_seconds: Math.round(total_s),
    rows,
  }, null, 2) + '\n');
  progress(`${rows.length} rows, ${failures.length} failed, ${total_s.toFixed(0)} s; rows written to bench-results.json`);
  return failures.length > 0 ? 1 : 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  },
);
