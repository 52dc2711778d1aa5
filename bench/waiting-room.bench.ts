import { waitingRoomActor, waitingRoomDirectoryActor } from '../actors/waiting-rooms/actor.js';
import { WAITING_ROOM_KIND, waitingRoomKey } from '../actors/waiting-rooms/messages.js';
import { type AdmitView, type PositionView, type RoomMessage } from '../actors/waiting-rooms/messages.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ActorRuntime, LmdbStore, SystemClock, type RuntimeObserver } from '../runtime/index.js';
import { runScenarios } from './support/scenarios.js';
import type { BenchRow } from './types.js';
import { percentile, seeded } from './support/stats.js';

/**
 * One waiting room with 100,000 waiting members, through the in-process
 * runtime on real LMDB (fsync per commit) with the SystemClock.
 * Targets (issue 5): join >= 20,000/s; position query p99 < 1 ms in-process;
 * admit of a 1,000 batch < 10 ms (the ask, including its commit).
 */
const AREA = 'waiting room';
const MEMBERS = Number(process.env.BENCH_WAITING_ROOM_MEMBERS ?? 100_000);
/** Joins in flight at once (the mailbox bound is 10,000). */
const IN_FLIGHT = 4000;
const POSITION_QUERIES = 20_000;
const ADMIT_BATCHES = 20;
const ADMIT_BATCH = 1000;
/** Every loop also stops after this long. */
const LOOP_SECONDS_MAX = 20;

const fmt = (ms: number) => `${ms.toFixed(3)} ms`;

/** The last batch's turn time (CPU in the step functions) and commit time (LMDB + fsync). */
interface Observed {
  turn_ms: number;
  commit_ms: number;
  commits: number;
}

interface BenchRuntime {
  runtime: ActorRuntime;
  observed: Observed;
  destroy(): Promise<void>;
}

/** As bench/support/runtime.ts (real LMDB with fsync, SystemClock), plus an observer of turn and commit times. */
async function startRuntime(): Promise<BenchRuntime> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-waiting-room-'));
  const observed: Observed = { turn_ms: 0, commit_ms: 0, commits: 0 };
  const observer: RuntimeObserver = {
    activated() {},
    passivated() {},
    overloaded() {},
    batch(kind, _messages, turn_ms) {
      if (kind === WAITING_ROOM_KIND) observed.turn_ms = turn_ms;
    },
    commit(_ops, commit_ms) {
      observed.commit_ms = commit_ms;
      observed.commits++;
    },
  };
  const runtime = new ActorRuntime({ store: new LmdbStore({ path: dir }), clock: new SystemClock(), partitionCount: 64, observer });
  runtime.register(waitingRoomActor).register(waitingRoomDirectoryActor);
  await runtime.start();
  return {
    runtime,
    observed,
    async destroy() {
      await runtime.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function run(): Promise<BenchRow[]> {
  let bench: BenchRuntime | undefined;
  let ask: <R>(message: RoomMessage) => Promise<R> = () => Promise.reject(new Error('no runtime'));
  let joined = 0;
  const rows: BenchRow[] = [];
  try {
    return await runScenarios(AREA, [
      {
        name: `join ${MEMBERS.toLocaleString('en')} members`,
        async run() {
          bench = await startRuntime();
          const runtime: ActorRuntime = bench.runtime;
          const key = waitingRoomKey('bench-tenant', 'launch');
          ask = <R>(message: RoomMessage) => runtime.ask<R>(WAITING_ROOM_KIND, key, message);
          await ask({
            op: 'create',
            room_id: 'launch',
            by: 'bench',
            input: {
              capacity: 1_000_000,
              admission_rate: { batch_size: ADMIT_BATCH, interval_seconds: 60 },
              auto_admit: false,
              session_ttl_seconds: 3600,
              priority_groups: [
                { name: 'vip', boost: 10, match_rules: { plan: 'pro' } },
                { name: 'press', boost: 5, match_rules: null },
              ],
            },
          });
          const commitsBefore = bench.observed.commits;
          const started_ms = performance.now();
          const deadline_ms = started_ms + LOOP_SECONDS_MAX * 1000;
          let next = 0;
          const worker = async () => {
            while (next < MEMBERS && performance.now() < deadline_ms) {
              const i = next++;
              // 1 in 10 is a VIP by metadata, 1 in 50 joins the press group explicitly.
              const message: RoomMessage =
                i % 10 === 0
                  ? { op: 'join', member_id: `member-${i}`, metadata: { plan: 'pro' } }
                  : i % 50 === 1
                    ? { op: 'join', member_id: `member-${i}`, priority_group: 'press' }
                    : { op: 'join', member_id: `member-${i}` };
              await ask(message);
              joined++;
            }
          };
          await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
          const seconds = (performance.now() - started_ms) / 1000;
          const rate = joined / seconds;
          const commits = bench.observed.commits - commitsBefore;
          if (joined < MEMBERS) throw new Error(`only ${joined} of ${MEMBERS} joins within ${LOOP_SECONDS_MAX} s`);
          const check = await ask<PositionView>({ op: 'position', member_id: `member-${MEMBERS - 1}` });
          if (check.position !== MEMBERS) throw new Error(`last member at position ${check.position}, expected ${MEMBERS}`);
          return [{
            area: AREA,
            scenario: 'join (one room, through the runtime)',
            value: Math.round(rate),
            unit: 'joins/s',
            note: `${joined.toLocaleString('en')} joins in ${seconds.toFixed(2)} s in ${commits} commits, ${IN_FLIGHT} in flight, reply after commit (fsync); target >= 20,000/s`,
          }];
        },
      },
      {
        name: 'position queries',
        async run() {
          if (joined < MEMBERS) throw new Error('the room was not filled');
          const random = seeded(42);
          const latencies: number[] = [];
          const deadline_ms = performance.now() + LOOP_SECONDS_MAX * 1000;
          // Warm up, then measure one query at a time (the in-process latency of a read turn).
          for (let i = 0; i < 2000; i++) await ask({ op: 'position', member_id: `member-${Math.floor(random() * MEMBERS)}` });
          for (let i = 0; i < POSITION_QUERIES && performance.now() < deadline_ms; i++) {
            const member_id = `member-${Math.floor(random() * MEMBERS)}`;
            const started_ms = performance.now();
            const view = await ask<PositionView>({ op: 'position', member_id });
            latencies.push(performance.now() - started_ms);
            if (view.position < 1 || view.position > MEMBERS) throw new Error(`position ${view.position} out of range`);
          }
          latencies.sort((a, b) => a - b);
          const p99 = percentile(latencies, 99);
          return [{
            area: AREA,
            scenario: `position query p99 (${MEMBERS.toLocaleString('en')} waiting)`,
            value: Number(p99.toFixed(4)),
            unit: 'ms',
            note: `${latencies.length} sequential asks; p50 ${fmt(percentile(latencies, 50))}, p99.9 ${fmt(percentile(latencies, 99.9))}, max ${fmt(latencies[latencies.length - 1])}; target p99 < 1 ms`,
          }];
        },
      },
      {
        name: 'admit batches of 1,000',
        async run() {
          if (joined < MEMBERS) throw new Error('the room was not filled');
          const latencies: number[] = [];
          const turns: number[] = [];
          const commits: number[] = [];
          const deadline_ms = performance.now() + LOOP_SECONDS_MAX * 1000;
          for (let i = 0; i < ADMIT_BATCHES && performance.now() < deadline_ms; i++) {
            const started_ms = performance.now();
            const view = await ask<AdmitView>({ op: 'admit', count: ADMIT_BATCH });
            latencies.push(performance.now() - started_ms);
            turns.push(bench!.observed.turn_ms);
            commits.push(bench!.observed.commit_ms);
            if (view.admitted.length !== ADMIT_BATCH) throw new Error(`admitted ${view.admitted.length}, expected ${ADMIT_BATCH}`);
          }
          const sorted = latencies.slice().sort((a, b) => a - b);
          const median = (values: number[]) => percentile(values.slice().sort((a, b) => a - b), 50);
          const p90 = (values: number[]) => percentile(values.slice().sort((a, b) => a - b), 90);
          return [{
            area: AREA,
            scenario: 'admit a 1,000 batch (ask incl. commit)',
            value: Number(percentile(sorted, 50).toFixed(3)),
            unit: 'ms',
            note: `p50 of ${latencies.length} batches from a ${MEMBERS.toLocaleString('en')} line; p90 ${fmt(percentile(sorted, 90))}, max ${fmt(sorted[sorted.length - 1])}; target < 10 ms`,
          }, {
            area: AREA,
            scenario: 'admit a 1,000 batch: turn / commit',
            value: Number(median(turns).toFixed(3)),
            unit: 'ms',
            note: `turn (step, CPU) p50 ${fmt(median(turns))}, p90 ${fmt(p90(turns))}; commit (one admission-batch record + counters, LMDB, fsync) p50 ${fmt(median(commits))}, p90 ${fmt(p90(commits))}`,
          }];
        },
      },
      {
        name: 'activation of the full room',
        async run() {
          if (!bench) throw new Error('no runtime');
          const runtime = bench.runtime;
          runtime.passivateIdle(0);
          const started_ms = performance.now();
          const view = await ask<PositionView>({ op: 'position', member_id: `member-${MEMBERS - 1}` });
          const load_ms = performance.now() - started_ms;
          const expected = MEMBERS - ADMIT_BATCHES * ADMIT_BATCH;
          if (view.position !== expected) throw new Error(`after reload the last member is at ${view.position}, expected ${expected}`);
          return [{
            area: AREA,
            scenario: 'activation (load) of the room',
            value: Number(load_ms.toFixed(1)),
            unit: 'ms',
            note: `rebuild from ${MEMBERS.toLocaleString('en')} member records (${expected.toLocaleString('en')} waiting); informational`,
          }];
        },
      },
    ]).then((produced) => rows.concat(produced));
  } finally {
    await bench?.destroy();
  }
}
