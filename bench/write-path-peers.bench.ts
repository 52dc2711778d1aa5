import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnEtcd, type EtcdProcess } from '../cluster/etcd-process.js';
import { startCpuMeter } from './support/cpu-meter.js';
import { runEtcdLocksInChild, type EtcdLockPlan, type EtcdLockResult } from './support/etcd-lock-load.js';
import { startProjectCluster, startProjectServer, type ProjectCluster, type ProjectServer } from './support/project-servers.js';
import { progress, runScenarios } from './support/scenarios.js';
import { runLoadInChild, type WritePathMode, type WritePathPlan } from './support/write-path-load.js';
import { flushesPerRequest, measure, median, medianRun, othersMean, perRoundRatios, round3, serverCpuPerRequest, statusText, verdict, type Measured } from './support/write-path-measure.js';
import { WRITE_PATH_ROUNDS } from './support/write-path-rounds.js';
import type { BenchRow } from './types.js';

/**
 * Write path (hot-path issue), the peers a user would pick instead, in the
 * same `npm run bench -- write-path` run as write-path.bench.ts:
 * - etcd's own lock (`etcd3` client: `client.lock(key).acquire()` then
 *   `.release()`) against a local etcd whose data is on disk (its WAL fsync
 *   counts, as the project's does), on the same key sets (fresh keys, warm
 *   w0..w999, one hot key) as acquire + release cycles/s, next to the
 *   project's own cycles on the same keys, one after the other;
 * - the project's three-node cluster with REPLICATION_FACTOR=2 on the
 *   fresh-key load (100 connections spread over the three nodes) against one
 *   standalone node, three rounds alternating (target: >= 0.4 of one node);
 *   before it, the same with REPLICATION_FACTOR=1, so that what forwarding
 *   costs and what replication adds read apart, and in the same rounds three
 *   unclustered embedded nodes under the same load: what three node processes
 *   get from this machine's cores at all. Beside each: the node processes'
 *   CPU per acquisition and the disk flushes per acquisition.
 * Every load generator is a child process of its own. BENCH_WRITE_PATH_SECONDS
 * (default 8) per run; BENCH_WRITE_PATH_ETCD_CONCURRENCY (default 32): loops
 * in parallel against etcd (an etcd3 lock is three writes: lease grant, put,
 * lease revoke, each with its own keep-alive stream; at 100 loops a cycle took
 * ~300 ms here, so 32 keeps it a throughput figure rather than a queue).
 */
const AREA = 'write path: peers';
const CONNECTIONS = 100;
const SECONDS = Number(process.env.BENCH_WRITE_PATH_SECONDS ?? 8);
const WARM_UP_SECONDS = Math.min(2, SECONDS);
/**
 * A node process just started needs load, not time, to reach its steady rate,
 * and more of it when it serves a third of the requests: a fresh 3-node
 * cluster ran 1,374, 2,423, 2,852, then 2,847-3,065 acquires/s in rounds of
 * 5 s, one node was steady within 5 s (docs/performance.md, "A fresh cluster
 * takes about 15 s of load"). The one node these rounds compare with has
 * served the earlier scenarios' load for minutes, so the cluster and the three
 * separate nodes get this much load before their first round, and the ratios
 * compare steady rates (BENCH_WRITE_PATH_CLUSTER_WARM_UP_SECONDS).
 */
const CLUSTER_WARM_UP_SECONDS = Number(process.env.BENCH_WRITE_PATH_CLUSTER_WARM_UP_SECONDS ?? 15);
const ETCD_CONCURRENCY = Number(process.env.BENCH_WRITE_PATH_ETCD_CONCURRENCY ?? 32);
const ROUNDS = WRITE_PATH_ROUNDS;
const CLUSTER_TARGET = 0.4;
const BODY = JSON.stringify({ owner_id: 'owner-12345', ttl_seconds: 30 });
/** The cluster and its single-node reference run with the same partition count. */
const PARTITIONS = '32';

let planCount = 0;
function plan(urls: string[], token: string, mode: WritePathMode, duration_s: number): WritePathPlan {
  return { target: 'lock', mode, urls, token, connections: mode === 'hot' ? 1 : CONNECTIONS, duration_s, prefix: `q${planCount++}-`, body: BODY };
}

async function etcdLocks(etcd: EtcdProcess, mode: EtcdLockPlan['mode']): Promise<{ result: EtcdLockResult; others: string }> {
  let stopMeter: ReturnType<typeof startCpuMeter> | undefined;
  let generatorSeconds = 0;
  const result = await runEtcdLocksInChild(
    { endpoints: etcd.endpoints, mode, concurrency: ETCD_CONCURRENCY, duration_s: SECONDS, prefix: `bench-lock/${planCount++}-` },
    (pid) => (stopMeter = startCpuMeter([etcd.child.pid ?? 0, pid])),
    (done) => (generatorSeconds = done.cpu_seconds),
  );
  return { result, others: othersMean([{ cpu: stopMeter?.(generatorSeconds) }]) };
}

/** `count` embedded nodes of their own; if one fails to start, the others are stopped. */
async function startSeparateNodes(count: number): Promise<ProjectServer[]> {
  const started = await Promise.allSettled(Array.from({ length: count }, () => startProjectServer({ PARTITIONS })));
  const nodes = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw failed.reason;
  }
  return nodes;
}

export async function run(): Promise<BenchRow[]> {
  let single: Promise<ProjectServer> | undefined;
  let lockEtcd: { etcd: EtcdProcess; dir: string } | undefined;
  let cluster: Promise<ProjectCluster> | undefined;
  let unclusteredNodes: Promise<ProjectServer[]> | undefined;
  const getSingle = () => (single ??= startProjectServer({ PARTITIONS }));
  const load_at_start = loadavg()[0].toFixed(2);
  /** The project's cycles on the etcd key sets, for the ratios. */
  const projectCycles = new Map<string, Measured>();

  const rate = (m: Measured) => (m.result.status['200'] ? Math.round(m.result.status['200'] / m.result.duration_s) : 0);

  /**
   * A cluster of 3 at `replicationFactor` and the one node, ROUNDS rounds each,
   * alternating; the cluster is stopped after. With `unclustered`, three
   * separate embedded nodes (no etcd, no forwarding, each its own users and
   * keys) take part in the rounds too, the same 100 connections spread over
   * them: what three node processes get from this machine's cores at all, the
   * ceiling of a 3-node cluster here (RF 2 also applies every write on a
   * follower, so its own ceiling is lower).
   */
  const clusterVsSingle = async (replicationFactor: number, unclustered = false) => {
    const project = await getSingle();
    const started_ms = performance.now();
    const c = await (cluster = startProjectCluster(3, replicationFactor, { PARTITIONS }));
    // Started inside the try: if they fail to start (startSeparateNodes stops its own), the cluster is stopped
    // here, not left running while the next scenario starts another.
    let separate: ProjectServer[] = [];
    try {
      if (unclustered) separate = await (unclusteredNodes = startSeparateNodes(3));
      progress(`cluster (RF ${replicationFactor}) settled in ${((performance.now() - started_ms) / 1000).toFixed(1)} s`);
      const urls = c.nodes.map((n) => n.url);
      const clusterPids = [...c.nodes.map((n) => n.child.pid), c.etcd.child.pid];
      // Each separate node has its own users: a bearer per url.
      const separateUrls = separate.map((n) => n.server.url);
      const separatePlan = (duration_s: number): WritePathPlan => ({ ...plan(separateUrls, '', 'fresh', duration_s), tokens: separate.map((n) => n.token) });
      await runLoadInChild(plan(urls, c.token, 'fresh', CLUSTER_WARM_UP_SECONDS));
      await runLoadInChild(plan([project.server.url], project.token, 'fresh', WARM_UP_SECONDS));
      if (unclustered) await runLoadInChild(separatePlan(CLUSTER_WARM_UP_SECONDS));
      const runs = { single: [] as Measured[], cluster: [] as Measured[], unclustered: [] as Measured[] };
      const parties = unclustered ? (['single', 'cluster', 'unclustered'] as const) : (['single', 'cluster'] as const);
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 === 0 ? parties : [...parties].reverse();
        for (const which of order) {
          const measured =
            which === 'single'
              ? await measure([project.server.child.pid], plan([project.server.url], project.token, 'fresh', SECONDS))
              : which === 'cluster'
                ? await measure(clusterPids, plan(urls, c.token, 'fresh', SECONDS))
                : await measure(separate.map((n) => n.server.child.pid), separatePlan(SECONDS));
          if ((measured.result.status['200'] ?? 0) === 0) throw new Error(`${which}: no 200 answer: ${statusText(measured.result)}`);
          progress(`RF ${replicationFactor} round ${round + 1}: ${which} ${measured.result.requests_per_s} req/s (${statusText(measured.result)})`);
          runs[which].push(measured);
        }
      }
      return runs;
    } finally {
      cluster = undefined;
      unclusteredNodes = undefined;
      await Promise.all([c.stop(), ...separate.map((n) => n.stop())]);
    }
  };

  /**
   * Where the cluster's rate goes: the node processes' CPU per acquisition
   * (all of them, etcd included) and the disk flushes per acquisition, against
   * the one node's in the same rounds.
   */
  const costRows = (label: string, runs: { single: Measured[]; cluster: Measured[] }): BenchRow[] => {
    const medianOf = (list: Measured[], f: (m: Measured) => number | undefined) => {
      const values = list.map(f).filter((v): v is number => v !== undefined);
      return values.length === 0 ? undefined : median(values);
    };
    const rows: BenchRow[] = [];
    const cpu = { single: medianOf(runs.single, serverCpuPerRequest), cluster: medianOf(runs.cluster, serverCpuPerRequest) };
    if (cpu.single !== undefined && cpu.cluster !== undefined) {
      rows.push({
        area: AREA,
        scenario: `fresh keys: ${label}: server CPU per acquisition`,
        value: cpu.cluster,
        unit: 'µs',
        note: `all node processes and etcd, all threads; one node in the same rounds: ${cpu.single} µs (${round3(cpu.cluster / cpu.single)}x); rounds: ${runs.cluster.map(serverCpuPerRequest).join(', ')} vs ${runs.single.map(serverCpuPerRequest).join(', ')}`,
      });
    }
    const flushes = { single: medianOf(runs.single, flushesPerRequest), cluster: medianOf(runs.cluster, flushesPerRequest) };
    if (flushes.single !== undefined && flushes.cluster !== undefined) {
      const perSecond = (list: Measured[]) => list.map((m) => Math.round((m.flushes ?? 0) / m.result.duration_s)).join(', ');
      rows.push({
        area: AREA,
        scenario: `fresh keys: ${label}: disk flushes per acquisition`,
        value: flushes.cluster,
        unit: 'flushes',
        note: `fsyncs reaching the disk (/proc/diskstats), machine-wide; one node in the same rounds: ${flushes.single}; flushes/s: ${perSecond(runs.cluster)} vs ${perSecond(runs.single)}`,
      });
    }
    return rows;
  };

  try {
    return await runScenarios(AREA, [
      {
        name: 'etcd lock vs project lock: fresh, warm 1,000 keys, hot key',
        async run() {
          const dir = mkdtempSync(join(tmpdir(), 'bench-write-path-lock-etcd-'));
          lockEtcd = { etcd: await spawnEtcd({ dataDir: dir, name: 'bench-lock' }), dir };
          const project = await getSingle();
          await runLoadInChild(plan([project.server.url], project.token, 'warm', WARM_UP_SECONDS));
          const rows: BenchRow[] = [];
          const labels = { fresh: 'fresh keys', warm: 'warm 1,000 keys', hot: 'hot key (1 loop)' } as const;
          for (const mode of ['fresh', 'warm', 'hot'] as const) {
            const etcd = await etcdLocks(lockEtcd.etcd, mode);
            // The project on the same key set, as cycles: fresh keys (never used before) acquired and released once each.
            const base = plan([project.server.url], project.token, mode === 'fresh' ? 'warm' : mode, SECONDS);
            const ours = await measure([project.server.child.pid], mode === 'fresh' ? { ...base, warmKeys: Number.MAX_SAFE_INTEGER, warmPrefix: `${base.prefix}c` } : base);
            projectCycles.set(mode, ours);
            const e = etcd.result;
            progress(`${labels[mode]}: etcd ${e.cycles_per_s} cycles/s (p50 ${e.cycle_p50_ms} ms), project ${ours.result.cycles_per_s} cycles/s`);
            if (e.cycles === 0) throw new Error(`etcd lock ${mode}: no cycle completed`);
            const ratio = round3(ours.result.cycles_per_s / e.cycles_per_s);
            rows.push(
              {
                area: AREA,
                scenario: `etcd3 Lock, ${labels[mode]}: acquire+release`,
                value: e.cycles_per_s,
                unit: 'cycles/s',
                note: `${e.concurrency === 1 ? 'one loop' : `${e.concurrency} loops in parallel`}; cycle p50 ${e.cycle_p50_ms} ms, p99 ${e.cycle_p99_ms} ms; ${e.refused} acquires refused (key held); etcd 3.4 WAL on disk${etcd.others}`,
              },
              {
                area: AREA,
                scenario: `project lock, ${labels[mode]}: acquire+release`,
                value: ours.result.cycles_per_s,
                unit: 'cycles/s',
                note: `${mode === 'hot' ? '1 connection, one owner' : `${CONNECTIONS} connections`}; ${mode === 'hot' ? `cycle p50 ${ours.result.cycle_p50_ms} ms, p99 ${ours.result.cycle_p99_ms} ms` : `request p50 ${ours.result.latency_p50_ms} ms, p99 ${ours.result.latency_p99_ms} ms`}; ${statusText(ours.result)}; project / etcd ${ratio}x${othersMean([ours])}`,
              },
            );
          }
          await lockEtcd.etcd.stop();
          rmSync(lockEtcd.dir, { recursive: true, force: true });
          lockEtcd = undefined;
          return rows;
        },
      },
      {
        name: '3-node cluster, REPLICATION_FACTOR=1 (forwarding only), vs one node: fresh keys',
        async run() {
          const runs = await clusterVsSingle(1, true);
          const rates = { single: median(runs.single.map(rate)), cluster: median(runs.cluster.map(rate)), unclustered: median(runs.unclustered.map(rate)) };
          const cpu = (list: Measured[]) => list.map(serverCpuPerRequest).join(', ');
          return [
            {
              area: AREA,
              scenario: 'fresh keys: 3 unclustered nodes, the same load (acquires)',
              value: rates.unclustered,
              unit: 'acquires/s',
              note: `three separate embedded nodes (no etcd, no forwarding), ${CONNECTIONS} connections spread over them; median of ${runs.unclustered.map(rate).join(', ')}; one node in the same rounds: ${runs.single.map(rate).join(', ')}; ratio ${round3(rates.unclustered / rates.single)}: what 3 node processes get from this machine, the ceiling of a 3-node cluster here (RF 2 also applies every write on a follower: lower); CPU per acquisition, µs: ${cpu(runs.unclustered)} vs ${cpu(runs.single)}`,
            },
            {
              area: AREA,
              scenario: 'fresh keys: project, 3 nodes, REPLICATION_FACTOR=1 (acquires)',
              value: rates.cluster,
              unit: 'acquires/s',
              note: `median of ${runs.cluster.map(rate).join(', ')}; one node in the same rounds: ${runs.single.map(rate).join(', ')}; ratio ${round3(rates.cluster / rates.single)} (no target: what forwarding alone costs, two requests in three go to a node that does not lead their key)${othersMean(runs.cluster)}`,
            },
            ...costRows('3 nodes, REPLICATION_FACTOR=1', runs),
          ];
        },
      },
      {
        name: '3-node cluster, REPLICATION_FACTOR=2, vs one node: fresh keys',
        async run() {
          const runs = await clusterVsSingle(2);
          const one = median(runs.single.map(rate));
          const three = median(runs.cluster.map(rate));
          const ratio = round3(three / one);
          const mid = (list: Measured[]) => medianRun(list, rate).result;
          return [
            {
              area: AREA,
              scenario: 'fresh keys: project, one node (acquires)',
              value: one,
              unit: 'acquires/s',
              note: `median of ${runs.single.map(rate).join(', ')}; p50 ${mid(runs.single).latency_p50_ms} ms, p99 ${mid(runs.single).latency_p99_ms} ms; PARTITIONS=${PARTITIONS}${othersMean(runs.single)}`,
            },
            {
              area: AREA,
              scenario: 'fresh keys: project, 3 nodes, REPLICATION_FACTOR=2 (acquires)',
              value: three,
              unit: 'acquires/s',
              note: `median of ${runs.cluster.map(rate).join(', ')}; ${CONNECTIONS} connections spread over the 3 nodes; highest node p50 ${mid(runs.cluster).latency_p50_ms} ms, p99 ${mid(runs.cluster).latency_p99_ms} ms; ${statusText(mid(runs.cluster))}; etcd in /dev/shm${othersMean(runs.cluster)}`,
            },
            {
              area: AREA,
              scenario: 'fresh keys: 3 nodes RF 2 / one node',
              value: ratio,
              unit: 'ratio',
              note: `${three} / ${one} acquires/s (medians, alternating rounds); ${perRoundRatios(runs.cluster.map(rate), runs.single.map(rate))}; all 4 node processes share this machine's cores; target >= ${CLUSTER_TARGET}: ${verdict(ratio >= CLUSTER_TARGET)}`,
            },
            ...costRows('3 nodes, REPLICATION_FACTOR=2', runs),
          ];
        },
      },
    ]).then((rows) => [
      ...rows,
      { area: AREA, scenario: 'machine: 1-min load average at start / end', value: Number(loadavg()[0].toFixed(2)), unit: 'load', note: `at start ${load_at_start}; ${SECONDS} s per run` },
    ]);
  } finally {
    const [s, c, u] = await Promise.all([single?.catch(() => undefined), cluster?.catch(() => undefined), unclusteredNodes?.catch(() => undefined)]);
    await Promise.all([s?.stop(), c?.stop(), ...(u ?? []).map((n) => n.stop())]);
    if (lockEtcd) {
      await lockEtcd.etcd.stop();
      rmSync(lockEtcd.dir, { recursive: true, force: true });
    }
  }
}
