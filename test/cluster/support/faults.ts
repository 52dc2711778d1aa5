import { FaultCluster, registerUser, type FaultNode } from './fault-cluster.js';
import { checkHistory, formatReport, now, readBack, startLockLoad, type HistoryReport, type LockHistory } from './lock-history.js';

/**
 * One fault scenario, as the cluster-faults issue's author ran them: etcd and
 * three nodes (REPLICATION_FACTOR 2, LEASE_TTL_SECONDS 2), 12 clients taking
 * and releasing locks on 20 keys through the nodes that are up, plus a stream
 * of long-lived locks; one fault, healed; the load runs on a while, stops; the
 * cluster settles; every key is read back; the history is checked
 * (lock-history.ts). Used by test/cluster/faults.test.ts (the short ones) and
 * bench/faults.bench.ts (all of them).
 *
 * The clients send to the nodes that are up (ready and not paused), as behind
 * a load balancer with health checks; requests already on their way to a
 * node when it is killed or paused are part of the history.
 */
export type Fault =
  /** etcd SIGKILLed, started again (same data directory and ports) after duration_ms. */
  | { kind: 'etcd-outage'; duration_ms: number }
  /** kill -9 of the node leading the most partitions, restarted after down_ms. */
  | { kind: 'kill-leader'; down_ms: number }
  /** SIGSTOP of the node leading the most partitions, SIGCONT after duration_ms. */
  | { kind: 'pause-leader'; duration_ms: number }
  /** kill -9 of the two nodes leading the most partitions, gap_ms apart; both restarted down_ms after the second kill. */
  | { kind: 'kill-two'; gap_ms: number; down_ms: number }
  /** `count` pauses (SIGSTOP..SIGCONT) of a random node, one at a time, each pause_ms long, gap_ms between them (uniform ranges). */
  | { kind: 'random-pauses'; count: number; pause_ms: [number, number]; gap_ms: [number, number]; seed: number };

export interface ScenarioOptions {
  name: string;
  fault: Fault;
  /** Load before the fault (default 3 s) and after it is healed (default 5 s). */
  before_ms?: number;
  after_ms?: number;
  clients?: number;
  keys?: number;
  partitions?: number;
  log?: (line: string) => void;
}

export interface ScenarioResult {
  name: string;
  /** What was done, e.g. "SIGKILL n2 (led 7 of 16 partitions), restarted after 3000 ms". */
  description: string;
  history: LockHistory;
  report: HistoryReport;
  /** Keys whose read-back got no answer (their writes could not be verified). */
  unread: string[];
  /** Why the cluster had not settled after the run (undefined: it had). */
  unsettled?: string;
  /** Fault start and end, in ms since the load started. */
  fault_start_ms: number;
  fault_end_ms: number;
  /** The nodes' and etcd's output, for a failure message. */
  output: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** mulberry32: a seeded generator, so a random-pause run can be repeated. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const between = (random: () => number, [lo, hi]: [number, number]) => lo + random() * (hi - lo);

export function describeFault(fault: Fault): string {
  switch (fault.kind) {
    case 'etcd-outage':
      return `etcd down ${fault.duration_ms / 1000} s`;
    case 'kill-leader':
      return `kill -9 of a leader, restarted after ${fault.down_ms / 1000} s`;
    case 'pause-leader':
      return `SIGSTOP of a leader for ${fault.duration_ms / 1000} s`;
    case 'kill-two':
      return `two nodes killed ${fault.gap_ms / 1000} s apart, restarted after ${fault.down_ms / 1000} s`;
    case 'random-pauses':
      return `${fault.count} random pauses of ${fault.pause_ms[0] / 1000}-${fault.pause_ms[1] / 1000} s`;
  }
}

/** Injects the fault and heals it; returns what was done. Records the nodes' fault intervals in the history. */
async function inject(cluster: FaultCluster, fault: Fault, history: LockHistory, log: (line: string) => void): Promise<{ start_ms: number; end_ms: number; description: string }> {
  const down = (node: FaultNode, from_ms: number) => {
    const entry = { node: node.nodeId, from_ms, to_ms: Infinity };
    history.node_faults.push(entry);
    return (to_ms: number) => (entry.to_ms = to_ms);
  };
  switch (fault.kind) {
    case 'etcd-outage': {
      const start_ms = now();
      await cluster.stopEtcd();
      await sleep(Math.max(0, fault.duration_ms - (now() - start_ms)));
      const restart_ms = now();
      await cluster.startEtcd();
      const end_ms = now();
      return { start_ms, end_ms, description: `etcd SIGKILLed, started again (same data directory) after ${Math.round(restart_ms - start_ms)} ms; healthy ${Math.round(end_ms - restart_ms)} ms later` };
    }
    case 'kill-leader': {
      const { node, partitions } = await cluster.busiestLeader();
      const start_ms = now();
      const up = down(node, start_ms);
      await node.kill('SIGKILL');
      await sleep(fault.down_ms);
      const restart_ms = now();
      await node.start();
      const end_ms = now();
      up(end_ms);
      return { start_ms, end_ms, description: `kill -9 of ${node.nodeId} (led ${partitions}/${cluster.partitions} partitions), restarted after ${fault.down_ms} ms, ready ${Math.round(end_ms - restart_ms)} ms later` };
    }
    case 'pause-leader': {
      const { node, partitions } = await cluster.busiestLeader();
      const start_ms = now();
      const up = down(node, start_ms);
      await node.kill('SIGSTOP');
      await sleep(fault.duration_ms);
      await node.kill('SIGCONT');
      const end_ms = now();
      up(end_ms);
      return { start_ms, end_ms, description: `SIGSTOP of ${node.nodeId} (led ${partitions}/${cluster.partitions} partitions) for ${fault.duration_ms} ms, then SIGCONT` };
    }
    case 'kill-two': {
      // The two nodes leading the most partitions, as seen before the first kill.
      const [first, { node: second }] = await cluster.rankedLeaders();
      const start_ms = now();
      const upFirst = down(first.node, start_ms);
      await first.node.kill('SIGKILL');
      await sleep(Math.max(0, fault.gap_ms - (now() - start_ms)));
      const secondAt = now();
      const upSecond = down(second, secondAt);
      await second.kill('SIGKILL');
      await sleep(fault.down_ms);
      const restart_ms = now();
      await Promise.all([first.node.start(60_000), second.start(60_000)]);
      const end_ms = now();
      upFirst(end_ms);
      upSecond(end_ms);
      return {
        start_ms,
        end_ms,
        description: `kill -9 of ${first.node.nodeId} (led ${first.partitions}/${cluster.partitions} partitions), of ${second.nodeId} ${Math.round(secondAt - start_ms)} ms later; both restarted after ${fault.down_ms} ms, ready ${Math.round(end_ms - restart_ms)} ms later`,
      };
    }
    case 'random-pauses': {
      const random = seededRandom(fault.seed);
      let start_ms = 0;
      const done: string[] = [];
      for (let i = 0; i < fault.count; i++) {
        if (i > 0) await sleep(between(random, fault.gap_ms));
        const candidates = cluster.upNodes();
        const node = candidates[Math.floor(random() * candidates.length)];
        const pause = between(random, fault.pause_ms);
        const from = now();
        if (i === 0) start_ms = from;
        const up = down(node, from);
        await node.kill('SIGSTOP');
        await sleep(pause);
        await node.kill('SIGCONT');
        up(now());
        done.push(`${node.nodeId} ${Math.round(pause)}`);
        log(`pause ${i + 1}/${fault.count}: ${node.nodeId} for ${Math.round(pause)} ms`);
      }
      const end_ms = now();
      return { start_ms, end_ms, description: `${fault.count} pauses (seed ${fault.seed}; node ms): ${done.join(', ')}` };
    }
  }
}

export async function runFaultScenario(options: ScenarioOptions): Promise<ScenarioResult> {
  const log = options.log ?? (() => undefined);
  const cluster = await FaultCluster.start({ nodes: 3, replicationFactor: 2, leaseTtlSeconds: 2, partitions: options.partitions ?? 16 });
  try {
    const { token } = await registerUser(cluster.nodes[0].url, `faults${Date.now() % 1_000_000}`);
    const namespace = 'faults';
    const load = startLockLoad({ nodes: () => cluster.upNodes(), token, namespace, clients: options.clients ?? 12, keys: options.keys ?? 20 });
    const history = load.history;
    await sleep(options.before_ms ?? 3_000);
    log(`${options.name}: injecting ${describeFault(options.fault)}`);
    const fault = await inject(cluster, options.fault, history, log);
    history.fault = { label: options.name, start_ms: fault.start_ms, end_ms: fault.end_ms };
    log(`${options.name}: ${fault.description}`);
    await sleep(options.after_ms ?? 5_000);
    await load.stop();
    let unsettled: string | undefined;
    try {
      await cluster.waitSettled(30_000);
    } catch (error) {
      unsettled = error instanceof Error ? error.message : String(error);
      log(`${options.name}: ${unsettled}`);
      if (process.env.FAULTS_DUMP) (await import('node:fs')).writeFileSync(process.env.FAULTS_DUMP, cluster.output());
    }
    const unread = await readBack(history, { nodes: () => cluster.upNodes(), token, namespace, timeout_ms: 20_000 });
    const report = checkHistory(history);
    log(formatReport(options.name, report));
    if (unread.length > 0) log(`${options.name}: ${unread.length} keys could not be read back: ${unread.slice(0, 10).join(', ')}`);
    return {
      name: options.name,
      description: fault.description,
      history,
      report,
      unread,
      unsettled,
      fault_start_ms: fault.start_ms - history.load_start_ms,
      fault_end_ms: fault.end_ms - history.load_start_ms,
      output: cluster.output(),
    };
  } finally {
    await cluster.stop();
  }
}
