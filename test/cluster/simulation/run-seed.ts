import { Checker, InvariantViolation } from './checker.js';
import { Client, sendToNode } from './client.js';
import { Disk } from './durable-store.js';
import { FakeEtcd } from './fake-etcd.js';
import type { SimConfig, SimFault } from './messages.js';
import { Network } from './network.js';
import { Rng } from './prng.js';
import { Scheduler } from './scheduler.js';
import { CounterKeys, keys, SimNode, type World } from './sim-node.js';

/**
 * One seeded run of the production cluster code: three nodes (a fourth,
 * maybe a fifth, join later), clients writing and reading counters, and
 * faults — crashes, pauses (SIGSTOP), link cuts and stalls, failed store
 * commits — for `faultMs`; then every fault heals and each partition must
 * take a write within `livenessMs`. Every random choice comes from the seed.
 */
export interface RunOptions {
  seed: number;
  faultMs?: number;
  livenessMs?: number;
  fault?: SimFault;
  clients?: number;
  /** Default: 2 or 3, chosen by the seed. */
  replicationFactor?: number;
  /** MIN_IN_SYNC_REPLICAS (default 1). */
  minInSyncReplicas?: number;
  partitions?: number;
  /**
   * Each drop of a node's etcd connection breaks its watches and makes its
   * requests fail for up to this long (0, the default: the watches break
   * and reconnect, requests go through; see README, "etcd outages").
   */
  etcdOutageMaxMs?: number;
  /**
   * With outages: half of the writes a node sends during one are applied by
   * etcd with their answer lost (the node sees the same failure either way).
   */
  etcdLostAnswers?: boolean;
  /**
   * A commit stalls (an fsync that hangs) with probability 1/20 for up to
   * this long: longer than a lease, so a node may lose a partition while its
   * own commit for it is still under way (0, the default: commits take 1-3 ms).
   */
  diskStallMaxMs?: number;
  /** SimConfig.groupCommits: commits queued together are written and answered together. */
  groupCommits?: boolean;
  /** SimConfig.commitDelayMs; absent: odd seeds run with the default of a real node (4 ms), even seeds with 0. */
  commitDelayMs?: number;
}

export interface RunStats {
  leaderChanges: number;
  acknowledged: number;
  reads: number;
  crashes: number;
  pauses: number;
  cuts: number;
  stalls: number;
  /** A node's connection to etcd dropped (watches broken, requests failing) for a while. */
  etcdDrops: number;
  storeFailures: number;
  /** Commits that stalled (diskStallMaxMs). */
  diskStalls: number;
  /** Writes refused with not_enough_replicas. */
  refusedWrites: number;
  events: number;
}

export interface RunResult {
  seed: number;
  ok: boolean;
  /** The violation, with `SIM_SEED=<seed>` and the tail of the event trace. */
  error?: string;
  stats: RunStats;
}

export const DEFAULT_CONFIG: SimConfig = {
  partitions: 4,
  replicationFactor: 2,
  leaseTtlSeconds: 2,
  replicationTimeoutMs: 1000,
  forwardDeadlineMs: 2000,
};

const COUNTERS = ['x', 'y', 'live'];
/** With diskStallMaxMs: the chance that a commit stalls. */
const DISK_STALL_CHANCE = 0.05;
/** SIM_TRACE_COMMITS=1: every disk commit goes into the trace. */
const traceCommits = process.env.SIM_TRACE_COMMITS === '1';

export async function runSeed(options: RunOptions): Promise<RunResult> {
  const { seed } = options;
  const faultMs = options.faultMs ?? 20_000;
  const livenessMs = options.livenessMs ?? 5_000;
  const sched = new Scheduler();
  const rng = new Rng(seed);
  const config: SimConfig = {
    ...DEFAULT_CONFIG,
    partitions: options.partitions ?? DEFAULT_CONFIG.partitions,
    replicationFactor: options.replicationFactor ?? rng.int(2, 3),
    minInSyncReplicas: options.minInSyncReplicas,
    fault: options.fault,
    etcdLostAnswers: options.etcdLostAnswers,
    groupCommits: options.groupCommits,
    // From the seed, not the rng: a seed replays the same run as before this option existed when it is even.
    commitDelayMs: options.commitDelayMs ?? (seed % 2 === 1 ? 4 : 0),
  };
  const etcd = new FakeEtcd(sched, rng, 15);
  const net = new Network(sched, rng, 1, 5);
  const checker = new Checker(sched, etcd, (p) => keys.leader(p), config.minInSyncReplicas ?? 1);
  const counterKeys = new CounterKeys(config.partitions, COUNTERS);
  const nodes = new Map<string, SimNode>();
  const stats: RunStats = { leaderChanges: 0, acknowledged: 0, reads: 0, crashes: 0, pauses: 0, cuts: 0, stalls: 0, etcdDrops: 0, storeFailures: 0, diskStalls: 0, refusedWrites: 0, events: 0 };
  let faults = true;
  /** Faults armed to strike right after a node ships its next entry (mid-replication). */
  const armed = new Map<string, () => void>();

  const world: World = {
    sched,
    rng,
    etcd,
    net,
    config,
    checker,
    node: (id) => nodes.get(id),
    nodeIds: () => [...nodes.keys()],
    storeFailRate: () => (faults ? 0.002 : 0),
    onStoreFailure: () => stats.storeFailures++,
    // Drawn only when stalls are asked for, so the other runs' random streams stay as they were.
    storeStallMs: () => {
      const max = options.diskStallMaxMs ?? 0;
      if (!faults || max === 0 || !rng.chance(DISK_STALL_CHANCE)) return 0;
      stats.diskStalls++;
      return rng.int(Math.floor(max / 2), max);
    },
    onCrash: (id) => {
      stats.crashes++;
      armed.delete(id);
      // A crashed node comes back after a while (at the latest when the faults stop).
      if (faults) sched.after(rng.int(300, 3000), () => nodes.get(id)?.start());
    },
    // A supervisor starts a process that exited after a failed start again (faults or not).
    onStartFailed: (id) => sched.after(rng.int(300, 1000), () => nodes.get(id)?.start()),
    endpoint: (id) => {
      const node = nodes.get(id);
      return node && node.status !== 'down' ? { process: node.process, handlers: node.handlers() } : undefined;
    },
    followersAckUnapplied: config.fault === 'followers_ack_unapplied',
    onAppendShipped: (id) => {
      const fault = armed.get(id);
      if (!fault) return;
      armed.delete(id);
      sched.after(rng.int(0, 2), () => faults && fault());
    },
  };
  net.onStreamBroken = (id, peer) => {
    const node = nodes.get(id);
    if (node && node.status !== 'down') node.process.post(node.process.incarnation, () => node.streamBroken(peer));
  };

  const addNode = (id: string) => {
    const node = new SimNode(
      id,
      world,
      new Disk((p, version, data) => {
        if (traceCommits) sched.trace(`${id}: disk p${p} at ${version.epoch}/${version.seq} fence ${version.fence} {${[...data].map(([k, v]) => `${k}=${v}`).join(',')}}`);
        checker.onDurable(id, p, version, data);
        const counters = new Map<string, number>();
        for (const [key, value] of data) {
          const counter = counterKeys.of(key)?.counter;
          if (counter !== undefined) counters.set(counter, value);
        }
        checker.onCopy(id, p, counters);
      }),
      counterKeys,
      config.fault === 'clock_stops_while_paused',
    );
    nodes.set(id, node);
    node.start();
  };
  for (const id of ['n1', 'n2', 'n3']) sched.at(rng.int(0, 30), () => addNode(id));
  sched.at(rng.int(2000, Math.max(2001, faultMs - 5000)), () => addNode('n4'));
  if (rng.chance(0.5)) sched.at(rng.int(4000, Math.max(4001, faultMs - 3000)), () => addNode('n5'));

  const started = () => [...nodes.values()];
  const loop = (mean: number, fault: () => void) => {
    const next = () => {
      if (!faults) return;
      fault();
      sched.after(rng.exp(mean), next);
    };
    sched.after(rng.exp(mean), next);
  };
  // Crashes and pauses strike at a random instant, or half of the time right after the node ships
  // its next entry (mid-replication, where the interesting races are).
  const strike = (node: SimNode, fault: () => void) => {
    if (rng.chance(0.5)) fault();
    else armed.set(node.id, fault);
  };
  loop(2500, () => {
    const targets = started().filter((n) => n.status !== 'down');
    if (targets.length === 0) return;
    const node = rng.pick(targets);
    strike(node, () => node.crash());
  });
  loop(3000, () => {
    const targets = started().filter((n) => n.status === 'up');
    if (targets.length === 0) return;
    const node = rng.pick(targets);
    strike(node, () => {
      if (node.status !== 'up') return;
      node.pause();
      stats.pauses++;
      sched.after(rng.int(100, 3500), () => node.resume());
    });
  });
  loop(1200, () => {
    const ids = [...nodes.keys()];
    if (ids.length < 2) return;
    const a = rng.pick(ids);
    const b = rng.pick(ids.filter((id) => id !== a));
    net.cut(a, b);
    stats.cuts++;
    sched.after(rng.int(50, 2500), () => net.heal(a, b));
  });
  loop(2500, () => {
    const ids = [...nodes.keys()];
    if (ids.length < 2) return;
    const a = rng.pick(ids);
    const b = rng.pick(ids.filter((id) => id !== a));
    net.stall(a, b, rng.int(50, 3000));
    stats.stalls++;
  });

  // A node loses etcd for a while: its watches break and must be re-read
  // (cluster/synced-prefix.ts); longer than the TTL, it loses its lease too.
  loop(3000, () => {
    const targets = started().filter((n) => n.status === 'up');
    if (targets.length === 0) return;
    rng.pick(targets).etcdDisconnect(rng.int(0, options.etcdOutageMaxMs ?? 0));
    stats.etcdDrops++;
  });

  const clientCount = options.clients ?? 3;
  let clientsActive = true;
  for (let i = 0; i < clientCount; i++) new Client(world, () => clientsActive, ['x', 'y']).start();

  // Liveness: once the faults stop, each partition must take a write (sent to the leader etcd names).
  const written = new Set<number>();
  const probe = () => {
    for (let p = 0; p < config.partitions; p++) {
      if (written.has(p)) continue;
      const kv = etcd.get(keys.leader(p));
      if (!kv) continue;
      const leader = (JSON.parse(kv.value) as { node_id: string }).node_id;
      sendToNode(world, leader, p, 'live', { op: 'inc', issuedAt: sched.now }, (reply) => {
        if (reply.ok) written.add(p);
      });
    }
    if (written.size < config.partitions) sched.after(100, probe);
  };
  sched.at(faultMs, () => {
    faults = false;
    armed.clear();
    sched.trace('faults stop: heal, resume, restart');
    for (const [a, b] of net.cutLinks()) net.heal(a, b);
    net.unstallAll();
    for (const node of started()) {
      if (node.status === 'paused') node.resume();
      else if (node.status === 'down') node.start();
    }
    probe();
  });

  let error: string | undefined;
  try {
    await sched.runUntil(faultMs + livenessMs, () => {
      if (checker.failure) throw checker.failure;
    });
    clientsActive = false;
    if (written.size < config.partitions) {
      const missing: string[] = [];
      for (let p = 0; p < config.partitions; p++) {
        if (written.has(p)) continue;
        const leader = etcd.get(keys.leader(p));
        const isr = etcd.get(keys.isr(p));
        missing.push(`p${p} (leader ${leader ? `${leader.value}@${leader.createRevision}` : 'none'}, isr ${isr?.value ?? 'none'})`);
      }
      const nodeLines = [...nodes.values()].map((n) => `  ${n.describe()}`).join('\n');
      throw new InvariantViolation(`liveness: ${livenessMs}ms after the faults stopped, no write succeeded on ${missing.join(', ')}\n${nodeLines}`);
    }
    // Every node re-read etcd after its last watch break: its view follows etcd again.
    for (const node of nodes.values()) {
      if (node.status === 'up' && node.cluster && !node.cluster.viewFresh()) {
        throw new InvariantViolation(`view stale: ${node.id}'s view of etcd did not follow it again ${livenessMs}ms after the faults stopped`);
      }
    }
    // Every observed value is still there on the partition's leader.
    for (const node of nodes.values()) {
      for (let p = 0; p < config.partitions; p++) {
        if (!node.cluster?.serving(p)) continue;
        for (const counter of COUNTERS) {
          const have = node.committedValue(p, counter);
          const seen = checker.observed(p, counter)?.value ?? 0;
          if (have < seen) throw new InvariantViolation(`acknowledged write lost at the end: ${node.id} leads p${p} with ${counter}=${have} < ${seen}`);
        }
      }
    }
  } catch (caught) {
    if (!(caught instanceof InvariantViolation)) throw caught;
    error = [`SIM_SEED=${seed}: ${caught.message}`, `at ${sched.now}ms; last events:`, ...sched.traceTail().map((l) => `  ${l}`)].join('\n');
  }
  stats.leaderChanges = checker.leaderChanges;
  stats.acknowledged = checker.acknowledged;
  stats.refusedWrites = checker.refusedWrites;
  stats.reads = checker.reads;
  stats.events = sched.eventsRun;
  return { seed, ok: error === undefined, error, stats };
}
