import { presenceContextActor, presenceSubjectActor } from '../actors/presence/actor.js';
import { PRESENCE_CONTEXT_KIND, presenceContextKey } from '../actors/presence/messages.js';
import { type HeartbeatReply, type NearbyReply, type PresenceMessage } from '../actors/presence/messages.js';
import type { ActorRuntime } from '../runtime/index.js';
import { startBenchRuntime } from './support/runtime.js';
import { runScenarios, type Scenario } from './support/scenarios.js';
import type { BenchRow } from './types.js';
import { percentile, seeded } from './support/stats.js';

/**
 * One presence context with 10,000 live sessions, through the in-process
 * runtime on real LMDB (fsync per commit) with the SystemClock.
 * Targets (issue 5): heartbeats >= 20,000/s; nearby search in 10k sessions < 2 ms.
 */
const AREA = 'presence';
const SESSIONS = 10_000;
const SECONDS = Number(process.env.BENCH_PRESENCE_SECONDS ?? 3);
const IN_FLIGHT = 1000;
const NEARBY_QUERIES = 2000;
const NEARBY_RADIUS_METERS = 1000;
/** Sessions spread over a 50 km x 50 km city (around Madrid). */
const CITY = { lat: 40.4168, lon: -3.7038, spanDegrees: 0.45 };

interface Populated {
  key: string;
  sessionIds: string[];
  open_per_s: number;
}

async function populate(runtime: ActorRuntime, random: () => number): Promise<Populated> {
  const key = presenceContextKey('bench-tenant', 'city');
  const ask = <R>(message: PresenceMessage) => runtime.ask<R>(PRESENCE_CONTEXT_KIND, key, message);
  await ask({
    op: 'create',
    context: { id: 'city', kind: 'map', capacity: { max_active: SESSIONS * 2 }, geo: { enabled: true }, heartbeat: { ttl_seconds: 600, idle_after_seconds: 300, stale_after_seconds: 450 } },
  });
  const started_ms = performance.now();
  const sessionIds: string[] = [];
  const chunk = 1000;
  for (let first = 0; first < SESSIONS; first += chunk) {
    const replies = await Promise.all(Array.from({ length: Math.min(chunk, SESSIONS - first) }, (_, i) => ask<HeartbeatReply>({
      op: 'heartbeat',
      heartbeat: {
        subject: { id: `subject-${first + i}`, kind: (first + i) % 5 === 0 ? 'agent' : 'user' },
        geo: { lat: CITY.lat - CITY.spanDegrees / 2 + random() * CITY.spanDegrees, lon: CITY.lon - CITY.spanDegrees / 2 + random() * CITY.spanDegrees },
      },
    })));
    for (const reply of replies) sessionIds.push(reply.session_id);
  }
  const open_per_s = Math.round((SESSIONS / (performance.now() - started_ms)) * 1000);
  return { key, sessionIds, open_per_s };
}

/** Closed loop: IN_FLIGHT heartbeats always outstanding, each refreshing the next session round-robin. */
function driveHeartbeats(runtime: ActorRuntime, key: string, sessionIds: string[], seconds: number, withGeo: boolean, random: () => number): Promise<{ count: number; elapsed_ms: number }> {
  return new Promise((resolve, reject) => {
    const started_ms = performance.now();
    const deadline_ms = started_ms + seconds * 1000;
    const count_max = 5_000_000;
    let next = 0;
    let completed = 0;
    let active = 0;
    let stopped = false;
    let failure: unknown;
    const message = (): PresenceMessage => {
      const session_id = sessionIds[next++ % sessionIds.length];
      if (!withGeo) return { op: 'heartbeat', heartbeat: { session_id } };
      const geo = { lat: CITY.lat - CITY.spanDegrees / 2 + random() * CITY.spanDegrees, lon: CITY.lon - CITY.spanDegrees / 2 + random() * CITY.spanDegrees };
      return { op: 'heartbeat', heartbeat: { session_id, geo } };
    };
    const finish = () => (failure !== undefined ? reject(failure) : resolve({ count: completed, elapsed_ms: performance.now() - started_ms }));
    const onError = (error: unknown) => {
      failure ??= error;
      stopped = true;
      if (--active === 0) finish();
    };
    const onReply = () => {
      completed++;
      if ((completed & 1023) === 0 && performance.now() >= deadline_ms) stopped = true;
      if (!stopped && completed + active <= count_max) runtime.ask(PRESENCE_CONTEXT_KIND, key, message()).then(onReply, onError);
      else if (--active === 0) finish();
    };
    for (let i = 0; i < IN_FLIGHT; i++) {
      active++;
      runtime.ask(PRESENCE_CONTEXT_KIND, key, message()).then(onReply, onError);
    }
  });
}

function heartbeatScenario(name: string, withGeo: boolean): Scenario {
  return {
    name,
    async run(): Promise<BenchRow[]> {
      const bench = await startBenchRuntime([presenceContextActor, presenceSubjectActor]);
      try {
        const random = seeded(42);
        const { key, sessionIds, open_per_s } = await populate(bench.runtime, random);
        await driveHeartbeats(bench.runtime, key, sessionIds, Math.min(1, SECONDS / 3), withGeo, random);
        const result = await driveHeartbeats(bench.runtime, key, sessionIds, SECONDS, withGeo, random);
        const count = await bench.runtime.ask<{ occupancy: { active: number } }>(PRESENCE_CONTEXT_KIND, key, { op: 'count' });
        if (count.occupancy.active !== SESSIONS) throw new Error(`expected ${SESSIONS} active sessions, found ${count.occupancy.active}`);
        const rows: BenchRow[] = [{
          area: AREA,
          scenario: name,
          value: Math.round((result.count / result.elapsed_ms) * 1000),
          unit: 'heartbeats/s',
          note: `1 context, ${SESSIONS.toLocaleString('en-US')} live sessions, ${IN_FLIGHT} in flight, reply after commit (fsync); target >= 20,000/s`,
        }];
        if (!withGeo) {
          rows.unshift({ area: AREA, scenario: 'open session (heartbeat without session_id)', value: open_per_s, unit: 'sessions/s', note: 'with geo, 1,000 in flight; each open also reports to the subject index through the outbox' });
        }
        return rows;
      } finally {
        await bench.destroy();
      }
    },
  };
}

const nearbyScenario: Scenario = {
  name: `nearby, radius ${NEARBY_RADIUS_METERS} m`,
  async run(): Promise<BenchRow[]> {
    const bench = await startBenchRuntime([presenceContextActor, presenceSubjectActor]);
    try {
      const random = seeded(7);
      const { key } = await populate(bench.runtime, random);
      const latencies: number[] = [];
      let found = 0;
      const deadline_ms = performance.now() + SECONDS * 1000 * 2;
      for (let i = 0; i < NEARBY_QUERIES && performance.now() < deadline_ms; i++) {
        const lat = CITY.lat - CITY.spanDegrees / 2 + random() * CITY.spanDegrees;
        const lon = CITY.lon - CITY.spanDegrees / 2 + random() * CITY.spanDegrees;
        const started_ms = performance.now();
        const reply = await bench.runtime.ask<NearbyReply>(PRESENCE_CONTEXT_KIND, key, { op: 'nearby', lat, lon, radius_meters: NEARBY_RADIUS_METERS, limit: 50 });
        latencies.push(performance.now() - started_ms);
        found += reply.total;
      }
      // The first 10% warm the JIT up.
      const measured = latencies.slice(Math.floor(latencies.length / 10)).sort((a, b) => a - b);
      const p50 = percentile(measured, 50);
      const p99 = percentile(measured, 99);
      const note = `${SESSIONS.toLocaleString('en-US')} sessions over 50 x 50 km, ${measured.length} queries, avg ${(found / latencies.length).toFixed(0)} hits; ask round trip through the runtime; target < 2 ms`;
      return [
        { area: AREA, scenario: `nearby search p50 (radius ${NEARBY_RADIUS_METERS} m)`, value: Number(p50.toFixed(3)), unit: 'ms', note },
        { area: AREA, scenario: `nearby search p99 (radius ${NEARBY_RADIUS_METERS} m)`, value: Number(p99.toFixed(3)), unit: 'ms', note },
      ];
    } finally {
      await bench.destroy();
    }
  },
};

export async function run(): Promise<BenchRow[]> {
  return runScenarios(AREA, [
    heartbeatScenario('heartbeat (refresh)', false),
    heartbeatScenario('heartbeat with geo move', true),
    nearbyScenario,
  ]);
}
