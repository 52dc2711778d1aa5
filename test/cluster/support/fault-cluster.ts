import { spawn, type ChildProcess } from 'node:child_process';
import { serverNodeArgs } from '../../../http/node-flags.js';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnEtcd, type EtcdProcess } from '../../../cluster/etcd-process.js';
import { freePort } from '../../../cluster/free-port.js';
import { unsettledReason } from '../../helpers/cluster.js';

/**
 * The cluster of the fault scenarios: a private etcd that can be stopped and
 * started again (same process arguments, ports and data directory) and node
 * processes (`node dist/http/server.js`) that can be killed, paused and
 * restarted. Used by test/cluster/faults.test.ts (from the sources) and by
 * bench/faults.bench.ts (compiled into dist/), which is why it finds
 * dist/http/server.js from the project root rather than relative to itself,
 * and does not use test/helpers/process.ts. Build dist/ first.
 */

export type FaultSignal = 'SIGKILL' | 'SIGSTOP' | 'SIGCONT';

const OUTPUT_MAX = Number(process.env.FAULTS_OUTPUT_MAX ?? 200_000);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The project root: the first folder above this file with a package.json (from test/ or dist/test/). */
function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error('no package.json above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
}

export const SERVER_SCRIPT = join(projectRoot(), 'dist', 'http', 'server.js');

const children = new Set<ChildProcess>();
let hooked = false;
function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', () => {
    for (const child of children) {
      try {
        child.kill('SIGKILL');
      } catch {
        // Gone.
      }
    }
  });
}

export class FaultNode {
  readonly url: string;
  private child?: ChildProcess;
  private exited?: Promise<void>;
  private log = '';
  /** up: ready (GET /health/ready answered 200 once) and not paused; starting: spawned, not ready yet; paused: SIGSTOPped; down: not running. */
  state: 'up' | 'starting' | 'paused' | 'down' = 'down';

  constructor(
    readonly nodeId: string,
    readonly port: number,
    readonly grpcPort: number,
    readonly dataDir: string,
    private readonly env: Record<string, string>,
  ) {
    this.url = `http://127.0.0.1:${port}`;
  }

  /** For test/helpers/cluster.ts's unsettledReason. */
  get alive(): boolean {
    return this.state === 'up';
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  output(): string {
    return this.log;
  }

  async start(timeout_ms = 30_000): Promise<void> {
    if (this.state !== 'down') throw new Error(`${this.nodeId} is running`);
    if (!existsSync(SERVER_SCRIPT)) throw new Error(`${SERVER_SCRIPT} does not exist: build first (npx tsc -p tsconfig.json)`);
    const child = spawn(process.execPath, [...serverNodeArgs(), SERVER_SCRIPT], { env: { ...process.env, ...this.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    hookExit();
    children.add(child);
    this.child = child;
    const collect = (chunk: Buffer) => {
      this.log += chunk.toString('utf8');
      if (this.log.length > OUTPUT_MAX) this.log = this.log.slice(-OUTPUT_MAX);
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    let gone = false;
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        gone = true;
        children.delete(child);
        if (this.child === child) this.state = 'down';
        this.log += `\n--- ${this.nodeId} exited (${signal ?? `code ${code}`}) ---\n`;
        resolve();
      }),
    );
    this.state = 'starting';
    const deadline = Date.now() + timeout_ms;
    for (;;) {
      if (gone) throw new Error(`${this.nodeId} exited during start:\n${this.log.slice(-3000)}`);
      try {
        // Ready: joined, and every partition has a leader (what a load balancer's health check would use).
        const response = await fetch(`${this.url}/health/ready`, { signal: AbortSignal.timeout(1_000) });
        await response.arrayBuffer();
        if (response.status === 200) {
          this.state = 'up';
          return;
        }
      } catch {
        // Not listening yet.
      }
      if (Date.now() > deadline) {
        await this.kill('SIGKILL');
        throw new Error(`${this.nodeId} not ready within ${timeout_ms} ms:\n${this.log.slice(-3000)}`);
      }
      await sleep(50);
    }
  }

  /** SIGKILL waits for the exit. SIGSTOP/SIGCONT pause and resume. */
  async kill(signal: FaultSignal): Promise<void> {
    const child = this.child;
    if (!child || this.state === 'down') return;
    if (signal === 'SIGKILL') {
      child.kill('SIGKILL');
      await this.exited;
      this.state = 'down';
    } else if (signal === 'SIGSTOP') {
      child.kill('SIGSTOP');
      this.state = 'paused';
    } else {
      child.kill('SIGCONT');
      this.state = 'up';
    }
  }

  async forceStop(): Promise<void> {
    await this.kill('SIGKILL');
  }
}

export interface FaultClusterOptions {
  nodes?: number;
  replicationFactor?: number;
  partitions?: number;
  leaseTtlSeconds?: number;
  env?: Record<string, string>;
}

export interface StatusView {
  node_id: string;
  members: { node_id: string; draining: boolean }[];
  partitions: { partition: number; leader: string | null; epoch: number | null; isr: string[] }[];
}

export async function clusterStatus(url: string): Promise<StatusView | undefined> {
  try {
    const response = await fetch(`${url}/cluster/status`, { signal: AbortSignal.timeout(2_000) });
    if (response.status !== 200) {
      await response.arrayBuffer();
      return undefined;
    }
    return (await response.json()) as StatusView;
  } catch {
    return undefined;
  }
}

export class FaultCluster {
  readonly nodes: FaultNode[] = [];
  private etcdProcess?: EtcdProcess;
  private etcdLog = '';
  etcdUp = false;

  private constructor(
    readonly root: string,
    readonly etcdDir: string,
    readonly partitions: number,
    readonly replicationFactor: number,
    readonly leaseTtlSeconds: number,
    private etcdPorts: { client: number; peer: number },
  ) {}

  static async start(options: FaultClusterOptions = {}): Promise<FaultCluster> {
    const root = mkdtempSync(join(tmpdir(), 'cluster-faults-'));
    const shm = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
    const etcdDir = mkdtempSync(join(shm, 'etcd-faults-'));
    const cluster = new FaultCluster(
      root,
      etcdDir,
      options.partitions ?? 16,
      options.replicationFactor ?? 2,
      options.leaseTtlSeconds ?? 2,
      { client: await freePort(), peer: await freePort() },
    );
    while (cluster.etcdPorts.peer === cluster.etcdPorts.client) cluster.etcdPorts.peer = await freePort();
    try {
      await cluster.startEtcd();
      const used = new Set([cluster.etcdPorts.client, cluster.etcdPorts.peer]);
      const port = async () => {
        for (;;) {
          const p = await freePort();
          if (!used.has(p)) {
            used.add(p);
            return p;
          }
        }
      };
      for (let i = 1; i <= (options.nodes ?? 3); i++) {
        const nodeId = `n${i}`;
        const httpPort = await port();
        const grpcPort = await port();
        const dataDir = join(root, nodeId);
        cluster.nodes.push(
          new FaultNode(nodeId, httpPort, grpcPort, dataDir, {
            ETCD_ENDPOINTS: cluster.etcdEndpoints,
            NODE_ID: nodeId,
            HOST: '127.0.0.1',
            PORT: String(httpPort),
            GRPC_PORT: String(grpcPort),
            ADVERTISE_HOST: '127.0.0.1',
            DATA_DIR: dataDir,
            PARTITIONS: String(cluster.partitions),
            REPLICATION_FACTOR: String(cluster.replicationFactor),
            LEASE_TTL_SECONDS: String(cluster.leaseTtlSeconds),
            CLUSTER_PREFIX: '/platform/',
            LOG_LEVEL: process.env.FAULTS_LOG_LEVEL ?? 'warn',
            PASSWORD_KDF_COST: '10',
            REGISTRATIONS_PER_ADDRESS_MAX: '0',
            // A default rate-limit tier no test load reaches (the limiter still counts every request).
            RATE_LIMITS_DEFAULT_MAX_REQUESTS: '1000000000',
            ...options.env,
          }),
        );
      }
      await Promise.all(cluster.nodes.map((n) => n.start()));
      await cluster.waitSettled(60_000);
    } catch (error) {
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  get etcdEndpoints(): string {
    return `http://127.0.0.1:${this.etcdPorts.client}`;
  }

  /** Starts etcd (again): same ports, same data directory. */
  async startEtcd(): Promise<void> {
    if (this.etcdUp) return;
    this.etcdProcess = await spawnEtcd({
      dataDir: this.etcdDir,
      clientPort: this.etcdPorts.client,
      peerPort: this.etcdPorts.peer,
      name: 'faults',
      startTimeout_ms: 20_000,
      onOutput: (text) => {
        this.etcdLog = (this.etcdLog + text).slice(-OUTPUT_MAX);
      },
    });
    this.etcdUp = true;
  }

  /** SIGKILLs etcd (its data directory stays). */
  async stopEtcd(): Promise<void> {
    if (!this.etcdUp) return;
    this.etcdUp = false;
    await this.etcdProcess?.stop();
  }

  upNodes(): FaultNode[] {
    return this.nodes.filter((n) => n.state === 'up');
  }

  /** The up nodes by the number of partitions they lead, most first, as an up node sees it. */
  async rankedLeaders(): Promise<{ node: FaultNode; partitions: number }[]> {
    for (const observer of this.upNodes()) {
      const view = await clusterStatus(observer.url);
      if (!view) continue;
      const led = new Map<string, number>();
      for (const p of view.partitions) if (p.leader) led.set(p.leader, (led.get(p.leader) ?? 0) + 1);
      return this.upNodes()
        .map((node) => ({ node, partitions: led.get(node.nodeId) ?? 0 }))
        .sort((a, b) => b.partitions - a.partitions);
    }
    throw new Error('no node answered /cluster/status');
  }

  /** The up node that leads the most partitions. */
  async busiestLeader(): Promise<{ node: FaultNode; partitions: number }> {
    return (await this.rankedLeaders())[0];
  }

  /** Every up node agrees on a leader for every partition, the preferred one, with a full in-sync set (test/helpers/cluster.ts). */
  async waitSettled(timeout_ms = 30_000): Promise<void> {
    const deadline = Date.now() + timeout_ms;
    let reason = 'not polled';
    for (;;) {
      const live = this.upNodes();
      const views = await Promise.all(live.map(async (n) => (await clusterStatus(n.url)) ?? 'no answer'));
      if (this.upNodes().length === live.length) {
        const why = unsettledReason({ nodes: this.nodes as never, replicationFactor: this.replicationFactor, partitions: this.partitions }, views);
        if (why === undefined) return;
        reason = why;
      }
      if (Date.now() > deadline) throw new Error(`cluster not settled after ${timeout_ms} ms: ${reason}`);
      await sleep(100);
    }
  }

  output(): string {
    const parts = this.nodes.map((n) => `----- ${n.nodeId} -----\n${n.output() || '(none)\n'}`);
    if (this.etcdLog) parts.push(`----- etcd -----\n${this.etcdLog}`);
    return parts.join('\n');
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.forceStop()));
    await this.stopEtcd();
    rmSync(this.root, { recursive: true, force: true });
    rmSync(this.etcdDir, { recursive: true, force: true });
  }
}

export async function registerUser(url: string, name: string): Promise<{ token: string; userId: string }> {
  for (let attempt = 0; ; attempt++) {
    try {
      const response = await fetch(`${url}/api/v1/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: `${name}${attempt}@example.com`, username: `${name}${attempt}`, password: 'correct horse battery' }),
        signal: AbortSignal.timeout(15_000),
      });
      const body = (await response.json()) as { access_token?: string; user?: { id: string } };
      if (response.status === 201 && body.access_token) return { token: body.access_token, userId: body.user!.id };
      if (attempt >= 10) throw new Error(`register answered ${response.status}: ${JSON.stringify(body)}`);
    } catch (error) {
      if (attempt >= 10) throw error;
    }
    await sleep(250);
  }
}
