import { othersNote, startCpuMeter } from './support/cpu-meter.js';
import { ADD_ONE, COUNTER_KIND, counterActor, GET } from './support/counter-actor.js';
import { driveAsks, driveTells, perSecond, type DriveResult } from './support/drive.js';
import { startBenchRuntime } from './support/runtime.js';
import { runScenarios, type Scenario } from './support/scenarios.js';
import type { BenchRow } from './types.js';

/**
 * The in-process actor runtime on real LMDB (fsync per commit, as a node
 * runs by default) with the SystemClock: tells and asks per second on one
 * core (the JS thread; lmdb-js commits on its own thread). Each scenario gets
 * a fresh runtime and a short warm-up; write scenarios check afterwards that
 * the counters add up to the messages counted.
 * Targets (issue 2): >= 5M tell/s, >= 1M ask round trips/s.
 */
const AREA = 'runtime';
const SECONDS = Number(process.env.BENCH_RUNTIME_SECONDS ?? 3);
const WARM_UP_SECONDS = Math.min(1, SECONDS / 3);
const TELL_TARGET = 'target >= 5,000,000/s';
const ASK_TARGET = 'target >= 1,000,000/s';

interface CounterScenario {
  name: string;
  mode: 'tell' | 'ask';
  actors: number;
  /** Tells: queued per actor between barriers. Asks: in flight per actor. */
  depth: number;
  write: boolean;
}

function counterScenario(spec: CounterScenario): Scenario {
  return {
    name: spec.name,
    async run(): Promise<BenchRow[]> {
      const bench = await startBenchRuntime([counterActor]);
      try {
        const keys = Array.from({ length: spec.actors }, (_, i) => `${spec.mode}-${i}`);
        const message = spec.write ? ADD_ONE : GET;
        const drive = (seconds: number): Promise<DriveResult> =>
          spec.mode === 'tell'
            ? driveTells(bench.runtime, COUNTER_KIND, keys, message, { seconds, messagesMax: 200_000_000, chunk: spec.depth, barrier: GET })
            : driveAsks(bench.runtime, COUNTER_KIND, keys, message, { seconds, messagesMax: 100_000_000, inFlightPerKey: spec.depth });
        const warmUp = await drive(WARM_UP_SECONDS);
        const stopMeter = startCpuMeter([process.pid]);
        const result = await drive(SECONDS);
        const cpu = stopMeter();
        if (spec.write) {
          // Every counted message ran and committed: the counters add up.
          let total = 0;
          for (const key of keys) total += await bench.runtime.ask<number>(COUNTER_KIND, key, GET);
          const expected = warmUp.messages + result.messages;
          if (total !== expected) throw new Error(`counters sum to ${total}, expected ${expected}`);
        }
        const shape = spec.mode === 'tell'
          ? `${spec.actors.toLocaleString('en-US')} actor(s), ${spec.depth} queued each`
          : `${spec.actors.toLocaleString('en-US')} actor(s) x ${spec.depth} in flight`;
        const what = spec.write
          ? spec.mode === 'tell' ? 'add (new snapshot state, group commit + fsync)' : 'add, reply after commit + fsync'
          : 'get (read-only, nothing to commit)';
        return [{
          area: AREA,
          scenario: spec.name,
          value: perSecond(result),
          unit: spec.mode === 'tell' ? 'msg/s' : 'asks/s',
          note: `${shape}, ${what}${othersNote(cpu)}; ${spec.mode === 'tell' ? TELL_TARGET : ASK_TARGET}`,
        }];
      } finally {
        await bench.destroy();
      }
    },
  };
}

export async function run(): Promise<BenchRow[]> {
  return runScenarios(AREA, [
    counterScenario({ name: 'tell, 100 actors (write)', mode: 'tell', actors: 100, depth: 1000, write: true }),
    counterScenario({ name: 'tell, 100 actors (read-only)', mode: 'tell', actors: 100, depth: 1000, write: false }),
    counterScenario({ name: 'tell, 1 hot actor (write)', mode: 'tell', actors: 1, depth: 4000, write: true }),
    counterScenario({ name: 'ask round trips, 1,000 actors (write)', mode: 'ask', actors: 1000, depth: 10, write: true }),
    counterScenario({ name: 'ask round trips, 1,000 actors (read-only)', mode: 'ask', actors: 1000, depth: 10, write: false }),
    counterScenario({ name: 'ask, 1 hot actor (write)', mode: 'ask', actors: 1, depth: 5000, write: true }),
  ]);
}
