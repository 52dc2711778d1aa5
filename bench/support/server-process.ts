import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from '../../cluster/free-port.js';
import { serverNodeArgs } from '../../http/node-flags.js';
export { freePort };

export interface ServerProcess {
  url: string;
  port: number;
  child: ChildProcess;
  /** performance.now() when the process was spawned (start-up time: ready minus this). */
  spawned_ms: number;
  /** SIGTERM, then SIGKILL if it has not exited after `grace_ms`. */
  stop(grace_ms?: number): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts `node <script>` with PORT set to a free port and the given env, and
 * waits until GET <readyPath> answers 200. The child's stdout and stderr go
 * to our stderr (stdout of the bench run is kept for the table).
 */
export async function startServerProcess(
  script: string,
  env: Record<string, string>,
  options: {
    readyPath?: string;
    startTimeout_ms?: number;
    nodeArgs?: string[];
    /** How often readiness is polled (default 100 ms). */
    poll_ms?: number;
    /** Sees the child's stdout from its first byte (it still goes to our stderr too). */
    onStdout?: (chunk: Buffer) => void;
    /** A command that runs node, and its arguments before node's (e.g. valgrind: bench/support/callgrind-server.ts). */
    launcher?: string[];
  } = {},
): Promise<ServerProcess> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // BENCH_SERVER_CPU_PROF=<dir>: every server process writes a V8 CPU profile there when it exits
  // (BENCH_SERVER_CPU_PROF_INTERVAL_US: its sampling interval, V8's default 1000 µs; Node refuses it in NODE_OPTIONS).
  const profile = process.env.BENCH_SERVER_CPU_PROF
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_SERVER_CPU_PROF}`, ...(process.env.BENCH_SERVER_CPU_PROF_INTERVAL_US ? [`--cpu-prof-interval=${process.env.BENCH_SERVER_CPU_PROF_INTERVAL_US}`] : [])]
    : [];
  // The project's node starts with the V8 flags `npm start` gives it (http/node-flags.ts); the floors with Node's defaults.
  const own = /[\\/]http[\\/]server\.js$/.test(script) ? serverNodeArgs() : [];
  const spawned_ms = performance.now();
  const nodeCommand = [process.execPath, ...profile, ...own, ...(options.nodeArgs ?? []), script];
  const [command, ...args] = [...(options.launcher ?? []), ...nodeCommand];
  const child = spawn(command!, args, {
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.pipe(process.stderr, { end: false });
  if (options.onStdout) child.stdout!.on('data', options.onStdout);
  child.stderr!.pipe(process.stderr, { end: false });
  let exited: string | undefined;
  const exitPromise = new Promise<void>((resolve) => {
    child.on('exit', (code, signal) => {
      exited = signal ?? `code ${code}`;
      resolve();
    });
  });

  const stop = async (grace_ms = 10_000) => {
    if (exited === undefined) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), grace_ms);
      await exitPromise;
      clearTimeout(timer);
    }
  };

  const deadline_ms = Date.now() + (options.startTimeout_ms ?? 30_000);
  const readyUrl = url + (options.readyPath ?? '/');
  for (;;) {
    if (exited !== undefined) throw new Error(`${script} exited (${exited}) before it was ready`);
    try {
      const response = await fetch(readyUrl);
      await response.arrayBuffer();
      if (response.status === 200) break;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline_ms) {
      await stop(1000);
      throw new Error(`${script} not ready at ${readyUrl} after ${options.startTimeout_ms ?? 30_000} ms`);
    }
    await sleep(options.poll_ms ?? 100);
  }
  return { url, port, child, spawned_ms, stop };
}
