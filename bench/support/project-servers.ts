import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnEtcd, type EtcdProcess } from '../../cluster/etcd-process.js';
import { freePort, startServerProcess, type ServerProcess } from './server-process.js';

/**
 * The project as a bench target, each node its own `node dist/http/server.js`
 * process: one standalone node, or a cluster of nodes on a private etcd
 * (as bench/cluster.bench.ts starts them). Both register a user and hand
 * back its bearer token.
 */
const distDir = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
export const projectServerScript = join(distDir, 'http', 'server.js');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A default rate-limit tier no load reaches: the limiter runs and counts, but the bench measures the write path (bench/rate-limits.bench.ts measures the limiter). */
export const projectEnv = { LOG_LEVEL: 'warn', PASSWORD_KDF_COST: '10', RATE_LIMITS_DEFAULT_MAX_REQUESTS: '1000000000' };

export interface ProjectServer {
  server: ServerProcess;
  token: string;
  stop(): Promise<void>;
}

export async function register(url: string): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(`${url}/api/v1/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: `bench${attempt}@example.com`, username: `bench${attempt}`, password: 'bench-password-1' }),
    });
    const body = (await response.json()) as { access_token?: string };
    if (response.status === 201 && body.access_token) return body.access_token;
    if (attempt > 20) throw new Error(`register answered ${response.status}: ${JSON.stringify(body)}`);
    await sleep(250);
  }
}

/** The line a node logs (at info) once its route schemas are compiled (http/server.ts, http/lazy-schemas.ts). */
export const SCHEMAS_COMPILED = '"msg":"route schemas compiled"';
const SCHEMAS_COMPILED_WAIT_MS = 60_000;

/**
 * One standalone node (no etcd), data in a temporary directory (on disk: fsync is part of the figure).
 *
 * Resolves once the node has also compiled its route schemas. A node is ready
 * before that and compiles them in the background, one per turn of its event
 * loop (http/lazy-schemas.ts): 5,106 compilations, 1.4 s on an idle node of
 * 2026-11-30, 5.2 s under load. A load started sooner measures that
 * compilation too (a profile of a run started 2 s after ready had ajv and
 * fast-json-stringify at 23% of the node's time); the floors it is compared
 * with have nothing of the kind. So the node logs at info (it logs nothing
 * per request at that level) and the line that says so is waited for.
 */
export async function startProjectServer(env: Record<string, string> = {}): Promise<ProjectServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-write-path-'));
  let server: ServerProcess | undefined;
  try {
    // A caller's LOG_LEVEL above info hides the line: then the node is not waited for.
    const logsLine = ['info', 'debug', 'trace'].includes(env.LOG_LEVEL ?? 'info');
    let seen = false;
    let tail = '';
    let compiled!: () => void;
    const schemasCompiled = new Promise<void>((resolve) => (compiled = resolve));
    const onStdout = (chunk: Buffer) => {
      if (seen) return;
      // The line may straddle two chunks: the end of the one before is kept.
      const text = tail + chunk.toString('utf8');
      if (text.includes(SCHEMAS_COMPILED)) {
        seen = true;
        compiled();
      }
      tail = text.slice(-SCHEMAS_COMPILED.length);
    };
    server = await startServerProcess(projectServerScript, { ...projectEnv, LOG_LEVEL: 'info', ...env, DATA_DIR: dataDir }, { readyPath: '/health/ready', onStdout });
    const token = await register(server.url);
    if (logsLine) {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`the node did not log "route schemas compiled" within ${SCHEMAS_COMPILED_WAIT_MS} ms`)), SCHEMAS_COMPILED_WAIT_MS);
      });
      await Promise.race([schemasCompiled, timedOut]).finally(() => clearTimeout(timer));
    }
    const started = server;
    return {
      server,
      token,
      async stop() {
        await started.stop();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
}

/** /dev/shm where writable (etcd's durability is not what the cluster rows measure), else the temp dir. */
export function etcdParentDir(): string {
  try {
    accessSync('/dev/shm', constants.W_OK);
    return '/dev/shm';
  } catch {
    return tmpdir();
  }
}

export interface ProjectCluster {
  etcd: EtcdProcess;
  nodes: ServerProcess[];
  token: string;
  stop(): Promise<void>;
}

interface StatusView {
  partitions: { partition: number; leader: string | null; isr: string[] }[];
}

async function status(url: string): Promise<StatusView | undefined> {
  try {
    const response = await fetch(`${url}/cluster/status`, { signal: AbortSignal.timeout(1000) });
    return response.status === 200 ? ((await response.json()) as StatusView) : undefined;
  } catch {
    return undefined;
  }
}

/** `count` nodes with REPLICATION_FACTOR=`replicationFactor` on a private etcd; resolves once every partition has a leader and its full ISR. */
export async function startProjectCluster(count: number, replicationFactor: number, env: Record<string, string> = {}, settleTimeout_ms = 90_000): Promise<ProjectCluster> {
  const root = mkdtempSync(join(tmpdir(), 'bench-write-path-cluster-'));
  const etcdDir = mkdtempSync(join(etcdParentDir(), 'bench-write-path-etcd-'));
  const etcd = await spawnEtcd({ dataDir: etcdDir, name: 'bench' });
  const nodes: ServerProcess[] = [];
  const ids: string[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.stop(2000).catch(() => undefined)));
    await etcd.stop();
    rmSync(etcdDir, { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
  };
  try {
    for (let i = 1; i <= count; i++) {
      const id = `n${i}`;
      ids.push(id);
      nodes.push(
        await startServerProcess(
          projectServerScript,
          {
            ...projectEnv,
            ...env,
            ETCD_ENDPOINTS: etcd.endpoints,
            NODE_ID: id,
            GRPC_PORT: String(await freePort()),
            DATA_DIR: join(root, id),
            REPLICATION_FACTOR: String(replicationFactor),
            LEASE_TTL_SECONDS: '2',
          },
          { readyPath: '/health', startTimeout_ms: 60_000 },
        ),
      );
    }
    const deadline = Date.now() + settleTimeout_ms;
    for (;;) {
      const views = await Promise.all(nodes.map((n) => status(n.url)));
      const settled = views.every(
        (v) => v && v.partitions.every((p) => p.leader !== null && ids.includes(p.leader) && p.isr.length >= Math.min(replicationFactor, count)),
      );
      if (settled && new Set(views.map((v) => v!.partitions.map((p) => p.leader).join())).size === 1) break;
      if (Date.now() > deadline) throw new Error(`cluster did not settle within ${settleTimeout_ms} ms`);
      await sleep(100);
    }
    const token = await register(nodes[0].url);
    return { etcd, nodes, token, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
