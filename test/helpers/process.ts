import { spawn, type ChildProcess } from 'node:child_process';
import { serverNodeArgs } from '../../http/node-flags.js';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../cluster/free-port.js';
export { freePort };

/**
 * A node as a real child process: `node dist/http/server.js` with DATA_DIR
 * and PORT from the test, exactly as `npm start` runs it. `npm test` builds
 * dist/ before vitest runs; run `npx tsc -p tsconfig.json` first when running
 * a process test on its own.
 */
export const SERVER_ENTRY = fileURLToPath(new URL('../../dist/http/server.js', import.meta.url));

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ServerProcess {
  child: ChildProcess;
  pid: number;
  port: number;
  url: string;
  dataDir: string;
  /** Resolves when the process has exited. */
  exited: Promise<ProcessExit>;
  /** The last 64 KiB of the process's stdout and stderr, for failure messages. */
  output(): string;
  /** Sends the signal and waits for the exit. */
  stop(signal: 'SIGKILL' | 'SIGTERM'): Promise<ProcessExit>;
}

export interface StartServerOptions {
  dataDir: string;
  port?: number;
  /** Extra environment; PASSWORD_KDF_COST defaults to 10 and LOG_LEVEL to warn. */
  env?: Record<string, string>;
  startTimeout_ms?: number;
}

const OUTPUT_BYTES_MAX = 64 * 1024;
const running = new Set<ServerProcess>();

/** Spawns the server and resolves once GET /health answers 200. */
export async function startServerProcess(options: StartServerOptions): Promise<ServerProcess> {
  if (!existsSync(SERVER_ENTRY)) throw new Error(`${SERVER_ENTRY} does not exist: build first (npm test does; or npx tsc -p tsconfig.json)`);
  const port = options.port ?? (await freePort());
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Embedded mode only: never let the caller's environment switch on cluster mode or a bootstrap admin.
  for (const name of ['ETCD_ENDPOINTS', 'NODE_ID', 'GRPC_PORT', 'ADMIN_EMAIL', 'ADMIN_PASSWORD', 'DURABILITY', 'PARTITIONS']) delete env[name];
  Object.assign(env, {
    HOST: '127.0.0.1',
    PORT: String(port),
    DATA_DIR: options.dataDir,
    PASSWORD_KDF_COST: '10',
    // Off: tests register many users from 127.0.0.1 (the throttle has its own tests).
    REGISTRATIONS_PER_ADDRESS_MAX: '0',
    // A default rate-limit tier no test load reaches (the limiter still counts every request).
    RATE_LIMITS_DEFAULT_MAX_REQUESTS: '1000000000',
    LOG_LEVEL: 'warn',
    ...options.env,
  });
  const child = spawn(process.execPath, [...serverNodeArgs(), SERVER_ENTRY], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const collect = (chunk: Buffer) => {
    output += chunk.toString('utf8');
    if (output.length > OUTPUT_BYTES_MAX) output = output.slice(-OUTPUT_BYTES_MAX);
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<ProcessExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = `http://127.0.0.1:${port}`;
  const handle: ServerProcess = {
    child,
    pid: child.pid!,
    port,
    url,
    dataDir: options.dataDir,
    exited,
    output: () => output,
    async stop(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const exit = await exited;
      running.delete(handle);
      return exit;
    },
  };
  running.add(handle);
  exited.then(() => running.delete(handle));

  const deadline = Date.now() + (options.startTimeout_ms ?? 60_000);
  let exit: ProcessExit | undefined;
  exited.then((value) => (exit = value));
  for (;;) {
    if (exit) throw new Error(`server exited during start (${JSON.stringify(exit)}):\n${output}`);
    try {
      const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1_000) });
      if (response.status === 200) break;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      await handle.stop('SIGKILL');
      throw new Error(`server did not answer /health within the start timeout:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return handle;
}

/** SIGKILLs every server this helper started that is still running (for afterAll/afterEach). */
export async function killAllServerProcesses(): Promise<void> {
  await Promise.all([...running].map((server) => server.stop('SIGKILL')));
}

/** A JSON request to a server process (the process tests' one client): {status, body}; a bearer token and a body when given. */
export async function callServer(
  server: Pick<ServerProcess, 'url'>,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string>; timeout_ms?: number } = {},
): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const response = await fetch(server.url + path, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    signal: AbortSignal.timeout(options.timeout_ms ?? 15_000),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

/** Polls `check` on real time (the server is another process) until it returns a value, or fails naming `what`. */
export async function untilReal<T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeout_ms = 30_000): Promise<T> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
