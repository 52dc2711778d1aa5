import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { replicaSet } from '../../cluster/placement.js';
import { startEtcd, type TestEtcd } from './etcd.js';
import { freePort, startServerProcess, type ProcessExit, type ServerProcess } from './process.js';

/**
 * A real cluster for the cluster tests: a private etcd (test/helpers/etcd.ts)
 * and N node processes (`node dist/http/server.js`, as `npm start` runs it) on
 * loopback, each with its own temporary DATA_DIR, HTTP and gRPC ports. Build
 * dist/ first (npm test does; or `npx tsc -p tsconfig.json`).
 *
 * Node output is kept in a buffer: errors thrown by waitReady and
 * waitClusterSettled carry the tail of every node's output, and
 * `afterAll(({}, suite) => cluster?.stop(suite))` prints it all when a test of the
 * suite failed (or always with CLUSTER_TEST_OUTPUT=1).
 */

export type NodeSignal = 'SIGKILL' | 'SIGTERM' | 'SIGSTOP' | 'SIGCONT';

export interface ClusterNodeProcess {
  nodeId: string;
  /** http://127.0.0.1:<port> */
  url: string;
  port: number;
  grpcPort: number;
  dataDir: string;
  /** The process is running and not paused (SIGSTOP): it answers requests. */
  readonly alive: boolean;
  /** The process is running (paused or not). */
  readonly running: boolean;
  /** Stopped with SIGSTOP and not continued yet. */
  readonly paused: boolean;
  readonly pid: number | undefined;
  /**
   * Sends the signal. SIGKILL also waits for the exit; SIGTERM does not (the
   * node drains first; use waitExit()). SIGSTOP/SIGCONT pause and resume it.
   */
  kill(signal: NodeSignal): Promise<void>;
  /** Resolves with the exit of the current process (rejects after timeout_ms, default 60 s). */
  waitExit(timeout_ms?: number): Promise<ProcessExit>;
  /** Starts the node again, same NODE_ID, data dir and ports (it must have exited). Resolves once GET /health answers. */
  restart(): Promise<void>;
  /** Every line this node wrote, across restarts (the last 256 KiB). */
  output(): string;
  printOutput(): void;
}

export interface StartClusterOptions {
  nodes?: number;
  replicationFactor?: number;
  partitions?: number;
  leaseTtlSeconds?: number;
  /** Extra environment for every node (e.g. REPLICATION_TIMEOUT_MS). */
  env?: Record<string, string>;
  /** Wait for every node to be ready and the cluster settled (default true). */
  waitSettled?: boolean;
  /** Timeout of that wait (default 45 s). */
  settleTimeout_ms?: number;
}

export interface ClusterHandle {
  etcd: TestEtcd;
  nodes: ClusterNodeProcess[];
  partitions: number;
  replicationFactor: number;
  prefix: string;
  /** The bootstrap admin every node is started with. */
  adminEmail: string;
  adminPassword: string;
  /** Starts one more node (n<k+1>) and resolves once it answers GET /health (not necessarily ready: see waitReady). */
  addNode(env?: Record<string, string>): Promise<ClusterNodeProcess>;
  /** Every node's output, for a failure message. */
  output(): string;
  printOutput(): void;
  /** SIGKILLs every node and etcd, removes every temp dir. Prints the nodes' output when the given suite has a failed test. */
  stop(suite?: SuiteLike): Promise<void>;
}

/** What stop() looks at in the suite vitest passes to afterAll. */
export interface SuiteLike {
  result?: { state?: string };
  tasks?: readonly SuiteLike[];
}

const ADMIN_EMAIL = 'admin@example.com';
const ADMIN_PASSWORD = 'cluster admin password';
const NODE_OUTPUT_MAX = 256 * 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every node process this helper started: SIGKILLed if the test process exits without stopping them. */
const allNodes = new Set<NodeHandle>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const node of allNodes) node.killNow();
  });
}

function failed(suite: SuiteLike | undefined): boolean {
  if (!suite) return false;
  if (suite.result?.state === 'fail') return true;
  return (suite.tasks ?? []).some((t) => failed(t));
}

class NodeHandle implements ClusterNodeProcess {
  readonly url: string;
  private process?: ServerProcess;
  private history = '';
  private pausedNow = false;
  private exitedNow = true;

  constructor(
    readonly nodeId: string,
    readonly port: number,
    readonly grpcPort: number,
    readonly dataDir: string,
    private readonly env: Record<string, string>,
  ) {
    this.url = `http://127.0.0.1:${port}`;
  }

  get running(): boolean {
    return this.process !== undefined && !this.exitedNow;
  }

  get alive(): boolean {
    return this.running && !this.pausedNow;
  }

  get paused(): boolean {
    return this.running && this.pausedNow;
  }

  get pid(): number | undefined {
    return this.process?.pid;
  }

  async start(): Promise<void> {
    if (this.running) throw new Error(`${this.nodeId} is still running`);
    if (this.process) this.history = (this.history + this.process.output() + `\n--- ${this.nodeId} restarted ---\n`).slice(-NODE_OUTPUT_MAX);
    this.pausedNow = false;
    this.exitedNow = false;
    try {
      this.process = await startServerProcess({ dataDir: this.dataDir, port: this.port, env: this.env, startTimeout_ms: 30_000 });
    } catch (error) {
      this.exitedNow = true;
      this.history = (this.history + `\n${this.nodeId} failed to start: ${String(error)}\n`).slice(-NODE_OUTPUT_MAX);
      throw error;
    }
    const current = this.process;
    void current.exited.then(() => {
      if (this.process === current) this.exitedNow = true;
    });
  }

  async kill(signal: NodeSignal): Promise<void> {
    const child = this.process?.child;
    if (!child || !this.running) {
      if (signal === 'SIGKILL' || signal === 'SIGTERM') return;
      throw new Error(`${this.nodeId} is not running`);
    }
    child.kill(signal);
    if (signal === 'SIGSTOP') this.pausedNow = true;
    else if (signal === 'SIGCONT') this.pausedNow = false;
    else if (signal === 'SIGKILL') {
      await this.process!.exited;
      this.exitedNow = true;
      this.pausedNow = false;
    } else if (this.pausedNow) {
      // A paused process would never handle SIGTERM.
      child.kill('SIGCONT');
      this.pausedNow = false;
    }
  }

  async waitExit(timeout_ms = 60_000): Promise<ProcessExit> {
    if (!this.process) throw new Error(`${this.nodeId} was never started`);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${this.nodeId} did not exit within ${timeout_ms} ms:\n${tail(this.output())}`)), timeout_ms);
    });
    try {
      const exit = await Promise.race([this.process.exited, timeout]);
      this.exitedNow = true;
      this.pausedNow = false;
      return exit;
    } finally {
      clearTimeout(timer);
    }
  }

  async restart(): Promise<void> {
    if (this.running) throw new Error(`${this.nodeId} is still running: kill it first`);
    await this.start();
  }

  output(): string {
    return (this.history + (this.process?.output() ?? '')).slice(-NODE_OUTPUT_MAX);
  }

  printOutput(): void {
    const text = this.output();
    console.log(`----- ${this.nodeId} (${this.url}) output -----\n${text === '' ? '(none)\n' : text}----- end of ${this.nodeId} -----`);
  }

  /** Synchronous SIGKILL, for the process 'exit' hook. */
  killNow(): void {
    if (!this.running) return;
    try {
      this.process!.child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }

  async forceStop(): Promise<void> {
    if (!this.process) return;
    if (this.running) {
      try {
        this.process.child.kill('SIGKILL');
      } catch {
        // Already gone.
      }
    }
    await this.process.exited;
    this.exitedNow = true;
    this.pausedNow = false;
  }
}

function tail(text: string, chars = 4000): string {
  return text.length > chars ? `...${text.slice(-chars)}` : text;
}

export async function startCluster(options: StartClusterOptions = {}): Promise<ClusterHandle> {
  const count = options.nodes ?? 3;
  const replicationFactor = options.replicationFactor ?? 2;
  const partitions = options.partitions ?? 16;
  const leaseTtlSeconds = options.leaseTtlSeconds ?? 2;
  const prefix = '/platform/';
  const etcd = await startEtcd();
  const root = mkdtempSync(join(tmpdir(), 'cluster-test-'));
  const nodes: NodeHandle[] = [];
  const usedPorts = new Set<number>();
  const port = async () => {
    for (;;) {
      const p = await freePort();
      if (!usedPorts.has(p)) {
        usedPorts.add(p);
        return p;
      }
    }
  };

  const create = async (extraEnv?: Record<string, string>): Promise<NodeHandle> => {
    const nodeId = `n${nodes.length + 1}`;
    const httpPort = await port();
    const grpcPort = await port();
    const env: Record<string, string> = {
      ETCD_ENDPOINTS: etcd.endpoints,
      NODE_ID: nodeId,
      GRPC_PORT: String(grpcPort),
      ADVERTISE_HOST: '127.0.0.1',
      PARTITIONS: String(partitions),
      REPLICATION_FACTOR: String(replicationFactor),
      LEASE_TTL_SECONDS: String(leaseTtlSeconds),
      CLUSTER_PREFIX: prefix,
      ADMIN_EMAIL,
      ADMIN_PASSWORD,
      LOG_LEVEL: 'warn',
      PASSWORD_KDF_COST: '10',
      // Off: tests register many users from 127.0.0.1 (the throttle has its own tests).
      REGISTRATIONS_PER_ADDRESS_MAX: '0',
      // A default rate-limit tier no test load reaches (the limiter still counts every request).
      RATE_LIMITS_DEFAULT_MAX_REQUESTS: '1000000000',
      ...options.env,
      ...extraEnv,
    };
    const node = new NodeHandle(nodeId, httpPort, grpcPort, join(root, nodeId), env);
    nodes.push(node);
    allNodes.add(node);
    installExitHook();
    return node;
  };

  let stopped = false;
  const handle: ClusterHandle = {
    etcd,
    nodes,
    partitions,
    replicationFactor,
    prefix,
    adminEmail: ADMIN_EMAIL,
    adminPassword: ADMIN_PASSWORD,
    async addNode(env) {
      const node = await create(env);
      await node.start();
      return node;
    },
    output() {
      return nodes.map((n) => `----- ${n.nodeId} -----\n${n.output()}`).join('\n');
    },
    printOutput() {
      for (const node of nodes) node.printOutput();
      const etcdOutput = etcd.output();
      if (etcdOutput !== '') console.log(`----- etcd output -----\n${etcdOutput}----- end of etcd -----`);
    },
    async stop(suite) {
      if (stopped) return;
      stopped = true;
      if (failed(suite) || process.env.CLUSTER_TEST_OUTPUT === '1') handle.printOutput();
      await Promise.all(nodes.map((n) => n.forceStop()));
      for (const node of nodes) allNodes.delete(node);
      await etcd.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };

  try {
    for (let i = 0; i < count; i++) await create();
    // In parallel: each node only needs etcd to start.
    // allSettled: on a failure, every start must have finished (its process known) before stop() kills them.
    const starts = await Promise.allSettled(nodes.map((n) => n.start()));
    const failure = starts.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failure) throw failure.reason;
    if (options.waitSettled ?? true) {
      const timeout = options.settleTimeout_ms ?? 45_000;
      const started = Date.now();
      await Promise.all(nodes.map((n) => waitReady(n, timeout)));
      await waitClusterSettled(handle, Math.max(1_000, timeout - (Date.now() - started)));
    }
  } catch (error) {
    handle.printOutput();
    await handle.stop();
    throw error;
  }
  return handle;
}

/** Polls GET /health/ready until it answers 200. */
export async function waitReady(node: ClusterNodeProcess, timeout_ms = 30_000): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  let last = 'no answer';
  for (;;) {
    if (!node.running) throw new Error(`${node.nodeId} exited while waiting for it to be ready:\n${tail(node.output())}`);
    try {
      const response = await fetch(`${node.url}/health/ready`, { signal: AbortSignal.timeout(2_000) });
      if (response.status === 200) return;
      last = `${response.status} ${await response.text()}`;
    } catch (error) {
      last = String(error);
    }
    if (Date.now() > deadline) throw new Error(`${node.nodeId} not ready after ${timeout_ms} ms (last: ${last}):\n${tail(node.output())}`);
    await sleep(50);
  }
}

interface StatusView {
  node_id: string;
  members: { node_id: string; draining: boolean }[];
  partitions: { partition: number; leader: string | null; epoch: number | null; isr: string[] }[];
}

async function fetchStatus(url: string): Promise<StatusView | string> {
  try {
    const response = await fetch(`${url}/cluster/status`, { signal: AbortSignal.timeout(2_000) });
    if (response.status !== 200) return `status ${response.status}`;
    return (await response.json()) as StatusView;
  } catch (error) {
    return String(error);
  }
}

export interface SettledView {
  /** partition -> leader node id, as every live node sees it. */
  leaders: string[];
  epochs: (number | null)[];
}

/**
 * Why the cluster is not settled (undefined when it is), from the views of
 * every live node: every live node answers; they all list exactly the live
 * nodes as members; they agree on every partition's leader and epoch; every
 * partition has a leader, the one placement prefers among the live
 * non-draining members, with a full in-sync set (min(RF, those members)).
 */
export function unsettledReason(cluster: Pick<ClusterHandle, 'nodes' | 'replicationFactor' | 'partitions'>, views: (StatusView | string)[]): string | undefined {
  const live = cluster.nodes.filter((n) => n.alive);
  if (live.length === 0) return 'no live node';
  const liveIds = live.map((n) => n.nodeId).sort();
  const first = views[0];
  for (let i = 0; i < views.length; i++) {
    const view = views[i];
    const id = live[i].nodeId;
    if (typeof view === 'string') return `${id}: /cluster/status failed: ${view}`;
    const members = view.members.map((m) => m.node_id).sort();
    if (members.join(',') !== liveIds.join(',')) return `${id} sees members [${members}], live are [${liveIds}]`;
    if (view.partitions.length !== cluster.partitions) return `${id} reports ${view.partitions.length} partitions, expected ${cluster.partitions}`;
  }
  const reference = first as StatusView;
  const candidates = reference.members.filter((m) => !m.draining).map((m) => m.node_id);
  if (candidates.length === 0) return 'every member is draining';
  const isrSize = Math.min(cluster.replicationFactor, candidates.length);
  for (const row of reference.partitions) {
    const p = row.partition;
    if (row.leader === null) return `partition ${p} has no leader (as ${reference.node_id} sees it)`;
    for (const view of views.slice(1) as StatusView[]) {
      const other = view.partitions[p];
      if (other.leader !== row.leader || other.epoch !== row.epoch) {
        return `partition ${p}: ${reference.node_id} sees ${row.leader}@${row.epoch}, ${view.node_id} sees ${other.leader}@${other.epoch}`;
      }
    }
    const preferred = replicaSet(p, candidates, cluster.replicationFactor)[0];
    if (row.leader !== preferred) return `partition ${p} is led by ${row.leader}, placement prefers ${preferred}`;
    if (row.isr.length < isrSize) return `partition ${p} has in-sync replicas [${row.isr}], wants ${isrSize}`;
  }
  return undefined;
}

/**
 * Polls GET /cluster/status on every live node until the cluster is settled
 * (see unsettledReason) and returns the agreed leaders. Throws with the last
 * reason and the nodes' output on timeout.
 */
export async function waitClusterSettled(cluster: ClusterHandle, timeout_ms = 30_000): Promise<SettledView> {
  const deadline = Date.now() + timeout_ms;
  let reason = 'not polled';
  for (;;) {
    const live = cluster.nodes.filter((n) => n.alive);
    const views = await Promise.all(live.map((n) => fetchStatus(n.url)));
    // The live set may have changed while we asked: only judge a stable one.
    if (cluster.nodes.filter((n) => n.alive).length === live.length) {
      const why = unsettledReason(cluster, views);
      if (why === undefined) {
        const reference = views[0] as StatusView;
        return { leaders: reference.partitions.map((p) => p.leader!), epochs: reference.partitions.map((p) => p.epoch) };
      }
      reason = why;
    }
    if (Date.now() > deadline) {
      throw new Error(`cluster not settled after ${timeout_ms} ms: ${reason}\n${cluster.nodes.map((n) => `----- ${n.nodeId} -----\n${tail(n.output(), 2000)}`).join('\n')}`);
    }
    await sleep(100);
  }
}
