import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnEtcd, type EtcdProcess } from './etcd-process.js';

/**
 * `npm run cluster:local`: a three-node cluster on this machine for trying
 * cluster mode. A private etcd (data in ./data/cluster-local/etcd, client port
 * 12379), nodes n1..n3 on HTTP 8081-8083 and gRPC 9081-9083 with data in
 * ./data/cluster-local/n1..n3, REPLICATION_FACTOR=2. Ctrl-C (SIGINT) or
 * SIGTERM: every node gets SIGTERM (it drains and exits), then etcd stops.
 * A second Ctrl-C kills everything at once. Data is kept between runs.
 *
 * Environment (optional): ADMIN_EMAIL / ADMIN_PASSWORD (default
 * admin@example.com / change-me-now), PARTITIONS (64, fixed at the first run),
 * LOG_LEVEL (info), LOCAL_ETCD_PORT (12379; the peer port is the next one).
 */

const SERVER_ENTRY = fileURLToPath(new URL('../http/server.js', import.meta.url));
const ROOT = resolve(process.cwd(), 'data', 'cluster-local');
const NODES = [1, 2, 3].map((i) => ({ nodeId: `n${i}`, httpPort: 8080 + i, grpcPort: 9080 + i }));
const DRAIN_TIMEOUT_MS = 90_000;

interface RunningNode {
  nodeId: string;
  url: string;
  child: ChildProcess;
  exited: Promise<void>;
  done: boolean;
}

/** Writes each complete line of a stream to stdout with a prefix. */
function prefixLines(prefix: string): (chunk: Buffer | string) => void {
  let pending = '';
  return (chunk) => {
    pending += chunk.toString();
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) process.stdout.write(`${prefix}${line}\n`);
  };
}

function startNode(node: (typeof NODES)[number], etcd: EtcdProcess): RunningNode {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ETCD_ENDPOINTS: etcd.endpoints,
    NODE_ID: node.nodeId,
    PORT: String(node.httpPort),
    GRPC_PORT: String(node.grpcPort),
    DATA_DIR: resolve(ROOT, node.nodeId),
    REPLICATION_FACTOR: '2',
    ADMIN_EMAIL: process.env.ADMIN_EMAIL || 'admin@example.com',
    ADMIN_PASSWORD: process.env.ADMIN_PASSWORD || 'change-me-now',
  };
  // Own process group: the terminal's Ctrl-C comes to this process only, which then drains the nodes one by one.
  const child = spawn(process.execPath, [SERVER_ENTRY], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const prefix = `[${node.nodeId}] `;
  child.stdout!.on('data', prefixLines(prefix));
  child.stderr!.on('data', prefixLines(prefix));
  const running: RunningNode = { nodeId: node.nodeId, url: `http://127.0.0.1:${node.httpPort}`, child, exited: Promise.resolve(), done: false };
  running.exited = new Promise<void>((resolveExit) => {
    child.once('exit', (code, signal) => {
      running.done = true;
      process.stdout.write(`${prefix}exited (${signal ?? `code ${code}`})\n`);
      resolveExit();
    });
  });
  return running;
}

/** Polls GET <path> until 200: /health (listening) or /health/ready (joined, every partition led). */
async function waitHealthy(node: RunningNode, path: '/health' | '/health/ready', timeout_ms: number): Promise<boolean> {
  const deadline = Date.now() + timeout_ms;
  while (Date.now() < deadline && !node.done) {
    try {
      const response = await fetch(`${node.url}${path}`, { signal: AbortSignal.timeout(1_000) });
      if (response.status === 200) return true;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

async function main(): Promise<number> {
  const clientPort = Number(process.env.LOCAL_ETCD_PORT || 12379);
  if (!Number.isInteger(clientPort) || clientPort <= 0 || clientPort >= 65535) {
    console.error('LOCAL_ETCD_PORT must be a port number');
    return 2;
  }
  console.log(`starting etcd (data in ${resolve(ROOT, 'etcd')})...`);
  const etcd = await spawnEtcd({
    dataDir: resolve(ROOT, 'etcd'),
    clientPort,
    peerPort: clientPort + 1,
    name: 'cluster-local',
    detached: true,
    onOutput: prefixLines('[etcd] '),
  });
  const nodes: RunningNode[] = [];
  let stopping: Promise<number> | undefined;
  let firstSignalAt = 0;

  const stopAll = (reason: string, exitCode: number): Promise<number> => {
    stopping ??= (async () => {
      console.log(`\n${reason}: draining the nodes (SIGTERM), then stopping etcd. Ctrl-C again to kill everything.`);
      // One at a time: each drain hands its partitions to nodes that are still up.
      for (const node of [...nodes].reverse()) {
        if (node.done) continue;
        console.log(`stopping ${node.nodeId}...`);
        node.child.kill('SIGTERM');
        const timedOut = await Promise.race([node.exited.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), DRAIN_TIMEOUT_MS))]);
        if (timedOut) {
          console.log(`${node.nodeId} did not stop within ${DRAIN_TIMEOUT_MS / 1000} s: killing it`);
          node.child.kill('SIGKILL');
          await node.exited;
        }
      }
      await etcd.stop();
      console.log('stopped (data kept in ./data/cluster-local)');
      return exitCode;
    })();
    return stopping;
  };

  const killAll = () => {
    for (const node of nodes) if (!node.done) node.child.kill('SIGKILL');
    void etcd.stop().then(() => process.exit(130));
  };

  const done = new Promise<number>((resolveDone) => {
    const onSignal = (signal: NodeJS.Signals) => {
      // npm may forward the terminal's signal a second time right away: only a later one escalates.
      if (stopping && Date.now() - firstSignalAt > 1_000) {
        console.log('killing every node and etcd now');
        killAll();
        return;
      }
      if (stopping) return;
      firstSignalAt = Date.now();
      void stopAll(signal, 0).then(resolveDone);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });

  console.log(`etcd ready at ${etcd.endpoints}; starting ${NODES.map((n) => n.nodeId).join(', ')}...`);
  // One after the other: three nodes starting at once on a small machine can starve each other's lease keep-alives.
  for (const node of NODES) {
    if (stopping) return done;
    const started = startNode(node, etcd);
    nodes.push(started);
    await waitHealthy(started, '/health', 30_000);
  }
  const ready = await Promise.all(nodes.map((n) => waitHealthy(n, '/health/ready', 60_000)));
  if (stopping) return done;
  if (ready.some((r) => !r)) {
    const late = nodes.filter((_, i) => !ready[i]).map((n) => n.nodeId);
    console.error(`\n${late.join(', ')} did not become ready within 60 s (see their output above; are ports 8081-8083, 9081-9083 and ${clientPort}-${clientPort + 1} free?)`);
    return stopAll('start failed', 1);
  }

  const env = `ETCD_ENDPOINTS=${etcd.endpoints}`;
  console.log(`
Cluster ready: three nodes, replication factor 2. Any node answers any request.
  ${nodes.map((n) => `${n.nodeId}: ${n.url}`).join('\n  ')}
  admin: ${process.env.ADMIN_EMAIL || 'admin@example.com'} / ${process.env.ADMIN_PASSWORD ? '(ADMIN_PASSWORD)' : 'change-me-now'}

Try:
  curl -s ${nodes[0].url}/cluster/status
  ${env} npm run cluster -- status
  ${env} npm run cluster -- status --partitions
  ${env} npm run cluster -- drain n2
  ${env} npm run cluster -- rebalance

Ctrl-C drains and stops every node, then etcd.
`);

  // A node that dies on its own does not stop the others (the cluster lives on); when all are gone, stop.
  void Promise.all(nodes.map((n) => n.exited)).then(() => {
    if (!stopping) void stopAll('every node exited', 1).then((code) => process.exit(code));
  });
  return done;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
