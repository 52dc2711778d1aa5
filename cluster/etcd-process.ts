import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync } from 'node:fs';
import { freePort } from './free-port.js';
export { freePort };

/**
 * A private etcd as a child process, for `npm run cluster:local` and the
 * cluster tests: one member on loopback, its data in `dataDir`. Killed with
 * SIGKILL on `stop()` and when this process exits.
 */
export interface EtcdProcess {
  /** Client URL, e.g. `http://127.0.0.1:23791` (what ETCD_ENDPOINTS takes). */
  endpoints: string;
  dataDir: string;
  clientPort: number;
  peerPort: number;
  child: ChildProcess;
  /** The last 64 KiB of etcd's output (it logs errors only). */
  output(): string;
  /** SIGKILL, then waits for the exit. Idempotent. Does not remove the data directory. */
  stop(): Promise<void>;
}

export interface SpawnEtcdOptions {
  dataDir: string;
  /** 0 or absent: a free port picked by the OS. */
  clientPort?: number;
  peerPort?: number;
  /** Member name (default `etcd-local`). Keep it stable when reusing a data directory. */
  name?: string;
  /** Also write each line of etcd's output here (e.g. `[etcd] ` prefixed to the console). */
  onOutput?: (text: string) => void;
  /** How long to wait for GET /health to say healthy (default 10 s). */
  startTimeout_ms?: number;
  /** Own process group: a Ctrl-C in the terminal does not reach etcd (the parent stops it when it is done). */
  detached?: boolean;
}

/** The etcd executable: ETCD_BINARY, or `etcd` on PATH. */
export function etcdBinary(): string {
  return process.env.ETCD_BINARY || 'etcd';
}
const OUTPUT_BYTES_MAX = 64 * 1024;
const running = new Set<ChildProcess>();
let exitHookInstalled = false;

/** Throws an Error saying how to install etcd when the binary is not on PATH. */
export function assertEtcdInstalled(binary = etcdBinary()): void {
  const probe = spawnSync(binary, ['--version'], { stdio: 'ignore' });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `etcd is not installed (could not run \`${binary} --version\`: ${probe.error?.message ?? `exit ${probe.status}`}). ` +
        'Cluster mode and its tests need etcd 3.4+: `apt-get install etcd-server` (Debian/Ubuntu), or set ETCD_BINARY to its path.',
    );
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Synchronous: the only thing allowed in an 'exit' handler. No etcd outlives its parent.
  process.on('exit', () => {
    for (const child of running) {
      try {
        child.kill('SIGKILL');
      } catch {
        // Already gone.
      }
    }
  });
}

/** Spawns etcd and resolves once its /health endpoint says healthy. */
export async function spawnEtcd(options: SpawnEtcdOptions): Promise<EtcdProcess> {
  const binary = etcdBinary();
  assertEtcdInstalled(binary);
  // etcd wants its data directory private (it warns otherwise).
  mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
  chmodSync(options.dataDir, 0o700);
  const clientPort = options.clientPort || (await freePort());
  let peerPort = options.peerPort || (await freePort());
  while (peerPort === clientPort) peerPort = await freePort();
  const name = options.name ?? 'etcd-local';
  const clientUrl = `http://127.0.0.1:${clientPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const args = [
    '--name', name,
    '--data-dir', options.dataDir,
    '--listen-client-urls', clientUrl,
    '--advertise-client-urls', clientUrl,
    '--listen-peer-urls', peerUrl,
    '--initial-advertise-peer-urls', peerUrl,
    '--initial-cluster', `${name}=${peerUrl}`,
    '--initial-cluster-state', 'new',
    '--logger', 'zap',
    '--log-outputs', 'stderr',
    '--log-level', 'error',
  ];
  // ETCD_* variables of the caller's environment would override these flags (etcd reads them too).
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('ETCD_')) env[key] = value;
  const child = spawn(binary, args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached ?? false });
  installExitHook();
  running.add(child);
  let output = '';
  const collect = (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    output += text;
    if (output.length > OUTPUT_BYTES_MAX) output = output.slice(-OUTPUT_BYTES_MAX);
    options.onOutput?.(text);
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  let spawnError: Error | undefined;
  child.once('error', (error) => (spawnError = error));
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      running.delete(child);
      resolve();
    });
    child.once('error', () => {
      running.delete(child);
      resolve();
    });
  });

  const stop = async () => {
    if (exit === undefined && spawnError === undefined) {
      try {
        child.kill('SIGKILL');
      } catch {
        // Already gone.
      }
    }
    await exited;
  };

  const deadline = Date.now() + (options.startTimeout_ms ?? 10_000);
  for (;;) {
    if (spawnError) throw new Error(`etcd could not be started: ${spawnError.message}`);
    if (exit) throw new Error(`etcd exited during start (${JSON.stringify(exit)}):\n${output}`);
    try {
      const response = await fetch(`${clientUrl}/health`, { signal: AbortSignal.timeout(1_000) });
      if (response.status === 200) {
        const body = (await response.json()) as { health?: string };
        if (body.health === 'true') break;
      }
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`etcd did not become healthy within ${options.startTimeout_ms ?? 10_000} ms:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { endpoints: clientUrl, dataDir: options.dataDir, clientPort, peerPort, child, output: () => output, stop };
}
