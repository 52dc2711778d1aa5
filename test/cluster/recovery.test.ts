import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionOf } from '../../runtime/index.js';
import { LOCK_KIND, lockActorKey } from '../../actors/locks/messages.js';
import { startCluster, waitClusterSettled, type ClusterHandle } from '../helpers/cluster.js';
import { call, clusterStatus, lockPath, registerUser, sleep } from './support/client.js';

/**
 * Recovery windows, for real (docs/cluster.md, "Recovery"): an etcd outage,
 * and a SIGKILLed leader that comes back. A writer per (partition, entry
 * node) takes a new lock in that partition again and again; the window is
 * how long some partition could not be written through some node.
 */
const PARTITIONS = 16;
const LEASE_TTL_SECONDS = 2;
const NAMESPACE = 'recovery';

interface Attempt {
  partition: number;
  url: string;
  start_ms: number;
  end_ms: number;
  status: number;
}

/** A new lock key in partition p for each call (each write is a new acquire). */
function keySource(tenant: string): (p: number) => string {
  let counter = 0;
  return (p) => {
    for (;;) {
      const key = `k${counter++}`;
      if (partitionOf(LOCK_KIND, lockActorKey(tenant, NAMESPACE, key), PARTITIONS) === p) return key;
    }
  };
}

/** Writers through `urls` to every partition, until stop(); each request bounded by timeout_ms. */
function startWriters(urls: () => string[], token: string, nextKey: (p: number) => string, timeout_ms: number) {
  const attempts: Attempt[] = [];
  let running = true;
  const loops: Promise<void>[] = [];
  for (let p = 0; p < PARTITIONS; p++) {
    for (let entry = 0; entry < urls().length; entry++) {
      loops.push(
        (async () => {
          while (running) {
            const url = urls()[entry];
            if (!url) return;
            const key = nextKey(p);
            const start_ms = performance.now();
            const reply = await call(url, 'POST', lockPath(NAMESPACE, key), token, { owner_id: `w${start_ms}`, ttl_seconds: 2 }, timeout_ms);
            attempts.push({ partition: p, url, start_ms, end_ms: performance.now(), status: reply.status });
            await sleep(25);
          }
        })(),
      );
    }
  }
  return {
    attempts,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** Per (partition, entry node): the first write that succeeded after `from_ms`, as ms after it; the worst of them. */
function writableAgainAfter(attempts: Attempt[], from_ms: number): { worst_ms: number; missing: string[] } {
  const firstOk = new Map<string, number>();
  const seen = new Set<string>();
  for (const a of attempts) {
    const id = `p${a.partition} via ${a.url}`;
    if (a.start_ms < from_ms) continue;
    seen.add(id);
    if (a.status === 200 && !firstOk.has(id)) firstOk.set(id, a.end_ms - from_ms);
  }
  return { worst_ms: Math.max(0, ...firstOk.values()), missing: [...seen].filter((id) => !firstOk.has(id)) };
}

/** Longest stretch without a successful write, per (partition, entry node), within [from_ms, to_ms]. */
function longestGap(attempts: Attempt[], from_ms: number, to_ms: number): { gap_ms: number; where: string } {
  const byId = new Map<string, number[]>();
  for (const a of attempts) {
    if (a.status !== 200 || a.end_ms < from_ms || a.end_ms > to_ms) continue;
    const id = `p${a.partition} via ${a.url}`;
    if (!byId.has(id)) byId.set(id, []);
    byId.get(id)!.push(a.end_ms);
  }
  let worst = { gap_ms: 0, where: '' };
  for (const [id, ends] of byId) {
    ends.sort((x, y) => x - y);
    let last = from_ms;
    for (const end of [...ends, to_ms]) {
      if (end - last > worst.gap_ms) worst = { gap_ms: end - last, where: id };
      last = end;
    }
  }
  return worst;
}

describe('cluster recovery: etcd stopped for 3 s, then back', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startCluster({ nodes: 3, replicationFactor: 2, partitions: PARTITIONS, leaseTtlSeconds: LEASE_TTL_SECONDS });
  }, 60_000);
  afterAll(async ({}, suite) => cluster?.stop(suite));

  it('every partition is writable through every node within 3 s of etcd\'s return', { timeout: 40_000 }, async () => {
    const urls = cluster.nodes.map((n) => n.url);
    const { token, userId } = await registerUser(urls[0], 'outage');
    const writers = startWriters(() => urls, token, keySource(userId), 2_000);
    await sleep(500);
    await cluster.etcd.kill();
    await sleep(3_000);
    await cluster.etcd.restart();
    const returned_ms = performance.now();
    // Wait until every (partition, node) has written again (or 8 s).
    const deadline = returned_ms + 8_000;
    while (performance.now() < deadline && (writableAgainAfter(writers.attempts, returned_ms).missing.length > 0 || performance.now() - returned_ms < 4_000)) await sleep(100);
    await writers.stop();
    const { worst_ms, missing } = writableAgainAfter(writers.attempts, returned_ms);
    const views = await Promise.all(urls.map((u) => clusterStatus(u)));
    console.log(`etcd outage 3 s: every partition writable through every node ${Math.round(worst_ms)} ms after etcd's return (${writers.attempts.length} writes tried)`);
    expect(missing, 'never writable again').toEqual([]);
    expect(worst_ms).toBeLessThanOrEqual(3_000);
    // And every node's view followed etcd again (its /cluster/status is not stale).
    for (const view of views) expect((view as unknown as { view?: { fresh: boolean } })?.view?.fresh).toBe(true);
    await waitClusterSettled(cluster, 10_000);
  });
});

describe('cluster recovery: SIGKILL of a leader, then its restart', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startCluster({ nodes: 3, replicationFactor: 2, partitions: PARTITIONS, leaseTtlSeconds: LEASE_TTL_SECONDS });
  }, 60_000);
  afterAll(async ({}, suite) => cluster?.stop(suite));

  it(`requests through the other nodes wait at most lease TTL + 1 s, at the kill and when it takes partitions back`, { timeout: 40_000 }, async () => {
    const budget_ms = LEASE_TTL_SECONDS * 1000 + 1000;
    const victim = cluster.nodes[0];
    const others = cluster.nodes.filter((n) => n !== victim).map((n) => n.url);
    const status = await clusterStatus(others[0]);
    expect(status!.partitions.some((p) => p.leader === victim.nodeId)).toBe(true);
    const { token, userId } = await registerUser(others[0], 'restarted');
    const writers = startWriters(() => others, token, keySource(userId), 10_000);
    await sleep(500);
    const killed_ms = performance.now();
    await victim.kill('SIGKILL');
    await sleep(budget_ms + 500);
    const restart_ms = performance.now();
    await victim.restart();
    // Let it rejoin and take its partitions back (handoffs), writes going on meanwhile.
    const settleDeadline = performance.now() + 12_000;
    let back = false;
    while (!back && performance.now() < settleDeadline) {
      await sleep(200);
      const view = await clusterStatus(others[0]);
      back = view?.partitions.filter((p) => p.leader === victim.nodeId).length === status!.partitions.filter((p) => p.leader === victim.nodeId).length;
    }
    await sleep(1_000);
    const end_ms = performance.now();
    await writers.stop();
    const afterKill = writableAgainAfter(writers.attempts, killed_ms);
    const killGap = longestGap(writers.attempts, killed_ms, restart_ms);
    const restartGap = longestGap(writers.attempts, restart_ms, end_ms);
    const slowest = Math.max(...writers.attempts.filter((a) => a.start_ms >= killed_ms).map((a) => a.end_ms - a.start_ms));
    console.log(
      `SIGKILL of a leader: writable again through the other nodes ${Math.round(afterKill.worst_ms)} ms after the kill (longest gap ${Math.round(killGap.gap_ms)} ms, ${killGap.where}); ` +
        `after its restart and hand-back: longest gap ${Math.round(restartGap.gap_ms)} ms (${restartGap.where}); slowest request ${Math.round(slowest)} ms; ` +
        `partitions back on it: ${back}; ${writers.attempts.length} writes tried`,
    );
    expect(afterKill.missing).toEqual([]);
    expect(killGap.gap_ms).toBeLessThanOrEqual(budget_ms);
    expect(restartGap.gap_ms).toBeLessThanOrEqual(budget_ms);
    expect(slowest).toBeLessThanOrEqual(budget_ms);
    expect(back).toBe(true);
  });
});
