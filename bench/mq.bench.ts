import { mqActors } from '../actors/mq/actor.js';
import { MQ_QUEUE_KIND, mqQueueKey, type QueueMessage, type QueueSettings, type ReceivedMessage } from '../actors/mq/messages.js';
import type { ActorRuntime } from '../runtime/index.js';
import { othersNote, startCpuMeter } from './support/cpu-meter.js';
import { runLoad, statusNote, type LoadRequest } from './support/load.js';
import { startProjectServer, type ProjectServer } from './support/project-servers.js';
import { startBenchRuntime, type BenchRuntime } from './support/runtime.js';
import { runScenarios } from './support/scenarios.js';
import { percentile } from './support/stats.js';
import type { BenchRow } from './types.js';

/**
 * The message queue (issue 12, item 3). Targets: send + receive + delete at
 * 20,000 messages/s or more on one node with durable commits (fsync per
 * commit); long-poll wake-up under 5 ms after a send.
 *
 * Through the runtime: producers and consumers as asks on the in-process
 * runtime (real LMDB, fsync, SystemClock), one queue and eight queues.
 * Over HTTP: a node as its own process (`node dist/http/server.js`), each
 * autocannon connection looping send, receive, delete.
 */
const AREA = 'mq';
const MESSAGES = Number(process.env.BENCH_MQ_MESSAGES ?? 200_000);
const PRODUCERS_IN_FLIGHT = 512;
const CONSUMERS = 128;
const LOOP_SECONDS_MAX = 20;
const WAKE_SAMPLES = 300;
const HTTP_SECONDS = 10;
const HTTP_CONNECTIONS = 256;

const settings: QueueSettings = { visibility_timeout_seconds: 60, delay_seconds: 0, message_retention_minutes: 60, fifo: false, max_receive_count: 0, dead_letter_queue: null };
const fmt = (ms: number) => `${ms.toFixed(2)} ms`;

/** Sends MESSAGES messages spread over `queues` while consumers receive (10 at a time) and delete them; messages/s end to end. */
async function sendReceiveDelete(runtime: ActorRuntime, queues: string[]): Promise<{ rate: number; seconds: number; deleted: number }> {
  const ask = <R>(queue: string, message: QueueMessage) => runtime.ask<R>(MQ_QUEUE_KIND, mqQueueKey('bench', queue), message);
  for (const queue of queues) await ask(queue, { op: 'create', name: queue, settings });
  const started_ms = performance.now();
  const deadline_ms = started_ms + LOOP_SECONDS_MAX * 1000;
  let sent = 0;
  let deleted = 0;
  const producer = async () => {
    while (sent < MESSAGES && performance.now() < deadline_ms) {
      const i = sent++;
      await ask(queues[i % queues.length], { op: 'send', body: `message ${i}`, attributes: {} });
    }
  };
  const consumer = async (n: number) => {
    const queue = queues[n % queues.length];
    while (deleted < MESSAGES && performance.now() < deadline_ms) {
      // A short long-poll: an idle consumer waits for the next send instead of spinning.
      const messages = await ask<ReceivedMessage[]>(queue, { op: 'receive', max_messages: 10, wait_ms: 100 });
      await Promise.all(messages.map((message) => ask(queue, { op: 'delete-message', receipt_handle: message.receipt_handle })));
      deleted += messages.length;
    }
  };
  await Promise.all([...Array.from({ length: PRODUCERS_IN_FLIGHT }, producer), ...Array.from({ length: CONSUMERS }, (_, n) => consumer(n))]);
  const seconds = (performance.now() - started_ms) / 1000;
  if (deleted === 0) throw new Error(`no message went through within ${LOOP_SECONDS_MAX} s`);
  return { rate: deleted / seconds, seconds, deleted };
}

export async function run(): Promise<BenchRow[]> {
  let bench: BenchRuntime | undefined;
  let project: ProjectServer | undefined;
  // The runtime's timers are unref'd (a node's server keeps its loop alive): while every ask of a
  // scenario waits on a queue actor's wake alarm, this keeps the bench process from exiting.
  const keepAlive = setInterval(() => {}, 1_000);
  try {
    return await runScenarios(AREA, [
      ...[1, 8].map((count) => ({
        name: `send + receive + delete, ${count} queue${count > 1 ? 's' : ''}, through the runtime`,
        async run(): Promise<BenchRow[]> {
          bench = await startBenchRuntime(mqActors);
          try {
            const stopMeter = startCpuMeter([process.pid]);
            const queues = Array.from({ length: count }, (_, i) => `bench-${i}`);
            const result = await sendReceiveDelete(bench.runtime, queues);
            const cpu = stopMeter();
            return [{
              area: AREA,
              scenario: `send + receive + delete, ${count} queue${count > 1 ? 's' : ''} (runtime)`,
              value: Math.round(result.rate),
              unit: 'msg/s',
              note: `${result.deleted.toLocaleString('en')} messages (of ${MESSAGES.toLocaleString('en')}, or what ${LOOP_SECONDS_MAX} s allowed) in ${result.seconds.toFixed(2)} s; ${PRODUCERS_IN_FLIGHT} sends in flight, ${CONSUMERS} consumers (receive 10, delete each); replies after commit (fsync); target >= 20,000/s${othersNote(cpu)}`,
            }];
          } finally {
            await bench.destroy();
            bench = undefined;
          }
        },
      })),
      {
        name: 'long-poll wake-up after a send, through the runtime',
        async run(): Promise<BenchRow[]> {
          bench = await startBenchRuntime(mqActors);
          try {
            const runtime = bench.runtime;
            const ask = <R>(message: QueueMessage) => runtime.ask<R>(MQ_QUEUE_KIND, mqQueueKey('bench', 'wake'), message);
            await ask({ op: 'create', name: 'wake', settings });
            const wake: number[] = [];
            const afterAck: number[] = [];
            const sendAck: number[] = [];
            for (let i = 0; i < WAKE_SAMPLES; i++) {
              let woke_ms = 0;
              const waiting = ask<ReceivedMessage[]>({ op: 'receive', max_messages: 1, wait_ms: 8_000 }).then((messages) => {
                woke_ms = performance.now();
                return messages;
              });
              await new Promise((resolve) => setTimeout(resolve, 2));
              const sent_ms = performance.now();
              await ask({ op: 'send', body: `wake ${i}`, attributes: {} });
              const acked_ms = performance.now();
              const [message] = await waiting;
              if (!message) throw new Error('the waiting receive answered empty');
              await ask({ op: 'delete-message', receipt_handle: message.receipt_handle });
              wake.push(woke_ms - sent_ms);
              afterAck.push(woke_ms - acked_ms);
              sendAck.push(acked_ms - sent_ms);
            }
            const sorted = (values: number[]) => values.slice().sort((a, b) => a - b);
            const w = sorted(wake);
            return [{
              area: AREA,
              scenario: 'long-poll wake-up after a send (runtime)',
              value: Number(percentile(w, 50).toFixed(3)),
              unit: 'ms',
              note: `p50 of ${WAKE_SAMPLES}, from the send's ask to the waiting receive's answer (both after the send's commit, fsync included); p99 ${fmt(percentile(w, 99))}; the send's own ack p50 ${fmt(percentile(sorted(sendAck), 50))}; wake-up minus send ack p50 ${fmt(percentile(sorted(afterAck), 50))}; target < 5 ms`,
            }];
          } finally {
            await bench.destroy();
            bench = undefined;
          }
        },
      },
      {
        name: 'send + receive + delete over HTTP',
        async run(): Promise<BenchRow[]> {
          project = await startProjectServer();
          const { server, token } = project;
          const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
          const create = await fetch(`${server.url}/api/v1/mq/queues`, { method: 'POST', headers, body: JSON.stringify({ name: 'http-bench' }) });
          if (create.status !== 201) throw new Error(`create answered ${create.status}`);
          const base = '/api/v1/mq/queues/http-bench';
          const cycle: LoadRequest[] = [
            { method: 'POST', path: `${base}/messages`, headers, body: JSON.stringify({ body: 'hello over http' }) },
            {
              method: 'POST',
              path: `${base}/receive`,
              headers,
              body: JSON.stringify({ max_messages: 1, wait_time_seconds: 1 }),
              onResponse(status, body, context) {
                context.handle = status === 200 ? (JSON.parse(body) as { messages: { receipt_handle: string }[] }).messages[0]?.receipt_handle : undefined;
              },
            },
            {
              method: 'DELETE',
              headers: { authorization: `Bearer ${token}` },
              setupRequest(request, context) {
                if (typeof context.handle !== 'string') return null;
                return { ...request, path: `${base}/messages/${context.handle}` };
              },
            },
          ];
          await runLoad({ url: server.url, connections: HTTP_CONNECTIONS, duration_s: 2, requests: cycle });
          const stopMeter = startCpuMeter([process.pid, server.child.pid ?? 0]);
          const result = await runLoad({ url: server.url, connections: HTTP_CONNECTIONS, duration_s: HTTP_SECONDS, requests: cycle });
          const cpu = stopMeter();
          const deletes = result.status['204'] ?? 0;
          // Wake-up over HTTP: a waiting receive, then a send from another connection (on an empty queue:
          // the load run leaves the messages of its interrupted cycles behind).
          await fetch(`${server.url}${base}/purge`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
          const wake: number[] = [];
          for (let i = 0; i < 100; i++) {
            let woke_ms = 0;
            const waiting = fetch(`${server.url}${base}/receive`, { method: 'POST', headers, body: JSON.stringify({ wait_time_seconds: 5 }) }).then(async (response) => {
              const body = (await response.json()) as { messages: { receipt_handle: string }[] };
              woke_ms = performance.now();
              return body.messages;
            });
            await new Promise((resolve) => setTimeout(resolve, 5));
            const sent_ms = performance.now();
            await fetch(`${server.url}${base}/messages`, { method: 'POST', headers, body: JSON.stringify({ body: `wake ${i}` }) });
            const [message] = await waiting;
            if (!message) throw new Error('the waiting receive answered empty');
            wake.push(woke_ms - sent_ms);
            await fetch(`${server.url}${base}/messages/${message.receipt_handle}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
          }
          wake.sort((a, b) => a - b);
          return [{
            area: AREA,
            scenario: 'send + receive + delete (HTTP, one node process)',
            value: Math.round(deletes / result.duration_s),
            unit: 'msg/s',
            note: `${HTTP_CONNECTIONS} connections each looping send, receive 1, delete, ${result.duration_s} s; ${statusNote(result)}; load generator in the bench process${othersNote(cpu)}`,
          }, {
            area: AREA,
            scenario: 'long-poll wake-up after a send (HTTP)',
            value: Number(percentile(wake, 50).toFixed(3)),
            unit: 'ms',
            note: `p50 of 100, from sending the POST .../messages to the waiting receive's response; p99 ${fmt(percentile(wake, 99))}; includes the send's commit (fsync) and two HTTP round trips; target < 5 ms`,
          }];
        },
      },
    ]);
  } finally {
    clearInterval(keepAlive);
    await bench?.destroy();
    await project?.stop();
  }
}
