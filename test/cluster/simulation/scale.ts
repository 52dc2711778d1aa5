import { replicaSet } from '../../../cluster/placement.js';
import { Checker } from './checker.js';
import { Disk } from './durable-store.js';
import { FakeEtcd } from './fake-etcd.js';
import type { SimConfig } from './messages.js';
import { Network } from './network.js';
import { Rng } from './prng.js';
import { Scheduler } from './scheduler.js';
import { CounterKeys, keys, SimNode, type World } from './sim-node.js';

/**
 * The scale run: the production cluster code (every node a ClusterNode on
 * simulated ports, as in run-seed.ts) at the size of a large deployment,
 * without random faults: a cluster bootstraps, nodes join, drain and crash,
 * and a zone of nodes is lost at once. Measures what etcd serves (writes,
 * keep-alives, watch events, per node per second), partition leader moves
 * per join and per leave, recovery times and leader balance. docs/scaling.md
 * reports its figures; bench/cluster-scale.bench.ts runs it.
 */
export interface ScaleOptions {
  seed: number;
  /** Nodes at the start; `joins` more join one at a time. */
  initialNodes: number;
  joins: number;
  drains: number;
  crashes: number;
  /** Nodes lost at once (a zone), then brought back. */
  zone: number;
  partitions: number;
  replicationFactor: number;
  /** Steady-state window for the etcd rates. */
  steadyMs: number;
  log?: (line: string) => void;
}

export interface PhaseFigure {
  phase: string;
  /** Simulated time the phase took until the cluster was settled (every partition served by its preferred node). */
  settled_ms: number | null;
  /** Time until every partition that still had a live in-sync replica was served. */
  served_ms: number | null;
  /** Partition leader moves during the phase. */
  moves: number;
  /** Simulated time from the start of the phase to its last measurement. */
  elapsed_ms: number;
  /** etcd writes (txn, put, delete, lease grant/revoke) during the phase, in all. */
  etcd_writes: number;
  /** The most etcd writes in one second (100 ms steps) during the phase, cluster-wide. */
  etcd_writes_peak_s: number;
  /** Watch events delivered during the phase, over every node. */
  watch_events: number;
  /** The same per second per live node. */
  writes_per_node_s: number;
  watch_events_per_node_s: number;
}

export interface ScaleResult {
  options: ScaleOptions;
  phases: PhaseFigure[];
  steady: { nodes: number; writes_per_node_s: number; keepalives_per_node_s: number; watch_events_per_node_s: number; reads_per_node_s: number };
  /** Partitions whose every in-sync replica was in the lost zone (unavailable until it came back). */
  zone_partitions_without_replica: number;
  balance: { nodes: number; min: number; max: number; mean: number; stddev: number };
  sim_ms: number;
  wall_ms: number;
  events: number;
}

export const SCALE_DEFAULTS: ScaleOptions = {
  seed: 1,
  initialNodes: 90,
  joins: 10,
  drains: 3,
  crashes: 3,
  zone: 10,
  partitions: 4096,
  replicationFactor: 2,
  steadyMs: 30_000,
};

export async function runScale(options: ScaleOptions): Promise<ScaleResult> {
  const started_wall = performance.now();
  const log = options.log ?? (() => undefined);
  const sched = new Scheduler(20);
  const rng = new Rng(options.seed);
  const config: SimConfig = { partitions: options.partitions, replicationFactor: options.replicationFactor, leaseTtlSeconds: 2, replicationTimeoutMs: 1000, forwardDeadlineMs: 2000 };
  const etcd = new FakeEtcd(sched, rng, 15);
  const net = new Network(sched, rng, 1, 5);
  const checker = new Checker(sched, etcd, (p) => keys.leader(p));
  const counterKeys = new CounterKeys(options.partitions, []);
  const nodes = new Map<string, SimNode>();
  const world: World = {
    sched,
    rng,
    etcd,
    net,
    config,
    checker,
    node: (id) => nodes.get(id),
    nodeIds: () => [...nodes.keys()],
    storeFailRate: () => 0,
    storeStallMs: () => 0,
    onStoreFailure: () => undefined,
    onCrash: () => undefined,
    onStartFailed: (id) => sched.after(500, () => nodes.get(id)?.start()),
    endpoint: (id) => {
      const node = nodes.get(id);
      return node && node.status !== 'down' ? { process: node.process, handlers: node.handlers() } : undefined;
    },
    followersAckUnapplied: false,
    onAppendShipped: () => undefined,
  };
  net.onStreamBroken = (id, peer) => {
    const node = nodes.get(id);
    if (node && node.status !== 'down') node.process.post(node.process.incarnation, () => node.streamBroken(peer));
  };
  const check = () => {
    if (checker.failure) throw checker.failure;
  };

  // Leader moves, as etcd records them: a leader key put by another node than the partition's last leader.
  const lastLeader = new Map<number, string>();
  let moves = 0;
  etcd.watch(keys.partitionsPrefix, false, undefined, (event) => {
    if (event.type !== 'put' || !event.kv.key.endsWith('/leader')) return;
    const p = Number(event.kv.key.slice(keys.partitionsPrefix.length).split('/')[0]);
    const holder = (JSON.parse(event.kv.value) as { node_id: string }).node_id;
    const last = lastLeader.get(p);
    if (last !== undefined && last !== holder) moves++;
    lastLeader.set(p, holder);
  });

  let nextId = 1;
  const addNode = (): SimNode => {
    const id = `node-${String(nextId++).padStart(3, '0')}`;
    const node = new SimNode(id, world, new Disk(), counterKeys, false);
    nodes.set(id, node);
    node.start();
    return node;
  };
  const live = () => [...nodes.values()].filter((n) => n.status !== 'down');
  const leaderOf = (p: number): string | undefined => {
    const kv = etcd.get(keys.leader(p));
    return kv ? (JSON.parse(kv.value) as { node_id: string }).node_id : undefined;
  };
  const served = (p: number): boolean => {
    const holder = leaderOf(p);
    return holder !== undefined && nodes.get(holder)?.cluster?.serving(p) === true;
  };
  const isrAlive = (p: number): boolean => {
    const kv = etcd.get(keys.isr(p));
    if (!kv) return true;
    const replicas = (JSON.parse(kv.value) as { replicas: string[] }).replicas;
    return replicas.some((id) => nodes.get(id)?.status === 'up');
  };
  /** Every partition that can be served (a live in-sync replica) is. */
  const allServed = () => {
    for (let p = 0; p < options.partitions; p++) if (isrAlive(p) && !served(p)) return false;
    return true;
  };
  /** Every partition is served by its preferred node among the live, non-draining members. */
  const settled = () => {
    const candidates = live()
      .filter((n) => n.cluster && !n.cluster.status().draining)
      .map((n) => n.id);
    for (let p = 0; p < options.partitions; p++) {
      if (!served(p) || leaderOf(p) !== replicaSet(p, candidates, options.replicationFactor)[0]) return false;
    }
    return true;
  };
  const until = async (condition: () => boolean, timeout_ms: number, step_ms: number): Promise<number | null> => {
    const start = sched.now;
    for (;;) {
      if (condition()) return sched.now - start;
      if (sched.now - start >= timeout_ms) return null;
      await sched.runUntil(sched.now + step_ms, check);
    }
  };

  // etcd writes per sliding second, sampled every 100 ms: the peak of each phase.
  const window: number[] = [];
  let peak = 0;
  const sample = () => {
    window.push(etcd.counters.writes);
    if (window.length > 11) window.shift();
    peak = Math.max(peak, window[window.length - 1] - window[0]);
    sched.after(100, sample);
  };
  sched.after(0, sample);

  const phases: PhaseFigure[] = [];
  /** `settle: false`: the phase cannot settle (partitions whose every replica is down stay unserved). */
  const phase = async (name: string, act: () => Promise<void> | void, measure: { served: boolean; settle: boolean }, timeout_ms = 120_000): Promise<PhaseFigure> => {
    const startMoves = moves;
    const startWrites = etcd.counters.writes;
    const startWatch = etcd.counters.watchEvents;
    const start = sched.now;
    peak = 0;
    window.length = 0;
    window.push(etcd.counters.writes);
    await act();
    const served_ms = measure.served ? await until(allServed, timeout_ms, 25) : null;
    const settledAfter = measure.settle ? await until(settled, timeout_ms, 250) : null;
    const elapsed_s = Math.max(0.001, (sched.now - start) / 1000);
    const n = Math.max(1, live().length);
    const figure: PhaseFigure = {
      phase: name,
      settled_ms: settledAfter === null ? null : sched.now - start,
      served_ms: served_ms === null ? null : served_ms + 0,
      moves: moves - startMoves,
      elapsed_ms: sched.now - start,
      etcd_writes: etcd.counters.writes - startWrites,
      etcd_writes_peak_s: peak,
      watch_events: etcd.counters.watchEvents - startWatch,
      writes_per_node_s: (etcd.counters.writes - startWrites) / elapsed_s / n,
      watch_events_per_node_s: (etcd.counters.watchEvents - startWatch) / elapsed_s / n,
    };
    phases.push(figure);
    log(`${name}: ${JSON.stringify(figure)} (sim ${Math.round(sched.now / 1000)} s, wall ${Math.round((performance.now() - started_wall) / 1000)} s)`);
    return figure;
  };

  // 1. Bootstrap: the initial nodes start 10 ms apart.
  await phase('bootstrap', async () => {
    for (let i = 0; i < options.initialNodes; i++) {
      addNode();
      await sched.runUntil(sched.now + 10, check);
    }
  }, { served: true, settle: true }, 300_000);

  // 2. Steady state: no change, etcd's load is keep-alives, status records and nothing else.
  const steadyStart = { writes: etcd.counters.writes, keepalives: etcd.counters.keepalives, watch: etcd.counters.watchEvents, reads: etcd.counters.reads, at: sched.now };
  await sched.runUntil(sched.now + options.steadyMs, check);
  const steadyNodes = live().length;
  const steady_s = (sched.now - steadyStart.at) / 1000;
  const steady = {
    nodes: steadyNodes,
    writes_per_node_s: (etcd.counters.writes - steadyStart.writes) / steady_s / steadyNodes,
    keepalives_per_node_s: (etcd.counters.keepalives - steadyStart.keepalives) / steady_s / steadyNodes,
    watch_events_per_node_s: (etcd.counters.watchEvents - steadyStart.watch) / steady_s / steadyNodes,
    reads_per_node_s: (etcd.counters.reads - steadyStart.reads) / steady_s / steadyNodes,
  };
  log(`steady: ${JSON.stringify(steady)}`);

  // 3. Joins, one at a time, each until settled.
  for (let i = 0; i < options.joins; i++) await phase(`join ${i + 1}`, () => void addNode(), { served: false, settle: true });

  // 4. Drains: the node hands its partitions over, then stops (SIGTERM).
  for (let i = 0; i < options.drains; i++) {
    const node = rng.pick(live());
    await phase(`drain ${node.id}`, async () => {
      const drained = node.cluster!.drain(60_000);
      let done = false;
      void drained.then(() => (done = true));
      await until(() => done, 120_000, 50);
      let stopped = false;
      void node.stop().then(() => (stopped = true));
      await until(() => stopped, 30_000, 50);
    }, { served: false, settle: true });
  }

  // 5. Crashes, one at a time (the node does not come back).
  for (let i = 0; i < options.crashes; i++) {
    const node = rng.pick(live());
    await phase(`crash ${node.id}`, () => node.crash(), { served: true, settle: true });
  }

  // 6. A zone of nodes lost at once, then brought back.
  const zone: SimNode[] = [];
  const candidates = [...live()];
  for (let i = 0; i < options.zone && candidates.length > 1; i++) zone.push(candidates.splice(rng.int(0, candidates.length - 1), 1)[0]);
  let withoutReplica = 0;
  await phase(`zone of ${zone.length} lost`, () => {
    for (const node of zone) node.crash();
    for (let p = 0; p < options.partitions; p++) if (!isrAlive(p)) withoutReplica++;
  }, { served: true, settle: false });
  await phase(`zone of ${zone.length} back`, () => {
    for (const node of zone) node.start();
  }, { served: true, settle: true });

  // Leader balance at the end.
  const led = new Map<string, number>(live().map((n) => [n.id, 0]));
  for (let p = 0; p < options.partitions; p++) {
    const holder = leaderOf(p);
    if (holder !== undefined) led.set(holder, (led.get(holder) ?? 0) + 1);
  }
  const counts = [...led.values()];
  const mean = counts.reduce((s, c) => s + c, 0) / counts.length;
  const stddev = Math.sqrt(counts.reduce((s, c) => s + (c - mean) ** 2, 0) / counts.length);
  check();
  return {
    options,
    phases,
    steady,
    zone_partitions_without_replica: withoutReplica,
    balance: { nodes: counts.length, min: Math.min(...counts), max: Math.max(...counts), mean, stddev },
    sim_ms: sched.now,
    wall_ms: performance.now() - started_wall,
    events: sched.eventsRun,
  };
}
