import { monitorEventLoopDelay } from 'node:perf_hooks';
import { livenessActor, livenessIndexActor } from '../actors/liveness/actor.js';
import { LIVENESS_KIND, livenessActorKey, livenessIndexKey, LIVENESS_INDEX_KIND } from '../actors/liveness/messages.js';
import { type IndexListView } from '../actors/liveness/messages.js';
import { type LivenessMessage } from '../actors/liveness/messages.js';
import type { PublishedEvent } from '../runtime/index.js';
import { othersNote, startCpuMeter } from './support/cpu-meter.js';
import { startBenchRuntime } from './support/runtime.js';
import type { BenchRow } from './types.js';
import { percentile } from './support/stats.js';

/**
 * Issue 5 target: 5,000 entities heartbeating once a second on one node
 * (the runtime with real LMDB, fsync on commit, and the SystemClock) with the
 * event loop lag p99 under 20 ms.
 *
 * Each entity has its own phase within the second, as independent devices
 * would: every TICK_MS the driver sends the heartbeats whose phase falls in
 * that slice (with a client timestamp, so latency samples, the anomaly rule
 * and index touches all run). One tenant, so one index actor takes every
 * index message. Lag comes from perf_hooks.monitorEventLoopDelay over the
 * measured window only (after a warm-up that creates the entities).
 */
const AREA = 'liveness';
const ENTITIES = Number(process.env.BENCH_LIVENESS_ENTITIES ?? 5_000);
const SECONDS = Number(process.env.BENCH_LIVENESS_SECONDS ?? 10);
const WARMUP_SECONDS = 2;
const TICK_MS = 5;
/** monitorEventLoopDelay samples every RESOLUTION_MS; its values include that interval (an idle loop reads ~5 ms). */
const RESOLUTION_MS = 5;
const IN_FLIGHT_MAX = 50_000;
const LAG_TARGET_MS = 20;
const TENANT = 'bench-tenant';

const round = (value: number, decimals = 2) => Math.round(value * 10 ** decimals) / 10 ** decimals;

export async function run(): Promise<BenchRow[]> {
  const bench = await startBenchRuntime([livenessActor, livenessIndexActor]);
  const runtime = bench.runtime;
  const keys = Array.from({ length: ENTITIES }, (_, i) => livenessActorKey(TENANT, `device-${i}`));
  let statusEvents = 0;
  runtime.events.on('event', (event: PublishedEvent) => {
    if (event.type === 'entity.status_changed') statusEvents++;
  });

  let inFlight = 0;
  let failures = 0;
  let measuring = false;
  let completedMeasured = 0;
  const latencies_ms: number[] = [];

  const send = (index: number) => {
    if (inFlight >= IN_FLIGHT_MAX) return;
    inFlight++;
    const sent_ms = performance.now();
    const counted = measuring;
    const message: LivenessMessage = { op: 'heartbeat', client_timestamp_ms: Date.now() - 20 - (index % 7), grace_ms: 30_000 };
    runtime.ask(LIVENESS_KIND, keys[index], message).then(
      () => {
        inFlight--;
        if (counted) {
          completedMeasured++;
          if (latencies_ms.length < 200_000) latencies_ms.push(performance.now() - sent_ms);
        }
      },
      () => {
        inFlight--;
        failures++;
      },
    );
  };

  /** Sends each entity's heartbeat once per second at its phase, for `seconds`. */
  const drive = (seconds: number) =>
    new Promise<number>((resolve) => {
      const start_ms = performance.now();
      const ticksPerSecond = 1000 / TICK_MS;
      const perTick = ENTITIES / ticksPerSecond;
      let tick = 0;
      let sent = 0;
      const step = () => {
        const due = Math.floor((performance.now() - start_ms) / TICK_MS);
        const last = Math.min(due, seconds * ticksPerSecond - 1);
        for (; tick <= last; tick++) {
          const slot = tick % ticksPerSecond;
          const from = Math.floor(slot * perTick);
          const to = Math.floor((slot + 1) * perTick);
          for (let i = from; i < to; i++) send(i);
          sent += to - from;
        }
        if (tick >= seconds * ticksPerSecond) resolve(sent);
        else setTimeout(step, Math.max(0, start_ms + tick * TICK_MS - performance.now()));
      };
      step();
    });

  const settled = async () => {
    for (let i = 0; i < 10_000 && inFlight > 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
  };

  try {
    await drive(WARMUP_SECONDS);
    await settled();
    const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    const stopMeter = startCpuMeter([process.pid]);
    measuring = true;
    histogram.enable();
    const measureStart_ms = performance.now();
    const sent = await drive(SECONDS);
    measuring = false;
    const window_s = (performance.now() - measureStart_ms) / 1000;
    histogram.disable();
    const cpu = stopMeter();
    await settled();

    const list = await runtime.ask<IndexListView>(LIVENESS_INDEX_KIND, livenessIndexKey(TENANT), { op: 'list', range_ms: 3600_000, limit: 0 });
    if (list.total_matched !== ENTITIES) throw new Error(`index lists ${list.total_matched} entities, expected ${ENTITIES}`);
    if (failures > 0) throw new Error(`${failures} heartbeats failed`);

    const sorted = Float64Array.from(latencies_ms).sort();
    const raw_p50_ms = histogram.percentile(50) / 1e6;
    const raw_p99_ms = histogram.percentile(99) / 1e6;
    const lag_p50_ms = Math.max(0, raw_p50_ms - RESOLUTION_MS);
    const lag_p99_ms = Math.max(0, raw_p99_ms - RESOLUTION_MS);
    const lag_max_ms = Math.max(0, histogram.max / 1e6 - RESOLUTION_MS);
    const rate = completedMeasured / window_s;
    const setup = `${ENTITIES} entities x 1/s, one tenant, ${SECONDS} s, real LMDB (fsync), SystemClock`;
    return [
      { area: AREA, scenario: 'heartbeats through the runtime', value: Math.round(rate), unit: 'heartbeats/s', note: `${setup}; sent ${sent}; target ${ENTITIES}/s${othersNote(cpu)}` },
      {
        area: AREA,
        scenario: 'event loop lag p50',
        value: round(lag_p50_ms),
        unit: 'ms',
        note: `monitorEventLoopDelay (resolution ${RESOLUTION_MS} ms) minus the resolution; raw p50 ${round(raw_p50_ms)} ms`,
      },
      {
        area: AREA,
        scenario: 'event loop lag p99',
        value: round(lag_p99_ms),
        unit: 'ms',
        note: `raw p99 ${round(raw_p99_ms)} ms, max ${round(lag_max_ms)} ms; target < ${LAG_TARGET_MS} ms: ${raw_p99_ms < LAG_TARGET_MS ? 'met (even counting the resolution)' : lag_p99_ms < LAG_TARGET_MS ? 'met' : 'NOT met'}`,
      },
      {
        area: AREA,
        scenario: 'heartbeat reply latency p50 / p99',
        value: round(percentile(sorted, 50)),
        unit: 'ms',
        note: `p99 ${round(percentile(sorted, 99))} ms (ask to reply, after the commit); status events ${statusEvents}`,
      },
    ];
  } finally {
    await bench.destroy();
  }
}
