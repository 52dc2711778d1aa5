import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { startUnderCallgrind, valgrindAvailable, type CallgrindServer } from './support/callgrind-server.js';
import { projectEnv, projectServerScript, register, SCHEMAS_COMPILED } from './support/project-servers.js';
import { progress, runScenarios } from './support/scenarios.js';
import { runLoadInChild, type WritePathTarget } from './support/write-path-load.js';
import type { BenchRow } from './types.js';

/**
 * Write path, counted in instructions instead of timed (hot-path issue):
 * the durable-put floor and the project's lock, each run under callgrind,
 * the same fresh-key load as write-path.bench.ts (50 connections), counters
 * zeroed after a warm-up and read after the measured load. Instructions per
 * request do not move with the machine's speed the way rates do, but what
 * runs on time rather than per request (the garbage collector, timers,
 * commit batches) still moves them: runs of one build gave 201,430 and
 * 239,317 on the event loop (2026-11-30), when the rates of one run spread
 * by a factor of two. A change of a few percent shows in callgrind's
 * per-function counts, not in these totals (docs/performance.md,
 * "Instructions counted, not sampled").
 *
 * Off unless BENCH_INSTRUCTIONS=1: it needs valgrind, and takes about ten
 * minutes (valgrind runs a node about 50 times slower, and V8 needs minutes
 * of load to compile the hot code). Caveat: at the few hundred requests a
 * second a node serves under valgrind, what it amortises over time (commit
 * batches, isoTime's cache of recent milliseconds, the garbage collector's
 * timers) weighs more per request than at native rates. Compare builds with
 * each other here, and the project with the floor of the same run.
 *
 * Env: BENCH_INSTRUCTIONS_WARM_SECONDS (default 240: the project; the floor
 * gets 90), BENCH_INSTRUCTIONS_SECONDS (default 60).
 */
const AREA = 'write path (instructions)';
const CONNECTIONS = 50;
const PROJECT_WARM_S = Number(process.env.BENCH_INSTRUCTIONS_WARM_SECONDS ?? 240);
const FLOOR_WARM_S = Math.min(90, PROJECT_WARM_S);
const MEASURE_S = Number(process.env.BENCH_INSTRUCTIONS_SECONDS ?? 60);
const BODY = JSON.stringify({ owner_id: 'owner-12345', ttl_seconds: 30 });
/** Under valgrind, start-up and the background compilation of the route schemas take minutes. */
const READY_TIMEOUT_MS = 15 * 60_000;

const distDir = dirname(dirname(fileURLToPath(import.meta.url)));
const putScript = join(distDir, 'bench', 'support', 'durable-put-server.js');

interface Counted {
  requests: number;
  /** Instructions per request: the event loop's thread, and all threads. */
  eventLoop: number;
  allThreads: number;
  threads: number;
}

async function countFreshLoad(server: CallgrindServer, target: WritePathTarget, token: string, warm_s: number): Promise<Counted> {
  const plan = { target, mode: 'fresh' as const, urls: [server.url], token, connections: CONNECTIONS, body: BODY };
  progress(`${AREA}: ${target}: warm-up of ${warm_s} s`);
  await runLoadInChild({ ...plan, duration_s: warm_s, prefix: `${target}-warm-` });
  server.zero();
  progress(`${AREA}: ${target}: measured load of ${MEASURE_S} s`);
  const result = await runLoadInChild({ ...plan, duration_s: MEASURE_S, prefix: `${target}-measured-` });
  const threads = await server.dump();
  const answered = result.status['200'] ?? 0;
  if (answered === 0) throw new Error(`no request of the measured load was answered 200: ${JSON.stringify(result.status)}`);
  const all = threads.reduce((sum, n) => sum + n, 0);
  return { requests: answered, eventLoop: Math.round(threads[0]! / answered), allThreads: Math.round(all / answered), threads: threads.length };
}

async function floorCount(): Promise<Counted> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-instructions-put-'));
  const server = await startUnderCallgrind(putScript, { DATA_DIR: dataDir }, '/', READY_TIMEOUT_MS);
  try {
    return await countFreshLoad(server, 'put', '', FLOOR_WARM_S);
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function projectCount(): Promise<Counted> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-instructions-project-'));
  const env = { ...projectEnv, LOG_LEVEL: 'info', DATA_DIR: dataDir, LMDB_MAP_SIZE_GB: '2' };
  // startServerProcess gives the project's node its V8 flags, as `npm start` does.
  const server = await startUnderCallgrind(projectServerScript, env, '/health/ready', READY_TIMEOUT_MS);
  try {
    const token = await register(server.url);
    // As write-path.bench.ts: measured once the node has compiled its route schemas.
    const deadline_ms = Date.now() + READY_TIMEOUT_MS;
    while (!server.output().includes(SCHEMAS_COMPILED)) {
      if (Date.now() > deadline_ms) throw new Error('the node did not compile its route schemas in time');
      await sleep(1000);
    }
    return await countFreshLoad(server, 'lock', token, PROJECT_WARM_S);
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const note = (c: Counted) => `${c.requests} requests measured after the warm-up; all ${c.threads} threads: ${c.allThreads} per request`;

export async function run(): Promise<BenchRow[]> {
  if (process.env.BENCH_INSTRUCTIONS !== '1') {
    progress(`${AREA}: not run (BENCH_INSTRUCTIONS=1 runs it: valgrind, about ten minutes)`);
    return [];
  }
  return runScenarios(AREA, [
    {
      name: 'fresh keys: instructions per request, durable put and project',
      async run() {
        if (!valgrindAvailable()) throw new Error('valgrind is not installed (Debian: apt-get install valgrind)');
        const floor = await floorCount();
        const project = await projectCount();
        return [
          { area: AREA, scenario: 'fresh keys: lmdb durable put, event loop', value: floor.eventLoop, unit: 'instr/req', note: note(floor) },
          { area: AREA, scenario: 'fresh keys: project lock, event loop', value: project.eventLoop, unit: 'instr/req', note: note(project) },
          {
            area: AREA,
            scenario: 'fresh keys: project / durable put, event loop',
            value: Math.round((project.eventLoop / floor.eventLoop) * 1000) / 1000,
            unit: 'ratio',
            note: `${project.eventLoop} / ${floor.eventLoop} instructions per request, same run (lower is better); all threads ${project.allThreads} / ${floor.allThreads}`,
          },
        ];
      },
    },
  ]);
}
