import { runInChild, serveInChild, type ChildDone } from './child-run.js';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { runLoad, type LoadRequest, type LoadResult } from './load.js';
import { percentile } from './stats.js';

/**
 * The write-path bench's load generator, run in a child process of its own
 * (`runLoadInChild`), apart from every server it measures. The parent sends
 * a plan over IPC; the child builds the request sequence (functions do not
 * cross IPC), runs it and sends back one result.
 *
 * - target echo: POST /echo with the body (bare Fastify).
 * - target put: POST /put/<key> (the lmdb durable-put server).
 * - target lock: the project, POST (acquire) and, when warm or hot, DELETE
 *   (release) on /api/v1/distributed-state/bench/<key>/lock with the bearer.
 * - mode fresh: a new key per request (put), per acquire (lock; never
 *   released; one owner and the plan's body, as the put gets).
 *   mode warm: keys w0..w999 in turn (lock: acquire + release).
 *   mode hot: one key, one owner, one connection, requests one after another,
 *   timed here with performance.now() (autocannon's latencies are whole ms).
 * With several urls (a cluster) the connections are split over them and the
 * results added up (p50 / p99: the highest of the instances).
 */
export type WritePathTarget = 'echo' | 'put' | 'lock';
export type WritePathMode = 'fresh' | 'warm' | 'hot';

export interface WritePathPlan {
  target: WritePathTarget;
  mode: WritePathMode;
  urls: string[];
  token?: string;
  /** A bearer per url (servers that do not share users, such as separate embedded nodes); `token` otherwise. */
  tokens?: string[];
  connections: number;
  duration_s: number;
  /** Makes fresh keys unique across rounds. */
  prefix: string;
  /** Keys of the warm set (default 1,000). */
  warmKeys?: number;
  /** Names of the warm set's keys: <warmPrefix>0 .. (default `w`). */
  warmPrefix?: string;
  body: string;
}

export interface WritePathResult {
  requests_per_s: number;
  latency_p50_ms: number;
  latency_p99_ms: number;
  /** Release answers (204) per second: lock cycles. */
  cycles_per_s: number;
  /** Hot mode: p50 / p99 of one whole cycle (acquire + release; a put). */
  cycle_p50_ms?: number;
  cycle_p99_ms?: number;
  duration_s: number;
  requests_total: number;
  status: Record<string, number>;
  errors: number;
  timeouts: number;
}

/**
 * TTL of a warm-set lock (fresh keys keep the body's 30 s). A run stops
 * between an acquire and its release on up to one key per connection, and
 * such a lock stays held for its TTL. At 30 s the next warm run on the same
 * server found them still held: 10,148 and 16,714 of its requests answered
 * 409 (2026-11-29, rounds 2 and 3), answers that write nothing and cost less,
 * so they raised the rate it reported. One second is over long before the
 * next warm run on that server starts (another server's run comes between),
 * and a cycle takes milliseconds.
 */
export const WARM_TTL_SECONDS = 1;

export const lockPath = (key: string) => `/api/v1/distributed-state/bench/${encodeURIComponent(key)}/lock`;

function sequence(plan: WritePathPlan, instance: number): { url: string; requests?: LoadRequest[]; method?: string; headers?: Record<string, string>; body?: string } {
  const url = plan.urls[instance];
  const json = { 'content-type': 'application/json' };
  const warmKeys = plan.warmKeys ?? 1000;
  let n = 0;
  const key = () => (plan.mode === 'fresh' ? `${plan.prefix}i${instance}-${n++}` : `${plan.warmPrefix ?? 'w'}${n++ % warmKeys}`);
  if (plan.target === 'echo') return { url: url + '/echo', method: 'POST', headers: json, body: plan.body };
  if (plan.target === 'put') {
    return { url, requests: [{ method: 'POST', headers: json, body: plan.body, setupRequest: (request) => ({ ...request, path: `/put/${key()}` }) }] };
  }
  const headers = { ...json, authorization: `Bearer ${plan.tokens?.[instance] ?? plan.token}` };
  if (plan.mode === 'fresh') {
    // Built as the put floor's requests are: the same body (one owner: every key is new, so no acquire
    // meets another's lock), only the path made per request, and the answer not parsed (nothing is
    // released). This process shares the machine's cores with the servers it measures; an owner and a
    // body made per request and every answer parsed were work the floor's requests did not cost it
    // (6 interleaved rounds, 2026-11-30: the project's rate a median 7% higher without them).
    return { url, requests: [{ method: 'POST', headers, body: plan.body, setupRequest: (request) => ({ ...request, path: lockPath(key()) }) }] };
  }
  let owner = 0;
  const ttl_seconds = WARM_TTL_SECONDS;
  const acquire: LoadRequest = {
    method: 'POST',
    headers,
    setupRequest(request, context) {
      const k = key();
      const owner_id = `${plan.prefix}o${instance}-${owner++}`;
      context.key = k;
      context.owner_id = owner_id;
      context.lock_id = undefined;
      return { ...request, path: lockPath(k), body: JSON.stringify({ owner_id, ttl_seconds }) };
    },
    onResponse(status, body, context) {
      if (status === 200) context.lock_id = (JSON.parse(body) as { lock_id: string }).lock_id;
    },
  };
  const release: LoadRequest = {
    method: 'DELETE',
    headers,
    setupRequest(request, context) {
      if (typeof context.lock_id !== 'string') return null;
      return { ...request, path: lockPath(context.key as string), body: JSON.stringify({ lock_id: context.lock_id, owner_id: context.owner_id }) };
    },
  };
  return { url, requests: [acquire, release] };
}

async function autocannonPlan(plan: WritePathPlan): Promise<WritePathResult> {
  const count = plan.urls.length;
  const results: LoadResult[] = await Promise.all(
    plan.urls.map((_, i) => {
      const connections = Math.floor(plan.connections / count) + (i < plan.connections % count ? 1 : 0);
      return runLoad({ ...sequence(plan, i), connections, duration_s: plan.duration_s });
    }),
  );
  const status: Record<string, number> = {};
  for (const r of results) for (const [code, c] of Object.entries(r.status)) status[code] = (status[code] ?? 0) + c;
  const duration_s = Math.max(...results.map((r) => r.duration_s));
  return {
    requests_per_s: results.reduce((s, r) => s + r.requests_per_s, 0),
    latency_p50_ms: Math.max(...results.map((r) => r.latency_p50_ms)),
    latency_p99_ms: Math.max(...results.map((r) => r.latency_p99_ms)),
    cycles_per_s: Math.round(results.reduce((s, r) => s + (r.status['204'] ?? 0) / r.duration_s, 0)),
    duration_s,
    requests_total: results.reduce((s, r) => s + r.requests_total, 0),
    status,
    errors: results.reduce((s, r) => s + r.errors, 0),
    timeouts: results.reduce((s, r) => s + r.timeouts, 0),
  };
}

/** One request on the keep-alive agent's single socket; resolves with status and body. */
function request(agent: http.Agent, url: URL, method: string, path: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method, path, agent, headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Hot mode: one connection, one key, one owner, sequential; every request and every cycle timed. */
async function hotPlan(plan: WritePathPlan): Promise<WritePathResult> {
  const url = new URL(plan.urls[0]);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const json = { 'content-type': 'application/json' };
  const headers = { ...json, authorization: `Bearer ${plan.token}` };
  const owner_id = `${plan.prefix}hot-owner`;
  const key = `${plan.prefix}hot`;
  const perRequest: number[] = [];
  const perCycle: number[] = [];
  const status: Record<string, number> = {};
  const count = (code: number) => (status[code] = (status[code] ?? 0) + 1);
  const timed = async (method: string, path: string, h: Record<string, string>, body: string) => {
    const t0 = performance.now();
    const answer = await request(agent, url, method, path, h, body);
    perRequest.push(performance.now() - t0);
    count(answer.status);
    return answer;
  };
  const started = performance.now();
  const deadline = started + plan.duration_s * 1000;
  let cycles = 0;
  while (performance.now() < deadline) {
    const c0 = performance.now();
    if (plan.target === 'lock') {
      const acquired = await timed('POST', lockPath(key), headers, JSON.stringify({ owner_id, ttl_seconds: 30 }));
      if (acquired.status !== 200) throw new Error(`hot acquire answered ${acquired.status}: ${acquired.body}`);
      const { lock_id } = JSON.parse(acquired.body) as { lock_id: string };
      const released = await timed('DELETE', lockPath(key), headers, JSON.stringify({ lock_id, owner_id }));
      if (released.status !== 204) throw new Error(`hot release answered ${released.status}: ${released.body}`);
    } else if (plan.target === 'put') {
      await timed('POST', `/put/${key}`, json, plan.body);
    } else {
      await timed('POST', '/echo', json, plan.body);
    }
    perCycle.push(performance.now() - c0);
    cycles++;
  }
  agent.destroy();
  const duration_s = (performance.now() - started) / 1000;
  perRequest.sort((a, b) => a - b);
  perCycle.sort((a, b) => a - b);
  const r3 = (x: number) => Math.round(x * 1000) / 1000;
  return {
    requests_per_s: Math.round(perRequest.length / duration_s),
    latency_p50_ms: r3(percentile(perRequest, 50)),
    latency_p99_ms: r3(percentile(perRequest, 99)),
    cycles_per_s: Math.round(cycles / duration_s),
    cycle_p50_ms: r3(percentile(perCycle, 50)),
    cycle_p99_ms: r3(percentile(perCycle, 99)),
    duration_s: Math.round(duration_s * 10) / 10,
    requests_total: perRequest.length,
    status,
    errors: 0,
    timeouts: 0,
  };
}

/** Forks this file, sends it the plan, resolves with its result. `onStart` gets the child's pid, `onDone` its own CPU time (for the CPU meter). */
export function runLoadInChild(plan: WritePathPlan, onStart?: (pid: number) => void, onDone?: (done: ChildDone) => void): Promise<WritePathResult> {
  return runInChild<WritePathPlan, WritePathResult>(fileURLToPath(import.meta.url), plan, (plan.duration_s + 60) * 1000, 'load generator', onStart, onDone);
}

serveInChild<WritePathPlan, WritePathResult>((plan) => (plan.mode === 'hot' ? hotPlan(plan) : autocannonPlan(plan)));
