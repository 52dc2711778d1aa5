import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { othersNote, startCpuMeter, type CpuUsage } from './support/cpu-meter.js';
import { latencyNote, runLoad, statusNote, type LoadOptions, type LoadRequest, type LoadResult } from './support/load.js';
import { progress, runScenarios } from './support/scenarios.js';
import { startServerProcess, type ServerProcess } from './support/server-process.js';
import type { BenchRow } from './types.js';

/**
 * Locks through HTTP against the real server (`node dist/http/server.js`,
 * default durability: fsync before every reply), and in the same run a bare
 * Fastify server (same Fastify, no plugins) with the same load generator
 * (autocannon, in this process, on the same cores). Both servers run for the
 * whole file, and the lock and echo runs are back to back, so a change in the
 * machine's load hits both alike; each row says how much CPU other
 * processes took meanwhile.
 * Target (issue 2): lock req/s >= 70% of the bare echo route's req/s.
 *
 * BENCH_BASELINE_DIST=<another build's dist/> adds a before/after row: that
 * build's server runs beside this one, and three paired rounds of the
 * distinct-keys load alternate between the two (medians compared), so a
 * refactor is judged in one run on one machine state.
 */
const AREA = 'locks (HTTP)';
const BARE_AREA = 'bare Fastify';
const CONNECTIONS = 100;
const SECONDS = Number(process.env.BENCH_HTTP_SECONDS ?? 10);
const WARM_UP_SECONDS = Math.min(3, SECONDS);
const DISTINCT_KEYS = 10_000;
const RATIO_TARGET = 0.7;
/** The lock request's body and the echo body are the same size. */
const ECHO_BODY = JSON.stringify({ owner_id: 'owner-12345', ttl_seconds: 30 });

const distDir = dirname(dirname(fileURLToPath(import.meta.url)));
const serverScript = join(distDir, 'http', 'server.js');
const bareScript = join(distDir, 'bench', 'support', 'bare-fastify-server.js');

const lockPath = (key: string) => `/api/v1/distributed-state/bench/${encodeURIComponent(key)}/lock`;

interface LockServer {
  server: ServerProcess;
  token: string;
  dataDir: string;
}

const baselineDist = process.env.BENCH_BASELINE_DIST;
const PAIRED_ROUNDS = 3;

async function startLockServer(script = serverScript): Promise<LockServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-http-'));
  let server: ServerProcess | undefined;
  try {
    server = await startServerProcess(
      script,
      { DATA_DIR: dataDir, LOG_LEVEL: 'warn', PASSWORD_KDF_COST: '10', RATE_LIMITS_DEFAULT_MAX_REQUESTS: '1000000000' },
      { readyPath: '/health/ready' },
    );
    const response = await fetch(server.url + '/api/v1/auth/register', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'bench@example.com', username: 'bench', password: 'bench-password-1' }),
    });
    const body = (await response.json()) as { access_token?: string };
    if (response.status !== 201 || !body.access_token) throw new Error(`register answered ${response.status}: ${JSON.stringify(body)}`);
    return { server, token: body.access_token, dataDir };
  } catch (error) {
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Acquire then release, per connection, in a loop. The acquire's reply
 * carries the lock_id the release needs; when the acquire is refused (409:
 * another connection holds the hot key) the release step returns null and
 * autocannon restarts the sequence with a new acquire. Owners are unique per
 * cycle (autocannon resets a connection's context at every loop); the key is
 * the hot one or the next of DISTINCT_KEYS in turn.
 */
function lockCycle(token: string, keyOf: () => string): LoadRequest[] {
  let cycle = 0;
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
  return [
    {
      method: 'POST',
      headers,
      setupRequest(request, context) {
        const key = keyOf();
        const owner_id = `owner-${++cycle}`;
        context.key = key;
        context.owner_id = owner_id;
        context.lock_id = undefined;
        return { ...request, path: lockPath(key), body: JSON.stringify({ owner_id, ttl_seconds: 30 }) };
      },
      onResponse(status, body, context) {
        if (status === 200) context.lock_id = (JSON.parse(body) as { lock_id: string }).lock_id;
      },
    },
    {
      method: 'DELETE',
      headers,
      setupRequest(request, context) {
        if (typeof context.lock_id !== 'string') return null;
        return { ...request, path: lockPath(context.key as string), body: JSON.stringify({ lock_id: context.lock_id, owner_id: context.owner_id }) };
      },
    },
  ];
}

interface Measured {
  result: LoadResult;
  cpu: CpuUsage | undefined;
}

async function measure(server: ServerProcess, options: LoadOptions): Promise<Measured> {
  const stopMeter = startCpuMeter([process.pid, server.child.pid ?? 0]);
  const result = await runLoad(options);
  return { result, cpu: stopMeter() };
}

function runNote({ result, cpu }: Measured): string {
  const server = cpu ? `; server + load generator used ${cpu.participants_cores.toFixed(2)} cores` : '';
  return `${latencyNote(result)}; ${CONNECTIONS} conn, ${result.duration_s} s; ${statusNote(result)}${server}${othersNote(cpu)}`;
}

function lockRows(label: string, measured: Measured): BenchRow[] {
  const { result } = measured;
  const acquired = result.status['200'] ?? 0;
  const released = result.status['204'] ?? 0;
  const refused = result.status['409'] ?? 0;
  if (released === 0) throw new Error(`no lock was released: ${statusNote(result)}`);
  const unexpected = result.requests_total - acquired - released - refused;
  return [
    {
      area: AREA,
      scenario: `${label}: requests`,
      value: result.requests_per_s,
      unit: 'req/s',
      note: runNote(measured) + (unexpected > 0 ? `; ${unexpected} unexpected answers` : ''),
    },
    {
      area: AREA,
      scenario: `${label}: acquire+release cycles`,
      value: Math.round(released / result.duration_s),
      unit: 'cycles/s',
      note: refused > 0 ? `${refused} acquires refused (409 lock_held) and retried` : 'every acquire succeeded',
    },
  ];
}

function bareRow(scenario: string, measured: Measured): BenchRow {
  if ((measured.result.status['200'] ?? 0) === 0) throw new Error(`no 200 answer: ${statusNote(measured.result)}`);
  return { area: BARE_AREA, scenario, value: measured.result.requests_per_s, unit: 'req/s', note: runNote(measured) };
}

export async function run(): Promise<BenchRow[]> {
  let lockServer: Promise<LockServer> | undefined;
  let baselineServer: Promise<LockServer> | undefined;
  let bareServer: Promise<ServerProcess> | undefined;
  const getLockServer = () => (lockServer ??= startLockServer());
  const getBareServer = () => (bareServer ??= startServerProcess(bareScript, {}, { readyPath: '/' }));
  /** Results kept for the ratio, only once they passed their checks. */
  const kept = new Map<'distinct' | 'hot' | 'echo', LoadResult>();

  let nextKey = 0;
  const distinctKey = () => `key-${nextKey++ % DISTINCT_KEYS}`;
  const hotKey = () => 'hot';
  const echoLoad = (server: ServerProcess, duration_s: number): LoadOptions => ({
    url: server.url + '/echo',
    connections: CONNECTIONS,
    duration_s,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: ECHO_BODY,
  });
  const keysLabel = `${DISTINCT_KEYS.toLocaleString('en-US')} keys`;

  try {
    return await runScenarios(AREA, [
      {
        name: 'start and warm up both servers',
        async run() {
          const [{ server, token }, bare] = await Promise.all([getLockServer(), getBareServer()]);
          progress(`lock server at ${server.url}, bare Fastify at ${bare.url}; warm-up ${WARM_UP_SECONDS} s each`);
          await runLoad({ url: server.url, connections: CONNECTIONS, duration_s: WARM_UP_SECONDS, requests: lockCycle(token, distinctKey) });
          await runLoad(echoLoad(bare, WARM_UP_SECONDS));
          return [];
        },
      },
      {
        name: keysLabel,
        async run() {
          const { server, token } = await getLockServer();
          const measured = await measure(server, { url: server.url, connections: CONNECTIONS, duration_s: SECONDS, requests: lockCycle(token, distinctKey) });
          const rows = lockRows(keysLabel, measured);
          kept.set('distinct', measured.result);
          return rows;
        },
      },
      {
        name: 'echo POST',
        area: BARE_AREA,
        async run() {
          const server = await getBareServer();
          const measured = await measure(server, echoLoad(server, SECONDS));
          const row = bareRow('POST /echo (parse + echo small JSON)', measured);
          kept.set('echo', measured.result);
          return [row];
        },
      },
      {
        name: 'constant GET',
        area: BARE_AREA,
        async run() {
          const server = await getBareServer();
          return [bareRow('GET / (constant)', await measure(server, { url: server.url + '/', connections: CONNECTIONS, duration_s: SECONDS, method: 'GET' }))];
        },
      },
      {
        name: 'lock status GET',
        async run() {
          // The read path (authentication + a read-only ask, nothing to
          // commit): shows how much of a lock request the commit costs.
          const { server, token } = await getLockServer();
          const headers = { authorization: `Bearer ${token}` };
          const measured = await measure(server, {
            url: server.url,
            connections: CONNECTIONS,
            duration_s: SECONDS,
            requests: [{ method: 'GET', headers, setupRequest: (request) => ({ ...request, path: lockPath(distinctKey()) }) }],
          });
          if ((measured.result.status['200'] ?? 0) === 0) throw new Error(`no 200 answer: ${statusNote(measured.result)}`);
          return [{ area: AREA, scenario: `status GET, ${keysLabel} (read path)`, value: measured.result.requests_per_s, unit: 'req/s', note: runNote(measured) }];
        },
      },
      {
        name: '1 hot key',
        async run() {
          const { server, token } = await getLockServer();
          const measured = await measure(server, { url: server.url, connections: CONNECTIONS, duration_s: SECONDS, requests: lockCycle(token, hotKey) });
          const rows = lockRows('1 hot key', measured);
          kept.set('hot', measured.result);
          return rows;
        },
      },
      ...(baselineDist
        ? [
            {
              name: `before/after: ${PAIRED_ROUNDS} paired rounds against ${baselineDist}`,
              async run() {
                const current = await getLockServer();
                const baseline = await (baselineServer ??= startLockServer(join(baselineDist, 'http', 'server.js')));
                await runLoad({ url: baseline.server.url, connections: CONNECTIONS, duration_s: WARM_UP_SECONDS, requests: lockCycle(baseline.token, distinctKey) });
                const rates = { current: [] as number[], baseline: [] as number[] };
                for (let round = 0; round < PAIRED_ROUNDS; round++) {
                  for (const [name, lock] of [['current', current], ['baseline', baseline]] as const) {
                    const measured = await measure(lock.server, { url: lock.server.url, connections: CONNECTIONS, duration_s: SECONDS, requests: lockCycle(lock.token, distinctKey) });
                    rates[name].push(measured.result.requests_per_s);
                    progress(`round ${round + 1}: ${name} ${measured.result.requests_per_s} req/s`);
                  }
                }
                const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
                const now = median(rates.current);
                const before = median(rates.baseline);
                return [
                  { area: AREA, scenario: `before/after: baseline build, ${keysLabel}`, value: before, unit: 'req/s', note: `median of ${rates.baseline.join(', ')}` },
                  { area: AREA, scenario: `before/after: this build, ${keysLabel}`, value: now, unit: 'req/s', note: `median of ${rates.current.join(', ')}` },
                  { area: AREA, scenario: 'before/after: this build / baseline', value: Math.round((now / before) * 1000) / 1000, unit: 'ratio', note: 'paired rounds, alternating, same run' },
                ];
              },
            },
          ]
        : []),
      {
        name: 'ratio to echo',
        async run() {
          const echo = kept.get('echo');
          if (!echo) throw new Error('no echo figure to compare with');
          const rows: BenchRow[] = [];
          for (const [name, label, what] of [
            ['distinct', keysLabel, 'the target figure'],
            ['hot', '1 hot key', 'mostly 409 answers, which commit nothing'],
          ] as const) {
            const lock = kept.get(name);
            if (!lock) continue;
            const ratio = Math.round((lock.requests_per_s / echo.requests_per_s) * 1000) / 1000;
            rows.push({
              area: AREA,
              scenario: `lock req/s (${label}) / echo req/s`,
              value: ratio,
              unit: 'ratio',
              note: `${lock.requests_per_s} / ${echo.requests_per_s}, ${what}; target >= ${RATIO_TARGET}: ${ratio >= RATIO_TARGET ? 'met' : 'NOT met'}`,
            });
          }
          if (rows.length === 0) throw new Error('no lock figure to compare');
          return rows;
        },
      },
    ]);
  } finally {
    const [lock, baseline, bare] = await Promise.all([lockServer?.catch(() => undefined), baselineServer?.catch(() => undefined), bareServer?.catch(() => undefined)]);
    await Promise.all([lock?.server.stop(), baseline?.server.stop(), bare?.stop()]);
    for (const started of [lock, baseline]) if (started) rmSync(started.dataDir, { recursive: true, force: true });
  }
}
