import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formActors } from '../actors/forms/actor.js';
import { FORM_KIND, formIdFor, formKey, type FormMessage, type FormSettings } from '../actors/forms/messages.js';
import { runLoad, statusNote, type LoadResult } from './support/load.js';
import { startProjectServer } from './support/project-servers.js';
import { startBenchRuntime } from './support/runtime.js';
import { progress, runScenarios } from './support/scenarios.js';
import { startServerProcess } from './support/server-process.js';
import type { BenchRow } from './types.js';

/**
 * Forms (issue 15, item 2). Targets:
 * - 10,000 submissions/s validated against a 30-field schema and committed,
 *   through the runtime (no HTTP) on one node: in-process ActorRuntime on
 *   real LMDB (fsync on commit), 8 active forms, 512 submissions in flight;
 * - over HTTP, beside the bare durable-put route of the write-path bench
 *   (bench/support/durable-put-server.ts): both servers their own process,
 *   autocannon in this one, 100 connections, the same 30-field body;
 * - a 100 MiB multipart upload streams to disk with the node's memory
 *   (the server process's RSS, sampled every 10 ms) growing by < 20 MiB.
 */
const AREA = 'forms';
const SECONDS = Number(process.env.BENCH_FORMS_SECONDS ?? 5);
const FORMS = Number(process.env.BENCH_FORMS_COUNT ?? 64);
const IN_FLIGHT = 512;
const UPLOAD_MIB = 100;

/** 30 fields of the kinds a sign-up or survey form has. */
export function schema30(): object {
  const properties: Record<string, object> = {};
  for (let i = 0; i < 10; i++) properties[`text${i}`] = { type: 'string', minLength: 1, maxLength: 200 };
  for (let i = 0; i < 8; i++) properties[`number${i}`] = { type: 'integer', minimum: 0, maximum: 1_000_000 };
  for (let i = 0; i < 4; i++) properties[`flag${i}`] = { type: 'boolean' };
  for (let i = 0; i < 4; i++) properties[`choice${i}`] = { type: 'string', enum: ['a', 'b', 'c', 'd'] };
  properties.email = { type: 'string', format: 'email' };
  properties.birthday = { type: 'string', format: 'date' };
  properties.website = { type: 'string', format: 'uri' };
  properties.tags = { type: 'array', items: { type: 'string', maxLength: 20 }, maxItems: 5 };
  return { type: 'object', properties, required: Object.keys(properties).slice(0, 20), additionalProperties: false };
}

export function data30(n: number): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  for (let i = 0; i < 10; i++) data[`text${i}`] = `answer ${n} ${i}`;
  for (let i = 0; i < 8; i++) data[`number${i}`] = (n * 7 + i) % 1_000_000;
  for (let i = 0; i < 4; i++) data[`flag${i}`] = (n + i) % 2 === 0;
  for (let i = 0; i < 4; i++) data[`choice${i}`] = 'abcd'[(n + i) % 4];
  data.email = `user${n}@example.com`;
  data.birthday = '1990-01-31';
  data.website = 'https://example.com/profile';
  data.tags = ['one', 'two'];
  return data;
}

const SETTINGS: FormSettings = {
  multipart: { enabled: false, allowed_content_types: [], blob_bucket: 'default', max_file_bytes: 1, max_files: 1 },
  execution: { on_valid_submission: [] },
  fields: [],
  conditional_logic: [{ when: 'flag0', require: ['text0'] }],
  drafts: { enabled: false, ttl_seconds: 60 },
  spam: { allow_anonymous: false, honeypot_fields: [], min_submit_ms: 0, rate_limit_per_minute: 10 },
  approval: { enabled: false, approver_role: 'owner', kind: 'single' },
};

async function runtimeSubmissions(): Promise<BenchRow[]> {
  const bench = await startBenchRuntime(formActors);
  try {
    const caller = { user_id: 'bench', admin: false };
    const keys = Array.from({ length: FORMS }, (_, i) => formKey('bench', formIdFor('bench', `f${i}`)));
    for (const key of keys) {
      await bench.runtime.ask(FORM_KIND, key, { op: 'create', tenant: 'bench', caller, name: 'bench', title: 'Bench', schema: schema30(), settings: SETTINGS } satisfies FormMessage);
      await bench.runtime.ask(FORM_KIND, key, { op: 'set_status', caller, status: 'active' } satisfies FormMessage);
    }
    const bodies = Array.from({ length: 1024 }, (_, n) => data30(n));
    let n = 0;
    let done = 0;
    const run = async (deadline: number, count: boolean) => {
      const worker = async () => {
        while (performance.now() < deadline) {
          const i = n++;
          await bench.runtime.ask(FORM_KIND, keys[i % FORMS], { op: 'submit', caller, data: bodies[i % bodies.length] } satisfies FormMessage);
          if (count) done++;
        }
      };
      await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
    };
    await run(performance.now() + 1_000, false);
    const cpu = process.cpuUsage();
    const started = performance.now();
    await run(started + SECONDS * 1000, true);
    const elapsed_s = (performance.now() - started) / 1000;
    const used = process.cpuUsage(cpu);
    const rate = Math.round(done / elapsed_s);
    return [{
      area: AREA,
      scenario: 'submissions through the runtime (30-field schema, ajv + conditional logic, LMDB commit), 1 node',
      value: rate,
      unit: 'submissions/s',
      note: `target 10,000/s: ${rate >= 10_000 ? 'met' : 'not met'}; ${done} in ${elapsed_s.toFixed(1)} s, ${FORMS} forms, ${IN_FLIGHT} in flight, CPU ${((used.user + used.system) / 1000 / (elapsed_s * 1000)).toFixed(2)} cores`,
    }];
  } finally {
    await bench.destroy();
  }
}

async function overHttp(): Promise<BenchRow[]> {
  const distDir = dirname(dirname(fileURLToPath(import.meta.url)));
  const project = await startProjectServer();
  const put = await startServerProcess(join(distDir, 'bench', 'support', 'durable-put-server.js'), {}, { readyPath: '/' });
  try {
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${project.token}` };
    const created = await fetch(`${project.server.url}/api/v1/forms`, { method: 'POST', headers, body: JSON.stringify({ name: 'bench', title: 'Bench', schema: schema30() }) });
    const form_id = ((await created.json()) as { form_id: string }).form_id;
    await fetch(`${project.server.url}/api/v1/forms/${form_id}/status`, { method: 'POST', headers, body: JSON.stringify({ status: 'active' }) });
    const body = JSON.stringify({ data: data30(1) });
    const load = (url: string, path: string, duration_s: number) => runLoad({ url: `${url}${path}`, connections: 100, duration_s, method: 'POST', headers, body });
    await load(project.server.url, `/api/v1/forms/${form_id}/submissions`, 1);
    await load(put.url, '/put/k', 1);
    const results: { project: LoadResult[]; put: LoadResult[] } = { project: [], put: [] };
    for (let round = 0; round < 2; round++) {
      results.put.push(await load(put.url, '/put/form', SECONDS));
      results.project.push(await load(project.server.url, `/api/v1/forms/${form_id}/submissions`, SECONDS));
      progress(`forms over HTTP round ${round + 1}: put ${results.put[round].requests_per_s} req/s, forms ${results.project[round].requests_per_s} req/s`);
    }
    const best = (runs: LoadResult[]) => runs.reduce((a, b) => (b.requests_per_s > a.requests_per_s ? b : a));
    const p = best(results.project);
    const q = best(results.put);
    return [
      { area: AREA, scenario: 'POST .../submissions over HTTP (30-field body, 100 connections), best of 2', value: p.requests_per_s, unit: 'req/s', note: `${(p.requests_per_s / q.requests_per_s).toFixed(2)} x the durable put; p50 ${p.latency_p50_ms} ms, p99 ${p.latency_p99_ms} ms; ${statusNote(p)}` },
      { area: AREA, scenario: 'peer: bare Fastify + lmdb durable put (same body), best of 2', value: q.requests_per_s, unit: 'req/s', note: `p50 ${q.latency_p50_ms} ms, p99 ${q.latency_p99_ms} ms; ${statusNote(q)}` },
    ];
  } finally {
    await put.stop();
    await project.stop();
  }
}

function rssOf(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) * 1024 : 0;
}

async function bigUpload(node_options: string | null): Promise<BenchRow[]> {
  const project = await startProjectServer(node_options ? { NODE_OPTIONS: node_options } : {});
  try {
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${project.token}` };
    const created = await fetch(`${project.server.url}/api/v1/forms`, {
      method: 'POST', headers,
      body: JSON.stringify({ name: 'upload', title: 'Upload', schema: { type: 'object' }, multipart: { enabled: true, allowed_content_types: ['text/plain'], max_file_bytes: 200 * 1024 * 1024 } }),
    });
    const form_id = ((await created.json()) as { form_id: string }).form_id;
    await fetch(`${project.server.url}/api/v1/forms/${form_id}/status`, { method: 'POST', headers, body: JSON.stringify({ status: 'active' }) });
    const pid = project.server.child.pid!;
    await new Promise((resolve) => setTimeout(resolve, 500));
    const baseline = rssOf(pid);
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssOf(pid));
    }, 10);
    const boundary = 'benchBOUNDARY';
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const total = UPLOAD_MIB * 1024 * 1024;
    let sent = 0;
    let phase = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (phase === 0) {
          phase = 1;
          controller.enqueue(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="data"\r\n\r\n{}\r\n--${boundary}\r\nContent-Disposition: form-data; name="f"; filename="big.txt"\r\nContent-Type: text/plain\r\n\r\n`));
        } else if (sent < total) {
          sent += chunk.length;
          controller.enqueue(chunk);
        } else {
          controller.enqueue(Buffer.from(`\r\n--${boundary}--\r\n`));
          controller.close();
        }
      },
    });
    const started = performance.now();
    const response = await fetch(`${project.server.url}/api/v1/forms/${form_id}/submissions/multipart`, {
      method: 'POST',
      headers: { authorization: `Bearer ${project.token}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    const text = await response.text();
    const seconds = (performance.now() - started) / 1000;
    clearInterval(sampler);
    peak = Math.max(peak, rssOf(pid));
    if (response.status !== 201) throw new Error(`upload answered ${response.status}: ${text}`);
    const growth_mib = (peak - baseline) / 1024 / 1024;
    return [{
      area: AREA,
      scenario: `${UPLOAD_MIB} MiB multipart upload streamed to disk: node RSS growth (peak - before)${node_options ? `, node ${node_options}` : ', node defaults'}`,
      value: Number(growth_mib.toFixed(1)),
      unit: 'MiB',
      note: `target < 20 MiB: ${growth_mib < 20 ? 'met' : 'not met'}; RSS before ${(baseline / 1048576).toFixed(0)} MiB, peak ${(peak / 1048576).toFixed(0)} MiB; ${(UPLOAD_MIB / seconds).toFixed(0)} MiB/s (sha256 + fsync'd file)`,
    }];
  } finally {
    await project.stop();
  }
}

export async function run(): Promise<BenchRow[]> {
  return runScenarios(AREA, [
    { name: 'submissions through the runtime', run: runtimeSubmissions },
    { name: 'submissions over HTTP beside the durable put', run: overHttp },
    { name: '100 MiB multipart upload', run: () => bigUpload(null) },
    // The same with V8's young generation capped: what is left is what the upload itself holds.
    { name: '100 MiB multipart upload, small young generation', run: () => bigUpload('--max-semi-space-size=2') },
  ]);
}
