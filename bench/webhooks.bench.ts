import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { webhookPolicy } from '../actors/webhooks/messages.js';
import { loadConfig } from '../http/config.js';
import { startNode, type RunningNode } from '../http/node.js';
import { othersNote, startCpuMeter } from './support/cpu-meter.js';
import { progress, runScenarios, type Scenario } from './support/scenarios.js';
import type { BenchRow } from './types.js';

/**
 * Webhook deliveries per second (issue 12): a node in this process (real
 * LMDB, fsync, SystemClock) delivers `test.webhook` events, fanned out to
 * WEBHOOKS webhooks, to a local receiver in its own process that answers
 * 204 at once and counts what it gets. The events are published through the
 * public API (POST /api/v1/webhooks/{id}/test fans one event out to every
 * subscribed webhook of the tenant), paced so no webhook's backlog nears its
 * pending cap. The heap is sampled (after full GCs) before the measured run
 * and after everything was delivered: it must not grow.
 *
 * Second scenario: the same, plus HANGING webhooks on another target that
 * accepts the connection and never answers (until the attempt's time-out):
 * deliveries to the healthy target must go on at about the first rate,
 * because the delivery worker caps attempts in flight per target host
 * (http/webhook-delivery.ts, per_host_max), so the hanging target holds
 * only its own slots.
 *
 * Exactness: every healthy delivery is counted once per (webhook, event id)
 * by the receiver; the run fails if one is missing or delivered twice.
 * Target: >= 2,000 deliveries/s.
 */
const AREA = 'webhooks';
const SECONDS = Number(process.env.BENCH_WEBHOOKS_SECONDS ?? 5);
/** Warm-up ends when every webhook's log is full, or after this. */
const WARM_UP_SECONDS_MAX = 30;
/** Delivery log entries a webhook keeps. */
const LOG_KEPT = webhookPolicy.deliveries_kept_max;
const WEBHOOKS = 20;
const HANGING = 5;
/** The attempt time-out in this bench (WEBHOOK_TIMEOUT_MS): a hanging attempt holds its slot this long. */
const TIMEOUT_MS = 10_000;
/** Events published ahead of the slowest healthy webhook (its pending cap is 1,000). */
const BACKLOG_EVENTS_MAX = 300;
const TARGET = 'target >= 2,000/s';

// ---- the receiver (child process) ----

interface ReceiverCounts {
  delivered: number;
  unique: number;
  hanging_received: number;
}

function receiverMain(): void {
  const seen = new Set<string>();
  let delivered = 0;
  let hanging_received = 0;
  const healthy = http.createServer((request, response) => {
    const key = `${request.url} ${String(request.headers['webhook-id'])}`;
    request.resume();
    request.on('end', () => {
      delivered++;
      seen.add(key);
      response.writeHead(204).end();
    });
  });
  // Accepts and reads, never answers: the attempt ends at its time-out.
  const hanging = http.createServer((request) => {
    hanging_received++;
    request.resume();
  });
  hanging.requestTimeout = 0;
  let listening = 0;
  const ready = () => {
    if (++listening < 2) return;
    process.send!({ healthy_port: (healthy.address() as { port: number }).port, hanging_port: (hanging.address() as { port: number }).port });
  };
  healthy.listen(0, '127.0.0.1', ready);
  hanging.listen(0, '127.0.0.1', ready);
  process.on('message', (id: number) => process.send!({ id, counts: { delivered, unique: seen.size, hanging_received } satisfies ReceiverCounts }));
  process.on('disconnect', () => process.exit(0));
}

if (process.argv[2] === '--webhook-receiver') receiverMain();

interface Receiver {
  child: ChildProcess;
  healthy_port: number;
  hanging_port: number;
  counts(): Promise<ReceiverCounts>;
}

async function startReceiver(): Promise<Receiver> {
  const child = fork(fileURLToPath(import.meta.url), ['--webhook-receiver'], { stdio: ['ignore', 2, 2, 'ipc'] });
  const ports = await new Promise<{ healthy_port: number; hanging_port: number }>((resolve, reject) => {
    child.once('message', (message) => resolve(message as { healthy_port: number; hanging_port: number }));
    child.once('exit', (code) => reject(new Error(`receiver exited with ${code}`)));
  });
  // Each question carries an id, so concurrent ones (the publisher's, the measurement's) get their own answers.
  const waiting = new Map<number, (counts: ReceiverCounts) => void>();
  let nextId = 0;
  child.on('message', (message: { id?: number; counts?: ReceiverCounts }) => {
    if (message.id === undefined || !message.counts) return;
    waiting.get(message.id)?.(message.counts);
    waiting.delete(message.id);
  });
  return {
    child,
    ...ports,
    counts: () =>
      new Promise((resolve) => {
        const id = ++nextId;
        waiting.set(id, resolve);
        child.send(id);
      }),
  };
}

// ---- the node ----

const gc = (globalThis as { gc?: () => void }).gc;

async function settledHeap(): Promise<number> {
  for (let i = 0; i < 4; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc?.();
  }
  return process.memoryUsage().heapUsed;
}

async function api(node: RunningNode, method: string, path: string, token: string | null, body?: unknown): Promise<any> {
  const response = await fetch(node.url + path, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(check: () => Promise<boolean>, what: string, timeout_ms: number): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

interface Measured {
  rate: number;
  delivered_total: number;
  heap_before_bytes: number;
  heap_after_bytes: number;
  rss_before_bytes: number;
  rss_after_bytes: number;
  hanging_received: number;
  others: string;
  /** Deliveries per CPU-second of this process (the node and the publisher), the receiver not counted. */
  per_cpu_second: number | undefined;
  node_cores: number | undefined;
}

async function measure(hanging: number): Promise<Measured> {
  const receiver = await startReceiver();
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-webhooks-'));
  const config = {
    ...loadConfig({}),
    host: '127.0.0.1',
    port: 0,
    dataDir,
    logLevel: 'silent',
    passwordKdfCostLog2: 10,
    registrationsPerAddressMax: 0,
    webhookAllowPrivateTargets: true,
    webhookTimeoutMs: TIMEOUT_MS,
  };
  const node = await startNode({ config, logger: pino({ level: 'silent' }) });
  try {
    const user = await api(node, 'POST', '/api/v1/auth/register', null, { email: `bench${process.pid}@example.com`, username: `bench${process.pid}`, password: 'correct horse battery' });
    const token: string = user.access_token;
    const ids: string[] = [];
    for (let i = 0; i < WEBHOOKS; i++) {
      const created = await api(node, 'POST', '/api/v1/webhooks', token, { url: `http://127.0.0.1:${receiver.healthy_port}/hook/${i}`, events: ['test.webhook'] });
      ids.push(created.data.id);
    }
    for (let i = 0; i < hanging; i++) {
      await api(node, 'POST', '/api/v1/webhooks', token, { url: `http://127.0.0.1:${receiver.hanging_port}/hang/${i}`, events: ['test.webhook'] });
    }

    // The publisher: one event per call, fanned out to every webhook; paced on the healthy backlog.
    let published = 0;
    let delivered = 0;
    let publishing = true;
    const publisher = (async () => {
      while (publishing) {
        delivered = (await receiver.counts()).delivered;
        if (published * WEBHOOKS - delivered >= BACKLOG_EVENTS_MAX * WEBHOOKS) {
          await sleep(2);
          continue;
        }
        const batch = Array.from({ length: 10 }, () => api(node, 'POST', `/api/v1/webhooks/${ids[0]}/test`, token, { data: { n: published } }));
        published += batch.length;
        await Promise.all(batch);
      }
    })();

    const trace = process.env.BENCH_WEBHOOKS_TRACE === '1'
      ? setInterval(() => {
          const worker = node.webhookDelivery as unknown as { inFlight: number; queued: number };
          progress(`webhooks: published ${published * WEBHOOKS}, delivered ${delivered}, worker in flight ${worker.inFlight}, queued ${worker.queued}`);
        }, 1000)
      : undefined;
    // Warm-up until every webhook's delivery log is full (the newest 100 are kept), so the heap
    // compared below holds the same bounded structures before and after.
    const warmUpDeadline = Date.now() + WARM_UP_SECONDS_MAX * 1000;
    while (delivered < WEBHOOKS * (LOG_KEPT + 10) && Date.now() < warmUpDeadline) await sleep(50);
    const heap_before_bytes = await settledHeap();
    const rss_before_bytes = process.memoryUsage().rss;
    const meter = startCpuMeter([process.pid]);
    const start = await receiver.counts();
    const started_ms = performance.now();
    await sleep(SECONDS * 1000);
    const end = await receiver.counts();
    const elapsed_ms = performance.now() - started_ms;
    const cpu = meter();
    publishing = false;
    await publisher;
    if (trace) clearInterval(trace);

    // Everything published reaches the healthy target exactly once.
    const expected = published * WEBHOOKS;
    await waitFor(async () => (await receiver.counts()).delivered >= expected, `${expected} deliveries`, 60_000);
    await sleep(200);
    const final = await receiver.counts();
    if (final.delivered !== expected || final.unique !== expected) {
      throw new Error(`received ${final.delivered} deliveries (${final.unique} distinct) of ${expected} published`);
    }
    const heap_after_bytes = await settledHeap();
    progress(`webhooks: ${expected} deliveries, heap ${(heap_before_bytes / 1e6).toFixed(1)} -> ${(heap_after_bytes / 1e6).toFixed(1)} MB`);
    return {
      rate: Math.round(((end.delivered - start.delivered) / elapsed_ms) * 1000),
      delivered_total: expected,
      heap_before_bytes,
      heap_after_bytes,
      rss_before_bytes,
      rss_after_bytes: process.memoryUsage().rss,
      hanging_received: final.hanging_received,
      others: othersNote(cpu),
      per_cpu_second: cpu && cpu.participants_cores > 0 ? Math.round((end.delivered - start.delivered) / ((cpu.participants_cores * elapsed_ms) / 1000)) : undefined,
      node_cores: cpu?.participants_cores,
    };
  } finally {
    await node.close();
    receiver.child.kill();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const mb = (bytes: number) => Math.round((bytes / 1e6) * 10) / 10;

let healthyRate: number | undefined;

function deliveryScenario(name: string, hanging: number): Scenario {
  return {
    name,
    async run(): Promise<BenchRow[]> {
      const result = await measure(hanging);
      const shape = `${WEBHOOKS} webhooks on one local target${hanging ? ` + ${hanging} webhooks on a target that never answers (time-out ${TIMEOUT_MS / 1000} s; it got ${result.hanging_received} attempts)` : ''}`;
      const rows: BenchRow[] = [
        { area: AREA, scenario: `${name}: deliveries`, value: result.rate, unit: 'deliveries/s', note: `${shape}; ${result.delivered_total} delivered exactly once${result.others}; ${TARGET}` },
        {
          area: AREA,
          scenario: `${name}: heap after full GC, before -> after`,
          value: mb(result.heap_after_bytes - result.heap_before_bytes),
          unit: 'MB growth',
          note: `heap ${mb(result.heap_before_bytes)} -> ${mb(result.heap_after_bytes)} MB, rss ${mb(result.rss_before_bytes)} -> ${mb(result.rss_after_bytes)} MB, over ${result.delivered_total} deliveries`,
        },
      ];
      if (result.per_cpu_second !== undefined) {
        rows.push({
          area: AREA,
          scenario: `${name}: per CPU-second of the node process`,
          value: result.per_cpu_second,
          unit: 'deliveries/CPU-s',
          note: `the node process (with the publisher) used ${result.node_cores!.toFixed(2)} cores; the receiver is not counted`,
        });
      }
      if (hanging === 0) healthyRate = result.rate;
      else if (healthyRate) {
        rows.push({ area: AREA, scenario: `${name}: healthy rate / rate without a hanging target`, value: Math.round((result.rate / healthyRate) * 100) / 100, unit: 'ratio', note: 'target: near 1 (targets isolated)' });
      }
      return rows;
    },
  };
}

export async function run(): Promise<BenchRow[]> {
  return runScenarios(AREA, [deliveryScenario('local receiver', 0), deliveryScenario('one target hangs', HANGING)]);
}
