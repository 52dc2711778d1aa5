import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type StatusReport } from '../../cluster/cli.js';
import { clusterKeys, type IsrRecord, type LeaderRecord, type MemberRecord, type NodeStatus } from '../../cluster/etcd-keys.js';
import { replicaSet } from '../../cluster/placement.js';
import { startEtcd, type TestEtcd } from '../helpers/etcd.js';

/**
 * The operator CLI against a real etcd holding records written by the test
 * (the nodes' side is played by the test: it moves leader keys as a node would).
 */
const PARTITIONS = 8;

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  const progress: { line: string; final: boolean }[] = [];
  return {
    io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l), progress: (line: string, _done: number, final: boolean) => progress.push({ line, final }) },
    out,
    err,
    progress,
    text: () => out.join('\n'),
    errors: () => err.join('\n'),
  };
}

describe('cluster CLI', () => {
  let etcd: TestEtcd;
  let client: Etcd3;
  let env: NodeJS.ProcessEnv;
  const keys = clusterKeys('/cli-test/');
  const member = (id: string, draining = false): MemberRecord => ({
    node_id: id,
    http_url: `http://127.0.0.1:80${id.slice(1)}`,
    grpc_address: `127.0.0.1:90${id.slice(1)}`,
    started_at: '2026-01-01T00:00:00.000Z',
    draining,
  });
  const setLeader = (p: number, node: string) => client.put(keys.leader(p)).value(JSON.stringify({ node_id: node, grpc_address: `127.0.0.1:90${node.slice(1)}` } satisfies LeaderRecord));
  const setIsr = (p: number, replicas: string[]) => client.put(keys.isr(p)).value(JSON.stringify({ epoch: 1, leader: replicas[0], replicas } satisfies IsrRecord));
  const run = (argv: string[], extraEnv: NodeJS.ProcessEnv = {}) => {
    const c = capture();
    return runCli(argv, { ...env, ...extraEnv }, c.io, { poll_ms: 50 }).then((code) => ({ code, ...c }));
  };

  beforeAll(async () => {
    etcd = await startEtcd();
    client = new Etcd3({ hosts: etcd.endpoints });
    env = { ETCD_ENDPOINTS: etcd.endpoints, CLUSTER_PREFIX: '/cli-test/' };
  }, 20_000);
  afterAll(async () => {
    client?.close();
    await etcd?.stop();
  });

  it('usage errors exit 2, --help exits 0', async () => {
    expect((await run(['status'], { ETCD_ENDPOINTS: '' })).code).toBe(2);
    expect((await run([])).code).toBe(2);
    const unknown = await run(['explode']);
    expect(unknown.code).toBe(2);
    expect(unknown.errors()).toContain('unknown command explode');
    expect((await run(['drain'])).code).toBe(2);
    expect((await run(['drain', 'n1', '--timeout', 'soon'])).code).toBe(2);
    expect((await run(['status', '--verbose'])).code).toBe(2);
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    expect(help.text()).toContain('rebalance');
  });

  it('status of a prefix with no cluster fails with exit 1', async () => {
    const result = await run(['status']);
    expect(result.code).toBe(1);
    expect(result.errors()).toContain('no cluster under /cli-test/');
  });

  it('status: members, partitions led and followed, replication lag, leaderless partitions flagged', async () => {
    await client.put(keys.config).value(JSON.stringify({ partitions: PARTITIONS, replication_factor: 2, created_at: '2026-01-01T00:00:00.000Z' }));
    for (const id of ['n1', 'n2', 'n3']) await client.put(keys.member(id)).value(JSON.stringify(member(id)));
    // n1 leads 0-3, n2 leads 4-5, n3 leads 6; partition 7 has no leader.
    const leaders = ['n1', 'n1', 'n1', 'n1', 'n2', 'n2', 'n3'];
    for (let p = 0; p < leaders.length; p++) {
      await setLeader(p, leaders[p]);
      await setIsr(p, [leaders[p], leaders[p] === 'n1' ? 'n2' : 'n1']);
    }
    await setIsr(7, ['n3', 'n1']);
    const status: NodeStatus = { node_id: 'n1', at: '2026-01-01T00:00:02.000Z', leading: [0, 1, 2, 3], lag: { '0': { n2: 3 }, '1': { n2: 0 }, '2': { n2: 7 } }, followers: {}, forwarded_total: 0 };
    await client.put(keys.status('n1')).value(JSON.stringify(status));

    const json = await run(['status', '--json']);
    expect(json.code).toBe(1); // a partition without a leader
    const report = JSON.parse(json.text()) as StatusReport;
    expect(report.partitions).toBe(PARTITIONS);
    expect(report.leaderless).toEqual([7]);
    const byId = Object.fromEntries(report.members.map((m) => [m.node_id, m]));
    expect(byId.n1).toMatchObject({ leads: 4, follows: 3, lag_max: 7, lag_sum: 10, draining: false, http_url: 'http://127.0.0.1:801' });
    expect(byId.n2).toMatchObject({ leads: 2, follows: 4, lag_max: null, lag_sum: null });
    expect(byId.n3).toMatchObject({ leads: 1, follows: 0 });
    const leaderKey = await client.get(keys.leader(4)).exec();
    expect(report.partition_table[4]).toMatchObject({ partition: 4, leader: 'n2', epoch: Number(leaderKey.kvs[0].create_revision), isr: ['n2', 'n1'] });
    expect(report.partition_table[7]).toMatchObject({ leader: null, epoch: null });
    for (const row of report.partition_table) expect(row.preferred).toBe(replicaSet(row.partition, ['n1', 'n2', 'n3'], 2)[0]);

    const human = await run(['status']);
    expect(human.code).toBe(1);
    expect(human.text()).toMatch(/n1\s+http:\/\/127\.0\.0\.1:801\s+127\.0\.0\.1:901\s+serving\s+4\s+3\s+7\s+10/);
    expect(human.text()).toContain('WARNING: 1 partition(s) without a leader: 7');
    expect(human.text()).not.toContain('PARTITION');
    const table = await run(['status', '--partitions']);
    expect(table.text()).toContain('PARTITION');
    expect(table.text()).toMatch(/\n7\s+NONE \(!\)\s+-\s+n3,n1/);

    await setLeader(7, 'n3');
    expect((await run(['status'])).code).toBe(0);
  });

  it('drain: writes the request, reports progress, succeeds once the node leads nothing; times out otherwise', async () => {
    const unknown = await run(['drain', 'n9']);
    expect(unknown.code).toBe(1);
    expect(unknown.errors()).toContain('n9 is not a member');

    const timedOut = await run(['drain', 'n3', '--timeout', '0.3']);
    expect(timedOut.code).toBe(1);
    expect(timedOut.text()).toContain('n3 leads 2 partitions...');
    expect(timedOut.errors()).toContain('timeout');

    const draining = run(['drain', 'n2', '--timeout', '10']);
    // Play n2: once the request is there, hand its partitions to n1 one by one.
    for (let i = 0; i < 100 && (await client.get(keys.drain('n2')).string()) === null; i++) await new Promise((r) => setTimeout(r, 20));
    expect(JSON.parse((await client.get(keys.drain('n2')).string())!)).toHaveProperty('requested_at');
    await new Promise((r) => setTimeout(r, 150));
    await setLeader(4, 'n1');
    await new Promise((r) => setTimeout(r, 150));
    // A handoff in progress: n2 released partition 5, nobody holds it yet. The drain is not over.
    await client.delete().key(keys.leader(5));
    await new Promise((r) => setTimeout(r, 150));
    await setLeader(5, 'n3');
    const result = await draining;
    expect(result.code).toBe(0);
    expect(result.text()).toContain('n2 leads 2 partitions...');
    expect(result.text()).toContain('n2 leads 1 partition...');
    expect(result.text()).toContain('n2 leads no partition; 1 partition(s) waiting for a new leader: 5...');
    expect(result.text()).toContain('n2 leads no partition: drained');
    // Progress (stderr in a terminal): partitions moved out of those n2 led when asked, with the time left.
    const lines = result.progress.map((p) => p.line);
    expect(lines[0]).toBe('drain n2: 0/2 partitions moved (0%), time left unknown until one moves');
    expect(lines).toContainEqual(expect.stringMatching(/^drain n2: 1\/2 partitions moved \(50%\), about [\d.]+ (ms|s) left$/));
    expect(result.progress.at(-1)).toEqual({ line: 'drain n2: 2/2 partitions moved (100%), done', final: true });
  });

  it('rebalance: writes the request, waits until every partition is led by its preferred node', async () => {
    await client.delete().key(keys.drain('n2'));
    await client.delete().key(keys.drain('n3'));
    const nodes = ['n1', 'n2', 'n3'];
    // Make sure at least one partition is misplaced.
    const preferred = Array.from({ length: PARTITIONS }, (_, p) => replicaSet(p, nodes, 2)[0]);
    await setLeader(0, nodes.find((n) => n !== preferred[0])!);

    const timedOut = await run(['rebalance', '--timeout', '0.3']);
    expect(timedOut.code).toBe(1);
    expect(timedOut.text()).toMatch(/\d+ of 8 partitions not on their preferred node\.\.\./);

    const rebalancing = run(['rebalance', '--timeout', '10']);
    for (let i = 0; i < 100 && (await client.get(keys.rebalance).string()) === null; i++) await new Promise((r) => setTimeout(r, 20));
    for (let p = 0; p < PARTITIONS; p++) await setLeader(p, preferred[p]);
    const result = await rebalancing;
    expect(result.code).toBe(0);
    expect(result.text()).toContain('every partition is led by its preferred node');
    expect(result.progress.at(-1)).toEqual({ line: expect.stringMatching(/^rebalance: (\d+)\/\1 partitions moved \(100%\), done$/), final: true });

    // A draining member is not a placement candidate.
    await client.put(keys.member('n1')).value(JSON.stringify(member('n1', true)));
    const report = JSON.parse((await run(['status', '--json'])).text()) as StatusReport;
    for (const row of report.partition_table) expect(row.preferred).toBe(replicaSet(row.partition, ['n2', 'n3'], 2)[0]);
    expect(report.members.find((m) => m.node_id === 'n1')!.draining).toBe(true);
  });

  it('an unreachable etcd is a failure (exit 1), not a hang', async () => {
    const result = await run(['status'], { ETCD_ENDPOINTS: 'http://127.0.0.1:1' });
    expect(result.code).toBe(1);
    expect(result.errors()).toContain('failed');
  }, 20_000);
});
