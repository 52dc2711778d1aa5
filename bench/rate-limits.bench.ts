import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { othersNote, startCpuMeter, type CpuUsage } from './support/cpu-meter.js';
import { pinningPlan, pinProcess } from './support/cpu-pinning.js';
import { latencyNote, runLoad, statusNote, type LoadOptions, type LoadResult } from './support/load.js';
import { progress, runScenarios } from './support/scenarios.js';
import { startServerProcess, type ServerProcess } from './support/server-process.js';
import { Session } from 'node:inspector';
import pino from 'pino';
import { loadConfig } from '../http/config.js';
import { startNode, type RunningNode } from '../http/node.js';
import type { BenchRow } from './types.js';

/**
 * The edge rate limiter's cost (issue 13, target: under 5%): the request rate
 * of one route on the real server with enforcement off (RATE_LIMITS_ENABLED=0)
 * and on (every request counted against the default tier, set high enough
 * that nothing is refused), in the same run.
 *
 * Both servers are loaded **at the same time**, each by its own autocannon
 * from this process, pinned together to one core (the load generator on the
 * others): the kernel shares that core between them, so each one's rate is
 * what its own cost per request allows, and whatever the machine does in a
 * round (this shared 2-core VM's speed drifts by 2x between minutes) hits
 * both in the same seconds. The cost is the median over rounds of each
 * round's on/off ratio, the rounds of several pairs of fresh server
 * processes pooled (a process can run a few percent faster or slower than
 * its twin for its whole life). Which load starts first alternates with the
 * round, and which process starts first with the pair. Without taskset or a
 * second core the servers are not pinned and the notes say so. (Measured one
 * after the other, the same comparison scattered by more than the 5% it
 * looks for.)
 *
 * The route is GET /api/v1/webhooks/events with a bearer token: the bearer
 * check (cached) and a handler that asks no actor, so the limiter's share
 * of the request is as large as it gets on an authenticated route. Two
 * loads: one caller (one window, its lease spent locally), and 200 callers
 * in turn (200 windows and leases).
 *
 * A third measure: a CPU profile of one node (limiter on) in this process,
 * driven with Fastify's inject, and the share of samples inside the
 * limiter's code.
 */
const AREA = 'rate limits (HTTP)';
/** Per server: both are loaded at once. */
const CONNECTIONS = 25;
const SECONDS = Number(process.env.BENCH_RATE_LIMITS_SECONDS ?? 4);
const ROUNDS = 5;
/**
 * Fresh server processes per pair: a process's speed can differ from its twin's for its whole
 * life (how V8 compiled its hot paths), by more than the 5% measured, so the rounds of one
 * pair agree with each other and not with the next pair's.
 */
const PAIRS = Number(process.env.BENCH_RATE_LIMITS_PAIRS ?? 3);
const CALLERS = 200;
const TARGET_COST = 0.05;
const ROUTE = '/api/v1/webhooks/events';

const distDir = dirname(dirname(fileURLToPath(import.meta.url)));
const serverScript = join(distDir, 'http', 'server.js');

interface Server {
  process: ServerProcess;
  dataDir: string;
  tokens: string[];
}

async function register(url: string, n: number): Promise<string> {
  const response = await fetch(url + '/api/v1/auth/register', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: `bench${n}@example.com`, username: `bench${n}`, password: 'bench-password-1' }),
  });
  const body = (await response.json()) as { access_token?: string };
  if (response.status !== 201 || !body.access_token) throw new Error(`register answered ${response.status}: ${JSON.stringify(body)}`);
  return body.access_token;
}

async function startServer(limited: boolean): Promise<Server> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-rate-limits-'));
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    PASSWORD_KDF_COST: '10',
    REGISTRATIONS_PER_ADDRESS_MAX: '0',
    ACCESS_TOKEN_TTL_SECONDS: '3600',
    RATE_LIMITS_ENABLED: limited ? '1' : '0',
    RATE_LIMITS_DEFAULT_MAX_REQUESTS: '1000000000',
  };
  const child = await startServerProcess(serverScript, env, { readyPath: '/health/ready' });
  try {
    const tokens: string[] = [];
    for (let i = 0; i < CALLERS; i++) tokens.push(await register(child.url, i));
    return { process: child, dataDir, tokens };
  } catch (error) {
    await child.stop();
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Each connection sends the callers' requests in turn. The requests are
 * static, so autocannon builds their bytes once: a `setupRequest` made it
 * rebuild (and clone its context for) every request, and the load
 * generator, not the servers, then used most of its core.
 */
function load(server: Server, callers: number, duration_s: number): LoadOptions {
  return {
    url: server.process.url,
    connections: CONNECTIONS,
    duration_s,
    requests: server.tokens.slice(0, callers).map((token) => ({ method: 'GET', path: ROUTE, headers: { authorization: `Bearer ${token}` } })),
  };
}

interface Measured {
  result: LoadResult;
  /** The server's CPU time (all its threads) per answered request, unrounded (ratios of whole µs moved by 5% steps). */
  cpu_us: number;
}

/** The request rate, and the server's CPU time per request. */
async function measure(server: Server, callers: number): Promise<Measured> {
  const pid = server.process.child.pid ?? 0;
  const stopServerMeter = startCpuMeter([pid]);
  const result = await runLoad(load(server, callers, SECONDS));
  const serverCpu = stopServerMeter();
  const ok = result.status['200'] ?? 0;
  if (ok !== result.requests_total) throw new Error(`not every request answered 200: ${statusNote(result)}`);
  const cpu_us = serverCpu ? ((serverCpu.participants_cores * result.duration_s) / Math.max(1, result.requests_total)) * 1e6 : Number.NaN;
  return { result, cpu_us };
}

/**
 * One round: both servers loaded at the same time; what else the machine ran meanwhile in the note.
 * `onFirst` alternates which load starts first: the two load generators share this process, and
 * the one started first had an edge of a few percent in runs of two unlimited servers.
 */
async function measureBoth(off: Server, on: Server, callers: number, onFirst: boolean): Promise<{ off: Measured; on: Measured; machine: CpuUsage | undefined; generator: CpuUsage | undefined }> {
  const stopMachineMeter = startCpuMeter([process.pid, off.process.child.pid ?? 0, on.process.child.pid ?? 0]);
  // Near a whole core the load generator, not the servers, would set the rates.
  const stopGeneratorMeter = startCpuMeter([process.pid]);
  const [offRun, onRun] = onFirst
    ? (await Promise.all([measure(on, callers), measure(off, callers)])).reverse()
    : await Promise.all([measure(off, callers), measure(on, callers)]);
  return { off: offRun!, on: onRun!, machine: stopMachineMeter(), generator: stopGeneratorMeter() };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const generatorNote = (cores: number[]) => (cores.length === 0 ? 'an unmeasured number of' : `${Math.min(...cores).toFixed(2)}-${Math.max(...cores).toFixed(2)}`);

async function metric(server: Server, name: string): Promise<string> {
  const text = await (await fetch(server.process.url + '/metrics')).text();
  return text.split('\n').filter((line) => line.startsWith(name)).join('; ');
}

const PROFILED_REQUESTS = 20_000;

async function startInProcess(dataDir: string): Promise<{ node: RunningNode; token: string }> {
  const config = {
    ...loadConfig({}),
    host: '127.0.0.1',
    port: 0,
    dataDir,
    logLevel: 'silent',
    passwordKdfCostLog2: 10,
    registrationsPerAddressMax: 0,
    rateLimitsEnabled: true,
    rateLimitDefaultMaxRequests: 1_000_000_000,
  };
  const node = await startNode({ config, logger: pino({ level: 'silent' }) });
  return { node, token: await register(node.url, 0) };
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

/**
 * The share of CPU samples spent inside the limiter's code (http/plugins/rate-limit.js and
 * http/rate-limits/*.js, with everything they call), while `work` runs in this process.
 * An upper bound: what the hook calls includes Fastify's continuation to the next stage.
 */
async function limiterShare(work: () => Promise<void>): Promise<number> {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<any>((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))));
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 100 });
  await post('Profiler.start');
  await work();
  const { profile } = (await post('Profiler.stop')) as { profile: { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] } };
  session.disconnect();
  const parent = new Map<number, number>();
  const byId = new Map<number, ProfileNode>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const isLimiter = (url: string) => /http\/plugins\/rate-limit\.js$|http\/rate-limits\/[^/]+\.js$/.test(url);
  let inside = 0;
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0;
    total += delta;
    for (let id: number | undefined = profile.samples[i]; id !== undefined; id = parent.get(id)) {
      if (isLimiter(byId.get(id)!.callFrame.url)) {
        inside += delta;
        break;
      }
    }
  }
  return total === 0 ? Number.NaN : inside / total;
}

interface Rounds {
  rates: { off: number[]; on: number[] };
  cpu: { off: number[]; on: number[] };
  rateRatios: number[];
  cpuRatios: number[];
  /** Per pair of server processes: the median of its rounds' on/off rate ratios. */
  pairMedians: number[];
  /** Cores the load generator (this process, both loads) used per round. */
  generatorCores: number[];
  last: string;
}

const emptyRounds = (): Rounds => ({ rates: { off: [], on: [] }, cpu: { off: [], on: [] }, rateRatios: [], cpuRatios: [], pairMedians: [], generatorCores: [], last: '' });

export async function run(): Promise<BenchRow[]> {
  const plan = pinningPlan();
  let pinned = plan ? 'not pinned (taskset failed)' : 'not pinned (one core)';
  let running: [Server, Server] | undefined;
  const stopServers = async () => {
    const stopping = running;
    running = undefined;
    for (const server of stopping ?? []) {
      await server.process.stop();
      rmSync(server.dataDir, { recursive: true, force: true });
    }
  };
  const loads = [1, CALLERS] as const;
  const rounds = new Map<number, Rounds>(loads.map((callers) => [callers, emptyRounds()]));
  let reserves = '';

  /** One pair of fresh server processes: pinned, warmed, then ROUNDS rounds of each load. */
  const pair = (index: number) => ({
    name: `server pair ${index + 1}/${PAIRS}: ${ROUNDS} rounds of each load, off and on loaded at the same time`,
    async run(): Promise<BenchRow[]> {
      // Which process starts first alternates with the pair, as the loads' order does with the round.
      running = index % 2 === 0 ? await Promise.all([startServer(false), startServer(true)]) : ((await Promise.all([startServer(true), startServer(false)])).reverse() as [Server, Server]);
      const [off, on] = running;
      if (plan && pinProcess(off.process.child.pid ?? 0, plan.servers) && pinProcess(on.process.child.pid ?? 0, plan.servers) && pinProcess(process.pid, plan.rest)) {
        pinned = `both servers pinned to CPU ${plan.servers}, the load generator to CPU ${plan.rest}`;
      }
      await Promise.all([runLoad(load(off, CALLERS, 2)), runLoad(load(on, CALLERS, 2))]);
      for (const callers of loads) {
        const into = rounds.get(callers)!;
        const ratios: number[] = [];
        for (let round = 0; round < ROUNDS; round++) {
          const measured = await measureBoth(off, on, callers, round % 2 === 1);
          into.rates.off.push(measured.off.result.requests_per_s);
          into.rates.on.push(measured.on.result.requests_per_s);
          into.cpu.off.push(measured.off.cpu_us);
          into.cpu.on.push(measured.on.cpu_us);
          ratios.push(measured.on.result.requests_per_s / measured.off.result.requests_per_s);
          into.cpuRatios.push(measured.on.cpu_us / measured.off.cpu_us);
          if (measured.generator) into.generatorCores.push(measured.generator.participants_cores);
          into.last = `off ${latencyNote(measured.off.result)}, on ${latencyNote(measured.on.result)}${othersNote(measured.machine)}`;
          progress(`pair ${index + 1}, round ${round + 1}, ${callers} caller(s): off ${measured.off.result.requests_per_s} req/s, on ${measured.on.result.requests_per_s} req/s`);
        }
        into.rateRatios.push(...ratios);
        into.pairMedians.push(median(ratios));
      }
      reserves = await metric(on, 'rate_limit_reserves_sent');
      await stopServers();
      return [];
    },
  });

  const rowsOf = (callers: number): BenchRow[] => {
    const r = rounds.get(callers)!;
    if (r.rateRatios.length === 0) throw new Error('no round was measured');
    const round3 = (value: number) => Math.round(value * 1000) / 1000;
    const cost = round3(1 - median(r.rateRatios));
    const cpuCost = round3(median(r.cpuRatios) - 1);
    const ratios = (values: number[]) => values.map((value) => value.toFixed(3)).join(', ');
    const round1 = (value: number) => Math.round(value * 10) / 10;
    const micros = (values: number[]) => values.map((value) => value.toFixed(1)).join(', ');
    const scenario = callers === 1 ? 'one caller' : `${callers} callers`;
    return [
      { area: AREA, scenario: `${scenario}: limiter off`, value: median(r.rates.off), unit: 'req/s', note: `median of ${r.rates.off.join(', ')}; ${CONNECTIONS} conn, ${SECONDS} s a round; ${pinned}; the load generator used ${generatorNote(r.generatorCores)} cores; last round: ${r.last}` },
      { area: AREA, scenario: `${scenario}: limiter on`, value: median(r.rates.on), unit: 'req/s', note: `median of ${r.rates.on.join(', ')}, in the same seconds as the off figures` },
      {
        area: AREA,
        scenario: `${scenario}: cost of the limiter`,
        value: cost,
        unit: 'fraction',
        note: `1 - the median of the ${r.rateRatios.length} rounds' on/off rate (per server pair: ${ratios(r.pairMedians)}); target < ${TARGET_COST} (${cost < TARGET_COST ? 'met' : 'not met'}); last pair's ${reserves}`,
      },
      { area: AREA, scenario: `${scenario}: server CPU per request, off`, value: round1(median(r.cpu.off)), unit: 'µs', note: `median of ${micros(r.cpu.off)}` },
      { area: AREA, scenario: `${scenario}: server CPU per request, on`, value: round1(median(r.cpu.on)), unit: 'µs', note: `median of ${micros(r.cpu.on)}` },
      {
        area: AREA,
        scenario: `${scenario}: CPU cost of the limiter`,
        value: cpuCost,
        unit: 'fraction',
        note: `the median of the rounds' on/off CPU per request (${ratios(r.cpuRatios)}) - 1; target < ${TARGET_COST} (${cpuCost < TARGET_COST ? 'met' : 'not met'})`,
      },
    ];
  };

  try {
    return await runScenarios(AREA, [
      ...Array.from({ length: PAIRS }, (_, index) => pair(index)),
      { name: 'one caller: the rounds of every pair', run: async () => rowsOf(1) },
      { name: `${CALLERS} callers: the rounds of every pair`, run: async () => rowsOf(CALLERS) },
      {
        name: `CPU profile of the limiter on: ${PROFILED_REQUESTS} requests in process`,
        async run(): Promise<BenchRow[]> {
          // Unpinned: the in-process node and its load share this process.
          if (plan) pinProcess(process.pid, plan.all);
          const dir = mkdtempSync(join(tmpdir(), 'bench-rate-limits-'));
          const { node, token } = await startInProcess(dir);
          try {
            let next = 0;
            const load = async (count: number) => {
              const loop = async () => {
                while (next < count) {
                  next++;
                  const response = await node.app.inject({ method: 'GET', url: ROUTE, headers: { authorization: `Bearer ${token}` } });
                  if (response.statusCode !== 200) throw new Error(`inject answered ${response.statusCode}: ${response.body}`);
                }
              };
              await Promise.all(Array.from({ length: 20 }, loop));
            };
            await load(2_000);
            next = 0;
            const share = await limiterShare(() => load(PROFILED_REQUESTS));
            const value = Math.round(share * 1000) / 1000;
            return [
              {
                area: AREA,
                scenario: 'CPU profile: share of the request spent in the limiter',
                value,
                unit: 'fraction',
                note: `samples inside http/plugins/rate-limit.js and http/rate-limits/*.js (with what they call) / all samples, ${PROFILED_REQUESTS} injected requests, one caller; target < ${TARGET_COST} (${value < TARGET_COST ? 'met' : 'not met'})`,
              },
            ];
          } finally {
            await node.close();
            rmSync(dir, { recursive: true, force: true });
          }
        },
      },
    ]);
  } finally {
    if (plan) pinProcess(process.pid, plan.all);
    await stopServers();
  }
}
