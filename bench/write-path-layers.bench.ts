import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad, type LoadOptions } from './support/load.js';
import { progress, runScenarios } from './support/scenarios.js';
import { startProjectServer, type ProjectServer } from './support/project-servers.js';
import { startServerProcess, type ServerProcess } from './support/server-process.js';
import { lockPath } from './support/write-path-load.js';
import type { BenchRow } from './types.js';

/**
 * Where a lock acquisition's CPU goes (hot-path issue, item 2), measured by
 * peeling it in layers: the server's CPU per request (all its threads, from
 * /proc, user + system) for request kinds that each add one part of the
 * path to the one before, every kind in every round (rounds interleave the
 * kinds, so the machine's drift hits them alike), medians of the rounds.
 *
 *   bare GET               bare Fastify, no plugins: HTTP parse, route, reply, socket write
 *   bare POST echo         + a small JSON body read and parsed
 *   project GET /health    the service's edge on a route that does nothing: hooks, request
 *                          id, metrics, response schema
 *   project GET status     + bearer authentication, rate limit, an actor ask (no write)
 *   project POST re-acquire + body parse and validation, an actor turn that changes nothing
 *   project POST acquire   + a fresh key: activation read, snapshot encode, commit, fsync
 *   (the same, limiter off) the rate limiter's share of the write
 *
 * CPU, not time: the kernel's loopback socket work is part of it (it is
 * charged to the thread that writes), the wait for the disk is not.
 */
const AREA = 'write path: layers';
const CONNECTIONS = 100;
const SECONDS = Number(process.env.BENCH_WRITE_PATH_LAYERS_SECONDS ?? 3);
const ROUNDS = 3;
const BODY = JSON.stringify({ owner_id: 'owner-12345', ttl_seconds: 30 });

const distDir = dirname(dirname(fileURLToPath(import.meta.url)));
const bareScript = join(distDir, 'bench', 'support', 'bare-fastify-server.js');

const TICKS_PER_SECOND = 100;

/** CPU ticks of a process: its main thread, and all its threads. */
function cpuTicks(pid: number): { main: number; all: number } {
  let main = 0;
  let all = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ticks = Number(fields[11]) + Number(fields[12]);
      all += ticks;
      if (tid === String(pid)) main += ticks;
    } catch {
      // The thread ended.
    }
  }
  return { main, all };
}

interface Kind {
  label: string;
  /** What it adds to the kind before it (the layer). */
  adds: string;
  server: () => ServerProcess;
  load: () => Omit<LoadOptions, 'connections' | 'duration_s'>;
}

interface Sample {
  all_us: number;
  main_us: number;
  rate: number;
}

async function measure(kind: Kind, duration_s: number): Promise<Sample> {
  const pid = kind.server().child.pid!;
  const before = cpuTicks(pid);
  const result = await runLoad({ ...kind.load(), connections: CONNECTIONS, duration_s });
  const after = cpuTicks(pid);
  const bad = result.requests_total - (result.status['200'] ?? 0) - (result.status['204'] ?? 0);
  if (bad > 0) throw new Error(`${kind.label}: ${bad} answers were not 200/204: ${JSON.stringify(result.status)}`);
  const per = (ticks: number) => ((ticks / TICKS_PER_SECOND) * 1e6) / Math.max(1, result.requests_total);
  return { all_us: per(after.all - before.all), main_us: per(after.main - before.main), rate: result.requests_per_s };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const round1 = (x: number) => Math.round(x * 10) / 10;

export async function run(): Promise<BenchRow[]> {
  let bare: ServerProcess | undefined;
  let project: ProjectServer | undefined;
  let unlimited: ProjectServer | undefined;
  try {
    bare = await startServerProcess(bareScript, {});
    project = await startProjectServer();
    unlimited = await startProjectServer({ RATE_LIMITS_ENABLED: '0' });
    const auth = (server: ProjectServer) => ({ authorization: `Bearer ${server.token}`, 'content-type': 'application/json' });
    // The holder of this key acquires it again: a turn, no write.
    for (const server of [project, unlimited]) {
      const held = await fetch(server.server.url + lockPath('held'), { method: 'POST', headers: auth(server), body: JSON.stringify({ owner_id: 'owner-12345', ttl_seconds: 86_400 }) });
      if (held.status !== 200) throw new Error(`could not take the held lock: ${held.status}`);
    }
    let fresh = 0;
    const freshLoad = (server: ProjectServer) => () => ({
      url: server.server.url,
      requests: [{ method: 'POST', headers: auth(server), body: BODY, setupRequest: (request: object) => ({ ...request, path: lockPath(`f${fresh++}`) }) }],
    });
    const b = bare;
    const p = project;
    const u = unlimited;
    const kinds: Kind[] = [
      { label: 'bare Fastify GET', adds: 'HTTP parse, routing, reply, socket write', server: () => b, load: () => ({ url: `${b.url}/`, method: 'GET' }) },
      { label: 'bare Fastify POST echo', adds: 'a small JSON body read and parsed', server: () => b, load: () => ({ url: `${b.url}/echo`, method: 'POST', headers: { 'content-type': 'application/json' }, body: BODY }) },
      { label: 'project GET /health', adds: "the service's edge on a route that does nothing (hooks, request id, metrics, response schema)", server: () => p.server, load: () => ({ url: `${p.server.url}/health`, method: 'GET' }) },
      { label: 'project GET lock status', adds: 'bearer authentication, rate limit, an actor ask that writes nothing', server: () => p.server, load: () => ({ url: p.server.url + lockPath('held'), method: 'GET', headers: { authorization: `Bearer ${p.token}` } }) },
      { label: 'project POST re-acquire by the holder', adds: 'body parse and validation, a turn that changes nothing', server: () => p.server, load: () => ({ url: p.server.url + lockPath('held'), method: 'POST', headers: auth(p), body: BODY }) },
      { label: 'project POST acquire, fresh key', adds: 'activation read, snapshot encode, commit and fsync', server: () => p.server, load: freshLoad(p) },
      { label: 'project POST acquire, fresh key, limiter off', adds: '(RATE_LIMITS_ENABLED=0: the limiter is the difference)', server: () => u.server, load: freshLoad(u) },
    ];
    const samples = new Map<Kind, Sample[]>(kinds.map((k) => [k, []]));
    for (const kind of kinds) await measure(kind, 2);
    for (let round = 0; round < ROUNDS; round++) {
      for (const kind of kinds) {
        const sample = await measure(kind, SECONDS);
        samples.get(kind)!.push(sample);
        progress(`round ${round + 1}: ${kind.label}: ${sample.all_us.toFixed(1)} µs/request (main thread ${sample.main_us.toFixed(1)}), ${Math.round(sample.rate)} req/s`);
      }
    }
    const rows: BenchRow[] = [];
    let previous: number | undefined;
    for (const kind of kinds) {
      const all = median(samples.get(kind)!.map((s) => s.all_us));
      const main = median(samples.get(kind)!.map((s) => s.main_us));
      const rate = median(samples.get(kind)!.map((s) => s.rate));
      const layer = kind.label.endsWith('limiter off') ? '' : previous === undefined ? '' : `; +${round1(all - previous)} µs over the row above: ${kind.adds}`;
      rows.push({
        area: AREA,
        scenario: `${kind.label}: server CPU per request`,
        value: round1(all),
        unit: 'µs',
        note: `main thread ${round1(main)} µs; ${Math.round(rate)} req/s; medians of ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections${layer}`,
      });
      if (!kind.label.endsWith('limiter off')) previous = all;
    }
    const withLimiter = median(samples.get(kinds[5]!)!.map((s) => s.all_us));
    const without = median(samples.get(kinds[6]!)!.map((s) => s.all_us));
    rows.push({ area: AREA, scenario: 'rate limiter on the fresh-key write', value: round1(withLimiter - without), unit: 'µs', note: `${round1(withLimiter)} - ${round1(without)} µs per request (${((withLimiter / without - 1) * 100).toFixed(1)}%)` });
    return rows;
  } finally {
    await bare?.stop();
    await project?.stop();
    await unlimited?.stop();
  }
}

