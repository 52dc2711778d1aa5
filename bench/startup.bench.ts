import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServerProcess, type ServerProcess } from './support/server-process.js';
import { progress, runScenarios } from './support/scenarios.js';
import { median } from './support/write-path-measure.js';
import type { BenchRow } from './types.js';

/**
 * Start-up: the time from spawning `node dist/http/server.js` (embedded, a
 * fresh data directory) to its first 200 on /health/ready, beside the floor
 * measured in the same run, a bare Fastify server of the same version
 * (bench/support/bare-fastify-server.ts) spawned to its first answer. A
 * restarted node serves nothing, and in a cluster leads nothing, until it is
 * ready, so this is part of recovery after a crash.
 *
 * Also, for the project: the first register and lock acquisition after ready
 * (their route schemas compile on first use unless the background warm-up got
 * there first, http/lazy-schemas.ts) and when the warm-up finished (its log
 * line). Runs alternate, BENCH_STARTUP_RUNS (default 5) each; medians.
 */
const AREA = 'start-up';
const RUNS = Number(process.env.BENCH_STARTUP_RUNS ?? 5);
const POLL_MS = 10;
const distDir = dirname(dirname(fileURLToPath(import.meta.url)));
const projectScript = join(distDir, 'http', 'server.js');
const bareScript = join(distDir, 'bench', 'support', 'bare-fastify-server.js');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Started {
  server: ServerProcess;
  ready_ms: number;
  /** The project's "route schemas compiled" log line, ms after spawn, once seen. */
  warmedUp: Promise<number | undefined>;
}

async function spawnUntilReady(script: string, readyPath: string, env: Record<string, string>): Promise<Started> {
  let sawWarmUp: (at_ms: number) => void = () => undefined;
  const warmUpAt = new Promise<number>((resolve) => (sawWarmUp = resolve));
  let tail = '';
  const server = await startServerProcess(script, env, {
    readyPath,
    poll_ms: POLL_MS,
    startTimeout_ms: 60_000,
    onStdout: (chunk) => {
      tail = (tail + chunk.toString('utf8')).slice(-4096);
      if (tail.includes('route schemas compiled')) sawWarmUp(performance.now());
    },
  });
  const exited = new Promise<undefined>((resolve) => server.child.on('exit', () => resolve(undefined)));
  const warmedUp = Promise.race([warmUpAt, exited]).then((at_ms) => (at_ms === undefined ? undefined : at_ms - server.spawned_ms));
  return { server, ready_ms: performance.now() - server.spawned_ms, warmedUp };
}

async function timed<T>(call: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const value = await call();
  return [value, performance.now() - started];
}

async function projectRun(run: number): Promise<{ ready_ms: number; register_ms: number; lock_ms: number; warm_ms: number | undefined }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-startup-'));
  let started: Started | undefined;
  try {
    started = await spawnUntilReady(projectScript, '/health/ready', { LOG_LEVEL: 'info', PASSWORD_KDF_COST: '10', DATA_DIR: dataDir });
    const base = `${started.server.url}/api/v1`;
    const [registered, register_ms] = await timed(async () => {
      const response = await fetch(`${base}/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: `startup${run}@example.com`, username: `startup${run}`, password: 'startup-password-1' }),
      });
      return (await response.json()) as { access_token?: string };
    });
    if (!registered.access_token) throw new Error(`register failed: ${JSON.stringify(registered)}`);
    const [locked, lock_ms] = await timed(async () => {
      const response = await fetch(`${base}/distributed-state/jobs/nightly-report/lock`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${registered.access_token}` },
        body: JSON.stringify({ owner_id: 'worker-1', ttl_seconds: 30 }),
      });
      await response.arrayBuffer();
      return response.status;
    });
    if (locked !== 200) throw new Error(`lock answered ${locked}`);
    const warm_ms = await Promise.race([started.warmedUp, sleep(30_000).then(() => undefined)]);
    return { ready_ms: started.ready_ms, register_ms, lock_ms, warm_ms };
  } finally {
    if (started) await started.server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function bareRun(): Promise<number> {
  const started = await spawnUntilReady(bareScript, '/', {});
  await started.server.stop();
  return started.ready_ms;
}

const ms = (value: number) => Math.round(value);

export async function run(): Promise<BenchRow[]> {
  return runScenarios(AREA, [
    {
      name: 'spawn to ready: project node vs bare Fastify',
      async run() {
        const project: Awaited<ReturnType<typeof projectRun>>[] = [];
        const bare: number[] = [];
        for (let i = 0; i < RUNS; i++) {
          bare.push(await bareRun());
          project.push(await projectRun(i));
          progress(`run ${i + 1}/${RUNS}: project ready ${ms(project[i].ready_ms)} ms, bare Fastify ${ms(bare[i])} ms`);
        }
        const ready = median(project.map((r) => r.ready_ms));
        const floor = median(bare);
        const warm = project.map((r) => r.warm_ms).filter((v): v is number => v !== undefined);
        return [
          {
            area: AREA,
            scenario: 'project node: spawn to /health/ready (embedded, fresh data dir)',
            value: ms(ready),
            unit: 'ms',
            note: `median of ${project.map((r) => ms(r.ready_ms)).join(', ')}; ${(ready / floor).toFixed(1)}x the bare Fastify floor`,
          },
          { area: AREA, scenario: 'bare Fastify (floor): spawn to first answer', value: ms(floor), unit: 'ms', note: `median of ${bare.map(ms).join(', ')}` },
          {
            area: AREA,
            scenario: 'project: first register after ready',
            value: ms(median(project.map((r) => r.register_ms))),
            unit: 'ms',
            note: `median of ${project.map((r) => ms(r.register_ms)).join(', ')}; includes its password hash (PASSWORD_KDF_COST=10) and any schema compile on first use`,
          },
          {
            area: AREA,
            scenario: 'project: first lock acquisition after ready',
            value: ms(median(project.map((r) => r.lock_ms))),
            unit: 'ms',
            note: `median of ${project.map((r) => ms(r.lock_ms)).join(', ')}`,
          },
          {
            area: AREA,
            scenario: 'project: every route schema compiled (background warm-up done)',
            value: warm.length > 0 ? ms(median(warm)) : -1,
            unit: 'ms',
            note: warm.length > 0 ? `after spawn; median of ${warm.map(ms).join(', ')}` : 'the warm-up log line was not seen',
          },
        ];
      },
    },
  ]);
}
