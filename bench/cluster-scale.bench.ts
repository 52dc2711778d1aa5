import { runScale, SCALE_DEFAULTS, type ScaleOptions, type ScaleResult } from '../test/cluster/simulation/scale.js';
import { progress } from './support/scenarios.js';
import type { BenchRow } from './types.js';

/**
 * The cluster at scale, simulated (test/cluster/simulation/scale.ts): the
 * production cluster code on 100 simulated nodes and 4,096 partitions, with
 * joins, drains, crashes and a zone of 10 nodes lost at once. Simulated time,
 * so the figures do not depend on this machine (only the wall time does).
 * `npm run bench -- cluster-scale`; SCALE_NODES, SCALE_PARTITIONS, SCALE_RF
 * and SCALE_SEED change the shape. docs/scaling.md explains the figures.
 */
const AREA = 'cluster scale (simulated)';

export function scaleOptions(env: NodeJS.ProcessEnv = process.env): ScaleOptions {
  const nodes = Number(env.SCALE_NODES ?? 100);
  const joins = Math.min(10, Math.floor(nodes / 10));
  return {
    ...SCALE_DEFAULTS,
    seed: Number(env.SCALE_SEED ?? SCALE_DEFAULTS.seed),
    initialNodes: nodes - joins,
    joins,
    zone: Math.max(1, Math.floor(nodes / 10)),
    partitions: Number(env.SCALE_PARTITIONS ?? SCALE_DEFAULTS.partitions),
    replicationFactor: Number(env.SCALE_RF ?? SCALE_DEFAULTS.replicationFactor),
  };
}

export function rows(result: ScaleResult): BenchRow[] {
  const { options: o, steady, balance } = result;
  const shape = `${o.initialNodes + o.joins} nodes, ${o.partitions} partitions, RF ${o.replicationFactor}`;
  const out: BenchRow[] = [
    { area: AREA, scenario: 'steady: etcd writes per node', value: round(steady.writes_per_node_s, 2), unit: '/s', note: `${steady.nodes} nodes; txn/put/delete/grant/revoke` },
    { area: AREA, scenario: 'steady: etcd keep-alives per node', value: round(steady.keepalives_per_node_s, 2), unit: '/s', note: 'lease TTL 2 s, one every TTL/3' },
    { area: AREA, scenario: 'steady: watch events per node', value: round(steady.watch_events_per_node_s, 2), unit: '/s' },
  ];
  const joins = result.phases.filter((p) => p.phase.startsWith('join'));
  const drains = result.phases.filter((p) => p.phase.startsWith('drain'));
  const crashes = result.phases.filter((p) => p.phase.startsWith('crash'));
  const mean = (list: number[]) => (list.length === 0 ? Number.NaN : list.reduce((s, v) => s + v, 0) / list.length);
  const range = (list: number[]) => (list.length === 0 ? '' : `min ${Math.min(...list)}, max ${Math.max(...list)}`);
  const numbers = (list: (number | null)[]) => list.filter((v): v is number => v !== null);
  const boot = result.phases.find((p) => p.phase === 'bootstrap');
  if (boot) {
    out.push({
      area: AREA,
      scenario: `bootstrap of ${o.initialNodes} nodes: time to fully served`,
      value: boot.served_ms ?? Number.NaN,
      unit: 'ms',
      note: `settled after ${boot.settled_ms ?? 'n/a'} ms; ${boot.etcd_writes} etcd writes, peak ${boot.etcd_writes_peak_s}/s; ${boot.moves} leader moves`,
    });
  }
  out.push(
    { area: AREA, scenario: 'leader moves per join', value: round(mean(joins.map((p) => p.moves)), 1), unit: 'partitions', note: `${range(joins.map((p) => p.moves))}; 1/N of ${o.partitions} = ${round(o.partitions / (o.initialNodes + o.joins), 1)}` },
    { area: AREA, scenario: 'etcd writes per join', value: round(mean(joins.map((p) => p.etcd_writes)), 0), unit: 'writes', note: `peak ${Math.max(...joins.map((p) => p.etcd_writes_peak_s))}/s; ${round(mean(joins.map((p) => p.watch_events)), 0)} watch events` },
    { area: AREA, scenario: 'time to settle after a join', value: round(mean(numbers(joins.map((p) => p.settled_ms))), 0), unit: 'ms', note: 'every partition served by its preferred node' },
    { area: AREA, scenario: 'leader moves per drain', value: round(mean(drains.map((p) => p.moves)), 1), unit: 'partitions', note: range(drains.map((p) => p.moves)) },
    { area: AREA, scenario: 'time to settle after a drain', value: round(mean(numbers(drains.map((p) => p.settled_ms))), 0), unit: 'ms', note: 'drain, stop, placement settled' },
    { area: AREA, scenario: 'time to fully served after a crash', value: round(mean(numbers(crashes.map((p) => p.served_ms))), 0), unit: 'ms', note: `lease TTL 2 s; ${range(numbers(crashes.map((p) => p.served_ms)))}` },
    { area: AREA, scenario: 'etcd writes per crash', value: round(mean(crashes.map((p) => p.etcd_writes)), 0), unit: 'writes', note: `peak ${Math.max(...crashes.map((p) => p.etcd_writes_peak_s))}/s; ${round(mean(crashes.map((p) => p.watch_events)), 0)} watch events` },
    { area: AREA, scenario: 'leader moves per crash', value: round(mean(crashes.map((p) => p.moves)), 1), unit: 'partitions', note: 'failover, then handoffs back to the preferred nodes' },
  );
  const lost = result.phases.find((p) => p.phase.includes('lost'));
  const back = result.phases.find((p) => p.phase.includes('back'));
  if (lost) {
    out.push(
      { area: AREA, scenario: `${lost.phase}: time to serve every partition with a live replica`, value: lost.served_ms ?? Number.NaN, unit: 'ms', note: `${lost.moves} leader moves` },
      { area: AREA, scenario: `${lost.phase}: etcd writes`, value: lost.etcd_writes, unit: 'writes', note: `peak ${lost.etcd_writes_peak_s}/s; ${lost.watch_events} watch events` },
      { area: AREA, scenario: `${lost.phase}: partitions with no live in-sync replica`, value: result.zone_partitions_without_replica, unit: 'partitions', note: 'unavailable until the zone is back (placement is not zone-aware)' },
    );
  }
  if (back) out.push({ area: AREA, scenario: `${back.phase}: time to fully served`, value: back.served_ms ?? Number.NaN, unit: 'ms', note: `settled after ${back.settled_ms ?? 'n/a'} ms, ${back.moves} leader moves` });
  out.push(
    { area: AREA, scenario: 'leader balance: partitions led per node', value: round(balance.stddev, 1), unit: 'stddev', note: `min ${balance.min}, max ${balance.max}, mean ${round(balance.mean, 1)} over ${balance.nodes} nodes` },
    { area: AREA, scenario: 'run', value: round(result.sim_ms / 1000, 0), unit: 's simulated', note: `${shape}; wall ${round(result.wall_ms / 1000, 0)} s, ${result.events} events, seed ${o.seed}` },
  );
  return out;
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export async function run(): Promise<BenchRow[]> {
  const result = await runScale({ ...scaleOptions(), log: (line) => progress(`cluster-scale: ${line}`) });
  return rows(result);
}
