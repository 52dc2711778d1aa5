import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { progress, runScenarios } from './support/scenarios.js';
import { startServerProcess, type ServerProcess } from './support/server-process.js';
import { startProjectServer, type ProjectServer } from './support/project-servers.js';
import { runLoadInChild, type WritePathMode, type WritePathPlan, type WritePathTarget } from './support/write-path-load.js';
import { measure, median, medianRun, othersMean, perRoundRatios, round3, statusText, verdict, type Measured } from './support/write-path-measure.js';
import { WRITE_PATH_ROUNDS } from './support/write-path-rounds.js';
import type { BenchRow } from './types.js';

/**
 * Write path (hot-path issue): three servers, each in its own process, and
 * the load generator (autocannon) in a fourth, forked per run:
 * - echo: bare Fastify, POST /echo parses a small JSON body and sends it back;
 * - durable put: the same route plus `await db.put()` and `await db.flushed`
 *   on an lmdb-js database with its defaults (overlappingSync: each reply
 *   waits for its fsync), the floor for a durable write over HTTP in Node;
 * - project: `node dist/http/server.js`, POST .../distributed-state/bench/<key>/lock
 *   with a valid bearer (default durability: fsync before every reply).
 * Loads: fresh keys (a new key per request; the project only acquires),
 * warm (keys w0..w999 in turn; the project acquires and releases, each a
 * durable write), hot (one key, one owner, one connection, sequential).
 * Fresh and warm: 100 connections, BENCH_WRITE_PATH_SECONDS (default 8) per
 * run, BENCH_WRITE_PATH_ROUNDS (default 3) rounds, each round runs every server once (the order rotates),
 * so a change in the machine's load hits all; figures are the medians.
 * Targets: project / durable put >= 0.7 (fresh), >= 0.8 (warm); hot p50 <= 1 ms.
 * The peers (etcd's lock, a 3-node cluster) are in write-path-peers.bench.ts.
 */
const AREA = 'write path';
const CONNECTIONS = 100;
const SECONDS = Number(process.env.BENCH_WRITE_PATH_SECONDS ?? 8);
const WARM_UP_SECONDS = Math.min(2, SECONDS);
const ROUNDS = WRITE_PATH_ROUNDS;
const FRESH_TARGET = 0.7;
const WARM_TARGET = 0.8;
const HOT_P50_TARGET_MS = 1;
/** Same size as the lock request's body. */
const BODY = JSON.stringify({ owner_id: 'owner-12345', ttl_seconds: 30 });

const distDir = dirname(dirname(fileURLToPath(import.meta.url)));
const bareScript = join(distDir, 'bench', 'support', 'bare-fastify-server.js');
const putScript = join(distDir, 'bench', 'support', 'durable-put-server.js');

interface Servers {
  echo: ServerProcess;
  put: ServerProcess;
  project: ProjectServer;
}

const LABEL: Record<WritePathTarget, string> = {
  echo: 'bare Fastify echo',
  put: 'lmdb durable put',
  lock: 'project lock',
};

let planCount = 0;
function plan(servers: Servers, target: WritePathTarget, mode: WritePathMode, duration_s: number): WritePathPlan {
  const url = target === 'echo' ? servers.echo.url : target === 'put' ? servers.put.url : servers.project.server.url;
  return { target, mode, urls: [url], token: servers.project.token, connections: mode === 'hot' ? 1 : CONNECTIONS, duration_s, prefix: `p${planCount++}-`, body: BODY };
}

function pidOf(servers: Servers, target: WritePathTarget): number | undefined {
  return (target === 'echo' ? servers.echo : target === 'put' ? servers.put : servers.project.server).child.pid;
}

/** Three rounds; each round runs every target once, the order rotating by one per round. */
async function pairedRounds(servers: Servers, mode: WritePathMode, targets: WritePathTarget[]): Promise<Map<WritePathTarget, Measured[]>> {
  const runs = new Map<WritePathTarget, Measured[]>(targets.map((t) => [t, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length]);
    for (const target of order) {
      const measured = await measure([pidOf(servers, target)], plan(servers, target, mode, SECONDS));
      const bad = measured.result.requests_total - (measured.result.status['200'] ?? 0) - (measured.result.status['204'] ?? 0);
      if ((measured.result.status['200'] ?? 0) === 0) throw new Error(`${LABEL[target]} (${mode}): no 200 answer: ${statusText(measured.result)}`);
      progress(`${mode} round ${round + 1}: ${LABEL[target]} ${measured.result.requests_per_s} req/s${bad > 0 ? ` (${statusText(measured.result)})` : ''}`);
      runs.get(target)!.push(measured);
    }
  }
  return runs;
}

function rateRows(mode: string, runs: Map<WritePathTarget, Measured[]>): BenchRow[] {
  const rows: BenchRow[] = [];
  for (const [target, list] of runs) {
    const rates = list.map((m) => m.result.requests_per_s);
    const mid = medianRun(list, (m) => m.result.requests_per_s).result;
    const cycles = target === 'lock' && mode.startsWith('warm') ? `; ${median(list.map((m) => m.result.cycles_per_s))} acquire+release cycles/s` : '';
    rows.push({
      area: AREA,
      scenario: `${mode}: ${LABEL[target]}`,
      value: median(rates),
      unit: 'req/s',
      note: `median of ${rates.join(', ')}; p50 ${mid.latency_p50_ms} ms, p99 ${mid.latency_p99_ms} ms (median round); ${statusText(mid)}${cycles}${othersMean(list)}`,
    });
  }
  return rows;
}

function ratioRow(mode: string, runs: Map<WritePathTarget, Measured[]>, over: WritePathTarget, target: number | undefined): BenchRow {
  const projectRates = runs.get('lock')!.map((m) => m.result.requests_per_s);
  const otherRates = runs.get(over)!.map((m) => m.result.requests_per_s);
  const project = median(projectRates);
  const other = median(otherRates);
  const ratio = round3(project / other);
  return {
    area: AREA,
    scenario: `${mode}: project / ${over === 'put' ? 'durable put' : 'echo'}`,
    value: ratio,
    unit: 'ratio',
    note: `${project} / ${other} req/s (medians, same rounds); ${perRoundRatios(projectRates, otherRates)}; ${target === undefined ? 'no target in the issue (reference)' : `target >= ${target}: ${verdict(ratio >= target)}`}`,
  };
}

export async function run(): Promise<BenchRow[]> {
  let servers: Promise<Servers> | undefined;
  const getServers = () =>
    (servers ??= (async () => {
      const [echo, put, project] = await Promise.allSettled([
        startServerProcess(bareScript, {}, { readyPath: '/' }),
        startServerProcess(putScript, {}, { readyPath: '/' }),
        startProjectServer(),
      ]);
      if (echo.status === 'fulfilled' && put.status === 'fulfilled' && project.status === 'fulfilled') {
        return { echo: echo.value, put: put.value, project: project.value };
      }
      await Promise.all([echo, put].map((s) => (s.status === 'fulfilled' ? s.value.stop() : undefined)));
      if (project.status === 'fulfilled') await project.value.stop();
      const failure = [echo, put, project].find((s) => s.status === 'rejected') as PromiseRejectedResult;
      throw failure.reason;
    })());
  const load_at_start = loadavg()[0].toFixed(2);

  try {
    return await runScenarios(AREA, [
      {
        name: 'start the three servers and warm them up',
        async run() {
          const s = await getServers();
          progress(`echo ${s.echo.url}, durable put ${s.put.url}, project ${s.project.server.url}; warm-up ${WARM_UP_SECONDS} s each, load average ${load_at_start}`);
          for (const target of ['echo', 'put', 'lock'] as const) await runLoadInChild(plan(s, target, 'warm', WARM_UP_SECONDS));
          return [];
        },
      },
      {
        name: 'fresh keys',
        async run() {
          const runs = await pairedRounds(await getServers(), 'fresh', ['echo', 'put', 'lock']);
          return [...rateRows('fresh keys', runs), ratioRow('fresh keys', runs, 'put', FRESH_TARGET), ratioRow('fresh keys', runs, 'echo', undefined)];
        },
      },
      {
        name: 'warm 1,000 keys',
        async run() {
          const runs = await pairedRounds(await getServers(), 'warm', ['echo', 'put', 'lock']);
          return [...rateRows('warm 1,000 keys', runs), ratioRow('warm 1,000 keys', runs, 'put', WARM_TARGET), ratioRow('warm 1,000 keys', runs, 'echo', undefined)];
        },
      },
      {
        name: 'hot key',
        async run() {
          const s = await getServers();
          const put = await measure([pidOf(s, 'put')], plan(s, 'put', 'hot', SECONDS));
          const lock = await measure([pidOf(s, 'lock')], plan(s, 'lock', 'hot', SECONDS));
          const p50 = lock.result.latency_p50_ms;
          return [
            {
              area: AREA,
              scenario: 'hot key: project acquire / release, p50 per request',
              value: p50,
              unit: 'ms',
              note: `one key, one owner, one connection; p99 ${lock.result.latency_p99_ms} ms; cycle p50 ${lock.result.cycle_p50_ms} ms, ${lock.result.cycles_per_s} cycles/s; ${statusText(lock.result)}; target <= ${HOT_P50_TARGET_MS} ms: ${verdict(p50 <= HOT_P50_TARGET_MS)}${othersMean([lock])}`,
            },
            {
              area: AREA,
              scenario: 'hot key: lmdb durable put, p50 per request (floor)',
              value: put.result.latency_p50_ms,
              unit: 'ms',
              note: `one key, one connection, each reply after its fsync; p99 ${put.result.latency_p99_ms} ms; ${put.result.requests_per_s} req/s${othersMean([put])}`,
            },
          ];
        },
      },
    ]).then((rows) => [
      ...rows,
      {
        area: AREA,
        scenario: 'machine: 1-min load average at start / end',
        value: Number(loadavg()[0].toFixed(2)),
        unit: 'load',
        note: `at start ${load_at_start}; ${SECONDS} s per run, ${CONNECTIONS} connections, load generator in its own process`,
      },
    ]);
  } finally {
    const s = await servers?.catch(() => undefined);
    if (s) await Promise.all([s.echo.stop(), s.put.stop(), s.project.stop()]);
  }
}
