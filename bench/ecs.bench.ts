import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { runScenarios } from './support/scenarios.js';
import { startServerProcess, type ServerProcess } from './support/server-process.js';
import { projectEnv } from './support/project-servers.js';
import { percentile } from './support/stats.js';
import type { BenchRow } from './types.js';

/**
 * The ECS coordinator's WebSocket stream (issue 16). The node runs in its own
 * process (dist/http/server.js, real LMDB with fsync); the clients run here.
 * Targets: one index at a 50 ms tick with 1,000 subscribers on one node,
 * every subscriber receives every tick, p99 delivery < 20 ms after the tick
 * commits; 10,000 idle connections per node within 1 GiB.
 *
 * Delivery latency is measured from the tick's `at` (the tick turn's clock
 * reading, taken just before its commit) to the message's arrival at the
 * client, on the same machine's clock: it includes the commit's fsync, so it
 * is an upper bound of "after the tick commits".
 */
const AREA = 'ecs';
const SUBSCRIBERS = Number(process.env.BENCH_ECS_SUBSCRIBERS ?? 1000);
const SECONDS = Number(process.env.BENCH_ECS_SECONDS ?? 10);
const IDLE_CONNECTIONS = Number(process.env.BENCH_ECS_IDLE ?? 10_000);
const TICK_RATE_MS = 50;
const ENTITIES = 200;
/** Entities changed per mutation batch (a driver posts one batch per tick period). */
const CHANGES_PER_BATCH = 20;
const CONNECT_IN_FLIGHT = 100;

const benchDir = dirname(fileURLToPath(import.meta.url));
const serverScript = join(dirname(benchDir), 'http', 'server.js');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const fmt = (ms: number) => `${ms.toFixed(1)} ms`;

interface Node {
  server: ServerProcess;
  token: string;
  dir: string;
}

async function startNode(): Promise<Node> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-ecs-'));
  const server = await startServerProcess(serverScript, {
    DATA_DIR: dir,
    // The edge limiter's default tier off: every connection comes from 127.0.0.1.
    ...projectEnv,
    REGISTRATIONS_PER_ADDRESS_MAX: '0',
    HTTP_CONNECTIONS_MAX: '40000',
    ...(process.env.BENCH_ECS_DURABILITY ? { DURABILITY: process.env.BENCH_ECS_DURABILITY } : {}),
  }, { readyPath: '/health' });
  const response = await fetch(`${server.url}/api/v1/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'bench-ecs@example.com', username: 'benchecs', password: 'correct horse battery' }),
  });
  const body = (await response.json()) as { access_token: string };
  if (response.status !== 201) throw new Error(`register: ${response.status} ${JSON.stringify(body)}`);
  return { server, token: body.access_token, dir };
}

async function stopNode(node: Node): Promise<void> {
  await node.server.stop();
  rmSync(node.dir, { recursive: true, force: true });
}

function api(node: Node, index: string, path: string, body?: unknown) {
  return fetch(`${node.server.url}/api/v1/ecs/${index}/coordinator${path}`, {
    method: body === undefined && path === '' ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${node.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  }).then(async (response) => {
    const json = (await response.json()) as any;
    if (response.status !== 200) throw new Error(`${path}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  });
}

/** Opens `count` sockets, CONNECT_IN_FLIGHT at a time; `onMessage` gets each socket's raw text. */
async function connectMany(node: Node, index: string, count: number, onMessage: (socket: number, text: string) => void): Promise<WebSocket[]> {
  const url = `${node.server.url.replace(/^http/, 'ws')}/api/v1/ecs/${index}/coordinator/ws?token=${encodeURIComponent(node.token)}`;
  const sockets: WebSocket[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const id = next++;
      const ws = new WebSocket(url, { perMessageDeflate: false });
      ws.on('message', (data) => onMessage(id, data.toString()));
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      sockets[id] = ws;
    }
  };
  await Promise.all(Array.from({ length: CONNECT_IN_FLIGHT }, worker));
  return sockets;
}

function closeAll(sockets: WebSocket[]): void {
  for (const ws of sockets) ws.terminate();
}

const TICK_PREFIX = /^\{"type":"tick","tick":(\d+),"at":"([^"]+)"/;

async function fanOut(node: Node): Promise<BenchRow[]> {
  const index = 'fanout';
  const versions = new Map<string, number>();
  const created = await api(node, index, '/mutations', { mutations: Array.from({ length: ENTITIES }, (_, i) => ({ entity_id: `e${i}`, op: 'create', components: { pos: [i, i], hp: 100 } })) });
  for (const result of created.results) versions.set(result.entity_id, result.new_version);
  const lastTick = new Int32Array(SUBSCRIBERS).fill(-1);
  let outOfOrder = 0;
  let measuring = false;
  const latencies: number[] = [];
  const received = new Int32Array(SUBSCRIBERS);
  const sockets = await connectMany(node, index, SUBSCRIBERS, (socket, text) => {
    if (text.startsWith('{"type":"hello"')) {
      lastTick[socket] = JSON.parse(text).tick;
      return;
    }
    const match = TICK_PREFIX.exec(text);
    if (!match) return;
    const tick = Number(match[1]);
    if (lastTick[socket]! >= 0 && tick !== lastTick[socket]! + 1) outOfOrder++;
    lastTick[socket] = tick;
    if (measuring) {
      latencies.push(Date.now() - Date.parse(match[2]!));
      received[socket]!++;
    }
  });
  const start = await api(node, index, '/start', { tick_rate_ms: TICK_RATE_MS });
  await sleep(1_000);
  const first = (await api(node, index, '')).tick as number;
  const measureStarted = performance.now();
  measuring = true;
  received.fill(0);
  // A driver changes CHANGES_PER_BATCH entities every tick period.
  const until = Date.now() + SECONDS * 1000;
  let batches = 0;
  let cursor = 0;
  while (Date.now() < until) {
    const mutations = Array.from({ length: CHANGES_PER_BATCH }, () => {
      const entity_id = `e${cursor++ % ENTITIES}`;
      return { entity_id, expected_version: versions.get(entity_id), components: { pos: [cursor, batches] } };
    });
    const reply = await api(node, index, '/mutations', { mutations });
    for (const result of reply.results) if (result.success) versions.set(result.entity_id, result.new_version);
    batches++;
    await sleep(TICK_RATE_MS);
  }
  const status = await api(node, index, '/stop', {});
  const measured_s = (performance.now() - measureStarted) / 1000;
  await sleep(500);
  measuring = false;
  const ticks = (status.tick as number) - first;
  const connected = (await api(node, index, '')).connected_systems as number;
  closeAll(sockets);
  latencies.sort((a, b) => a - b);
  let complete = 0;
  for (let i = 0; i < SUBSCRIBERS; i++) if (received[i]! >= ticks) complete++;
  const note = `${SUBSCRIBERS} subscribers, ${ticks} ticks at ${start.tick_rate_ms} ms, ${CHANGES_PER_BATCH} entity changes per tick period; ` +
    `${complete}/${SUBSCRIBERS} subscribers got every tick, ${outOfOrder} out of order or missing; connected_systems read ${connected}`;
  return [
    { area: AREA, scenario: `tick delivery p50 (${SUBSCRIBERS} subscribers)`, value: Number(percentile(latencies, 0.5).toFixed(1)), unit: 'ms', note },
    { area: AREA, scenario: `tick delivery p99 (${SUBSCRIBERS} subscribers)`, value: Number(percentile(latencies, 0.99).toFixed(1)), unit: 'ms', note: `target < 20 ms; max ${fmt(latencies[latencies.length - 1] ?? 0)}` },
    { area: AREA, scenario: 'ticks committed per second', value: Number((ticks / measured_s).toFixed(1)), unit: 'ticks/s', note: `target ${1000 / TICK_RATE_MS}/s at ${TICK_RATE_MS} ms; a tick waits for the previous tick's commit (fsync)` },
    { area: AREA, scenario: 'subscribers that received every tick', value: complete, unit: 'subscribers', note: `of ${SUBSCRIBERS}; ${latencies.length} deliveries measured` },
  ];
}

function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /VmRSS:\s+(\d+) kB/.exec(status);
  return match ? Number(match[1]) * 1024 : Number.NaN;
}

async function idleConnections(node: Node): Promise<BenchRow[]> {
  const pid = node.server.child.pid!;
  // Warm the path (JIT, the index actor, the feed) before the baseline.
  const warm = await connectMany(node, 'idle', 10, () => undefined);
  await sleep(500);
  const before = rssBytes(pid);
  const started = performance.now();
  const sockets = await connectMany(node, 'idle', IDLE_CONNECTIONS, () => undefined);
  const connect_s = (performance.now() - started) / 1000;
  await sleep(2_000);
  const after = rssBytes(pid);
  const connected = (await api(node, 'idle', '')).connected_systems as number;
  closeAll(sockets);
  closeAll(warm);
  const perConnection = (after - before) / IDLE_CONNECTIONS;
  const per10k = before + perConnection * 10_000;
  return [
    { area: AREA, scenario: `idle connections held (one node)`, value: IDLE_CONNECTIONS, unit: 'connections', note: `opened in ${connect_s.toFixed(1)} s (${Math.round(IDLE_CONNECTIONS / connect_s)}/s, token in the query); connected_systems read ${connected}` },
    { area: AREA, scenario: 'memory per idle connection (node RSS)', value: Math.round(perConnection), unit: 'bytes', note: `RSS ${(before / 2 ** 20).toFixed(0)} MiB before, ${(after / 2 ** 20).toFixed(0)} MiB after` },
    { area: AREA, scenario: 'node RSS at 10,000 idle connections', value: Number((per10k / 2 ** 20).toFixed(0)), unit: 'MiB', note: `target <= 1024 MiB${IDLE_CONNECTIONS === 10_000 ? ' (measured)' : ' (extrapolated)'}` },
  ];
}

export async function run(): Promise<BenchRow[]> {
  const node = await startNode();
  try {
    return await runScenarios(AREA, [
      { name: `${SUBSCRIBERS} subscribers at a ${TICK_RATE_MS} ms tick for ${SECONDS} s`, run: () => fanOut(node) },
      { name: `${IDLE_CONNECTIONS} idle connections`, run: () => idleConnections(node) },
    ]);
  } finally {
    await stopNode(node);
  }
}
