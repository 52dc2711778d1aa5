import { throttleActors } from '../actors/throttle/actor.js';
import {
  THROTTLE_STATS_KIND,
  THROTTLE_SUBJECT_KIND,
  throttleStatsKey,
  throttleSubjectKey,
  type BucketView,
  type CheckView,
  type PlanRule,
  type StatsCounts,
  type SubjectMessage,
} from '../actors/throttle/messages.js';
import type { ActorRuntime } from '../runtime/index.js';
import { othersNote, startCpuMeter } from './support/cpu-meter.js';
import { startBenchRuntime } from './support/runtime.js';
import { runScenarios, type Scenario } from './support/scenarios.js';
import type { BenchRow } from './types.js';

/**
 * Throttle `check` through the in-process runtime on real LMDB (fsync per
 * commit, SystemClock), as the edge asks it: one ask per check, the reply
 * after the commit. Target (issue 13): >= 30,000 checks/s on one hot subject
 * with exact counts. After each run the bench checks that exactly
 * min(checks, max_requests) were allowed, that the bucket is empty, and that
 * the plan's totals (sent through the outbox by the subject's flush alarm)
 * add up to every check counted.
 */
const AREA = 'throttle';
const SECONDS = Number(process.env.BENCH_THROTTLE_SECONDS ?? 3);
const TARGET = 'target >= 30,000/s';
const TENANT = 'bench-tenant';
const PLAN = 'bench-plan';
const GENERATION = 1;

interface Counted {
  checks: number;
  allowed: number;
  denied: number;
  elapsed_ms: number;
}

/** Closed loop: `inFlight` checks outstanding per subject, each reply sends the next, until time runs out. */
function driveChecks(runtime: ActorRuntime, keys: string[], rule: PlanRule, inFlight: number, seconds: number): Promise<Counted> {
  return new Promise((resolve, reject) => {
    const started_ms = performance.now();
    const deadline_ms = started_ms + seconds * 1000;
    const counted: Counted = { checks: 0, allowed: 0, denied: 0, elapsed_ms: 0 };
    const message: SubjectMessage = { op: 'check', rule, cost: 1 };
    let active = 0;
    let stopped = false;
    const slot = (key: string) => {
      const onReply = (view: CheckView) => {
        counted.checks++;
        if (view.allowed) counted.allowed++;
        else counted.denied++;
        if ((counted.checks & 1023) === 0 && performance.now() >= deadline_ms) stopped = true;
        if (!stopped) runtime.ask<CheckView>(THROTTLE_SUBJECT_KIND, key, message).then(onReply, onError);
        else if (--active === 0) {
          counted.elapsed_ms = performance.now() - started_ms;
          resolve(counted);
        }
      };
      active++;
      runtime.ask<CheckView>(THROTTLE_SUBJECT_KIND, key, message).then(onReply, onError);
    };
    const onError = (error: unknown) => {
      stopped = true;
      reject(error);
    };
    for (const key of keys) for (let i = 0; i < inFlight; i++) slot(key);
  });
}

async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, timeout_ms = 10_000): Promise<T> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function checkScenario(name: string, subjects: number, inFlightPerSubject: number, max_requests: number): Scenario {
  return {
    name,
    async run(): Promise<BenchRow[]> {
      const bench = await startBenchRuntime(throttleActors);
      try {
        // A 30-day window: nothing refills during the run, so the allowed count is exact: min(checks, max_requests) per subject.
        const rule: PlanRule = { version: 1, max_requests, window_ms: 2_592_000_000, refund_window_ms: 60_000 };
        const keys = Array.from({ length: subjects }, (_, i) => throttleSubjectKey(TENANT, PLAN, GENERATION, `user:${i}`));
        const stopMeter = startCpuMeter([process.pid]);
        const result = await driveChecks(bench.runtime, keys, rule, inFlightPerSubject, SECONDS);
        const cpu = stopMeter();

        // Exact counts: every subject allowed exactly its bucket (or every check, if fewer came), and is empty now.
        const perSubject = result.checks / subjects;
        const expectedAllowed = Math.min(result.checks, subjects * max_requests);
        if (result.allowed !== expectedAllowed || result.denied !== result.checks - expectedAllowed) {
          throw new Error(`allowed ${result.allowed}, denied ${result.denied} of ${result.checks}; expected ${expectedAllowed} allowed`);
        }
        for (const key of keys) {
          const view = await bench.runtime.ask<BucketView>(THROTTLE_SUBJECT_KIND, key, { op: 'peek', rule } satisfies SubjectMessage);
          if (perSubject >= max_requests && view.remaining !== 0) throw new Error(`bucket ${key} has ${view.remaining} left`);
        }
        // The plan's totals, through the outbox after the flush alarm (<= 1 s), add up to what was counted.
        const totals = await waitFor(
          () => bench.runtime.ask<StatsCounts>(THROTTLE_STATS_KIND, throttleStatsKey(TENANT, PLAN, GENERATION), { op: 'get' }),
          (counts) => counts.total_checks >= result.checks,
          'the plan totals',
        );
        if (totals.total_checks !== result.checks || totals.total_allowed !== result.allowed || totals.total_denied !== result.denied) {
          throw new Error(`totals ${JSON.stringify(totals)} differ from counted ${JSON.stringify(result)}`);
        }
        const rate = Math.round((result.checks / result.elapsed_ms) * 1000);
        // What one core of this process does, whatever the rest of the (shared) machine takes from it.
        const cpuSeconds = cpu ? (cpu.participants_cores * result.elapsed_ms) / 1000 : undefined;
        const perCore: BenchRow[] = cpuSeconds
          ? [{
              area: AREA,
              scenario: `${name}: per CPU-second of the process`,
              value: Math.round(result.checks / cpuSeconds),
              unit: 'checks/CPU-s',
              note: `the process used ${cpu!.participants_cores.toFixed(2)} cores (JS thread + LMDB write thread); what a free core would sustain`,
            }]
          : [];
        return [
          {
            area: AREA,
            scenario: name,
            value: rate,
            unit: 'checks/s',
            note:
              `${subjects.toLocaleString('en-US')} subject(s) x ${inFlightPerSubject} in flight, ${result.checks.toLocaleString('en-US')} checks: ` +
              `${result.allowed.toLocaleString('en-US')} allowed (exactly the bucket), ${result.denied.toLocaleString('en-US')} denied; ` +
              `stats totals equal${othersNote(cpu)}; ${TARGET}`,
          },
          ...perCore,
        ];
      } finally {
        await bench.destroy();
      }
    },
  };
}

export async function run(): Promise<BenchRow[]> {
  return runScenarios(AREA, [
    checkScenario('check, 1 hot subject (reply after commit + fsync)', 1, 4_000, 50_000),
    checkScenario('check, 1,000 subjects', 1_000, 8, 100),
  ]);
}
