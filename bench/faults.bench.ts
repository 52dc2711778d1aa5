import { describeFault, runFaultScenario, type Fault, type ScenarioResult } from '../test/cluster/support/faults.js';
import { progress, runScenarios } from './support/scenarios.js';
import type { BenchRow } from './types.js';

/**
 * `npm run bench -- faults`: the fault scenarios of the cluster-faults issue
 * (item 5), each on a fresh private etcd and three node processes
 * (REPLICATION_FACTOR 2, LEASE_TTL_SECONDS 2) under lock load: 12 clients
 * taking and releasing locks on 20 keys through the nodes that are up, probes
 * of every key every 250 ms, and a stream of long-lived locks read back at the
 * end (test/cluster/support/faults.ts, lock-history.ts). Three rows per
 * scenario: how long until every key was writable again, counted from the
 * fault's start and from its end, against the issue's targets (etcd down N s:
 * within 3 s of etcd's return; kill -9 of a leader: within the lease TTL + 1 s
 * of the kill), and the safety violations the history checker found (lost
 * acknowledged writes, fence regressions, overlapping holders), which must be 0.
 *
 * BENCH_FAULTS_SCENARIOS=etcd-2.5,kill-leader runs only those (names below).
 * The whole file takes 3 to 4 minutes: run it with BENCH_FILE_TIMEOUT_SECONDS=900.
 */
const AREA = 'faults';
const LEASE_TTL_MS = 2_000;

interface Spec {
  name: string;
  fault: Fault;
  /** The issue's target for this fault, if it has one. */
  target?: { from: 'start' | 'end'; ms: number; text: string };
}

const SPECS: Spec[] = [
  { name: 'etcd-2.5', fault: { kind: 'etcd-outage', duration_ms: 2_500 }, target: { from: 'end', ms: 3_000, text: "every key writable within 3 s of etcd's return" } },
  { name: 'etcd-10', fault: { kind: 'etcd-outage', duration_ms: 10_000 }, target: { from: 'end', ms: 3_000, text: "every key writable within 3 s of etcd's return" } },
  { name: 'kill-leader', fault: { kind: 'kill-leader', down_ms: 3_000 }, target: { from: 'start', ms: LEASE_TTL_MS + 1_000, text: 'every key writable within lease TTL + 1 s of the kill' } },
  { name: 'pause-leader', fault: { kind: 'pause-leader', duration_ms: 8_000 } },
  { name: 'kill-two', fault: { kind: 'kill-two', gap_ms: 300, down_ms: 3_000 } },
  { name: 'random-pauses', fault: { kind: 'random-pauses', count: 19, pause_ms: [300, 2_500], gap_ms: [300, 1_200], seed: 19 } },
];

function rows(spec: Spec, result: ScenarioResult): BenchRow[] {
  const { report, unread, unsettled } = result;
  const w = report.windows;
  const label = describeFault(spec.fault);
  const verdict = (from: 'start' | 'end', value: number) => {
    if (!spec.target || spec.target.from !== from) return from === 'start' && !spec.target ? 'no target in the issue' : undefined;
    const met = !w.unrecovered && value <= spec.target.ms;
    return `target: ${spec.target.text} (<= ${spec.target.ms} ms): ${met ? 'met' : 'NOT met'}`;
  };
  const fromStartNote = [
    verdict('start', w.from_start_ms),
    `longest outage of one key ${Math.round(w.longest_ms)} ms (${w.outages} outages of a key)`,
    w.unrecovered ? 'NOT RECOVERED when the load stopped' : undefined,
    result.description,
  ].filter(Boolean).join('; ');
  const fromEndNote = [verdict('end', w.from_end_ms), `fault healed ${Math.round(result.fault_end_ms - result.fault_start_ms)} ms after it started`].filter(Boolean).join('; ');
  const c = report.counts;
  const safety = report.lost_writes + report.fence_regressions + report.overlapping_holders;
  const safetyNote = [
    `lost acknowledged writes ${report.lost_writes}, fence regressions ${report.fence_regressions}, overlapping holders ${report.overlapping_holders}; unclear refusals ${report.bad_refusals}`,
    `${c.ops} ops: ${c.acquired} acquired, ${c.released} released, ${c.lock_held} lock_held, ${c.not_written} refused unwritten, ${c.unknown} unknown outcome (${c.no_answer} unanswered)`,
    `${c.held_checked} held locks and ${c.long_lived_checked}/${c.long_lived_acked} long-lived locks read back`,
    unread.length > 0 ? `${unread.length} keys NOT READ BACK` : undefined,
    unsettled ? `cluster not settled afterwards: ${unsettled.slice(0, 200)}` : undefined,
  ].filter(Boolean).join('; ');
  return [
    { area: AREA, scenario: `${label}: every key writable again, from the fault's start`, value: Math.round(w.from_start_ms), unit: 'ms', note: fromStartNote },
    { area: AREA, scenario: `${label}: every key writable again, from the fault's end`, value: Math.round(w.from_end_ms), unit: 'ms', note: fromEndNote },
    { area: AREA, scenario: `${label}: safety violations`, value: unread.length > 0 ? Number.NaN : safety, unit: 'violations', note: safetyNote },
  ];
}

export async function run(): Promise<BenchRow[]> {
  const only = process.env.BENCH_FAULTS_SCENARIOS?.split(',');
  const specs = only ? SPECS.filter((s) => only.includes(s.name)) : SPECS;
  return runScenarios(
    AREA,
    specs.map((spec) => ({
      name: spec.name,
      async run() {
        const result = await runFaultScenario({ name: spec.name, fault: spec.fault, before_ms: 3_000, after_ms: 6_000, log: progress });
        const produced = rows(spec, result);
        if (produced.some((row) => row.scenario.endsWith('safety violations') && row.value !== 0)) {
          process.stderr.write(`[bench] ${spec.name}: violations:\n${result.report.violations.map((v) => `  ${v.property} ${v.key}: ${v.message}`).join('\n')}\n`);
        }
        return produced;
      },
    })),
  );
}
