import { existsSync } from 'node:fs';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertEtcdInstalled } from '../../cluster/etcd-process.js';
import { startCluster, waitClusterSettled, waitReady, type ClusterHandle } from '../helpers/cluster.js';
import { startEtcd, type TestEtcd } from '../helpers/etcd.js';

describe('test etcd harness', () => {
  let etcd: TestEtcd;
  let client: Etcd3;
  beforeAll(async () => {
    etcd = await startEtcd();
    client = new Etcd3({ hosts: etcd.endpoints });
  }, 20_000);
  afterAll(async () => {
    client?.close();
    await etcd?.stop();
  });

  it('starts a healthy private etcd on loopback that stores and reads keys', async () => {
    expect(etcd.endpoints).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const health = await fetch(`${etcd.endpoints}/health`);
    expect(await health.json()).toMatchObject({ health: 'true' });
    await client.put('/harness/a').value(JSON.stringify({ n: 1 }));
    expect(await client.get('/harness/a').json()).toEqual({ n: 1 });
    await client.put('/harness/b').value('two');
    expect(await client.getAll().prefix('/harness/').strings()).toEqual({ '/harness/a': '{"n":1}', '/harness/b': 'two' });
  });

  it('stops: etcd exits, its port no longer answers, its data directory is removed', async () => {
    const second = await startEtcd();
    expect(second.endpoints).not.toBe(etcd.endpoints);
    expect(existsSync(second.dataDir)).toBe(true);
    await second.stop();
    expect(existsSync(second.dataDir)).toBe(false);
    await expect(fetch(`${second.endpoints}/health`, { signal: AbortSignal.timeout(1_000) })).rejects.toThrow();
    await second.stop(); // idempotent
  });

  it('a missing etcd binary is an error that says how to install it (tests fail, they are not skipped)', () => {
    expect(() => assertEtcdInstalled('/nonexistent/bin/etcd')).toThrow(/apt-get install etcd-server/);
    expect(() => assertEtcdInstalled()).not.toThrow();
  });
});

describe('test cluster harness', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startCluster({ nodes: 2, replicationFactor: 2, partitions: 4, leaseTtlSeconds: 2 });
  }, 60_000);
  afterAll(async ({}, suite) => cluster?.stop(suite));

  it('starts settled nodes n1, n2 on their own ports; SIGKILL, restart on the same ports and data; stop cleans up', async () => {
    expect(cluster.nodes.map((n) => n.nodeId)).toEqual(['n1', 'n2']);
    expect(new Set(cluster.nodes.flatMap((n) => [n.port, n.grpcPort])).size).toBe(4);
    const [n1, n2] = cluster.nodes;
    const status = (await (await fetch(`${n1.url}/cluster/status`)).json()) as { members: { node_id: string }[]; partitions: { leader: string }[] };
    expect(status.members.map((m) => m.node_id).sort()).toEqual(['n1', 'n2']);
    expect(status.partitions).toHaveLength(4);

    const pid = n2.pid;
    await n2.kill('SIGKILL');
    expect(n2.alive).toBe(false);
    expect(n2.running).toBe(false);
    // The survivor takes every partition once n2's lease expires. Usually within 5 s; the bound is generous
    // because this checks the harness, not recovery time (test/cluster/faults.test.ts measures that), and a
    // loaded 2-core machine once took past 20 s here.
    const settled = await waitClusterSettled(cluster, 45_000);
    expect(settled.leaders).toEqual(['n1', 'n1', 'n1', 'n1']);

    await n2.restart();
    expect(n2.pid).not.toBe(pid);
    expect(n2.alive).toBe(true);
    await waitReady(n2, 30_000);
    const again = await waitClusterSettled(cluster, 30_000);
    expect(again.leaders).toContain('n2');
    expect(n2.output()).toContain('n2 restarted');

    await n1.kill('SIGSTOP');
    expect(n1.paused).toBe(true);
    expect(n1.alive).toBe(false);
    await n1.kill('SIGCONT');
    expect(n1.alive).toBe(true);

    await n1.kill('SIGTERM');
    expect((await n1.waitExit(60_000)).code).toBe(0);
    expect(n1.alive).toBe(false);
  }, 180_000);

  it('stop kills every node and etcd and removes the temp dirs', async () => {
    const dirs = [cluster.etcd.dataDir, ...cluster.nodes.map((n) => n.dataDir)];
    await cluster.stop();
    for (const dir of dirs) expect(existsSync(dir)).toBe(false);
    expect(cluster.nodes.every((n) => !n.running)).toBe(true);
  });
});
