import { availableParallelism } from 'node:os';
import { pathToFileURL } from 'node:url';

/**
 * The V8 flags a node process starts with: `npm start` asks this module
 * (`node $(node dist/http/node-flags.js) dist/http/server.js`), and the
 * benches and process tests spawn the server with the same flags.
 *
 * GC_THREADS (read at start; docs/performance.md, "Garbage collection on
 * two cores"):
 * - `auto` (default): `single` on a machine of 2 cores or fewer, else `parallel`;
 * - `single`: `--single-threaded-gc`. V8 marks, sweeps and scavenges on the
 *   event loop's thread instead of four helper threads. Where the cores are
 *   few, those helpers do not run beside the event loop for free: they take
 *   the core LMDB's writer and the other processes need. Measured on 2 cores
 *   under fresh-key lock load: 9-23% more acquisitions per second;
 * - `parallel`: V8's default (concurrent marking, parallel scavenges).
 *
 * These are V8 start-up flags: V8 reads them when it sets up the heap, and
 * Node refuses --single-threaded-gc in NODE_OPTIONS, so they cannot come from
 * the environment of an already started process.
 */
export type GcThreads = 'auto' | 'single' | 'parallel';

export function gcThreadsFrom(raw: string | undefined): GcThreads {
  const value = raw === undefined || raw.trim() === '' ? 'auto' : raw.trim();
  if (value !== 'auto' && value !== 'single' && value !== 'parallel') throw new Error(`GC_THREADS must be auto, single or parallel (got ${JSON.stringify(raw)})`);
  return value;
}

export function serverNodeArgs(env: NodeJS.ProcessEnv = process.env, cores = availableParallelism()): string[] {
  const mode = gcThreadsFrom(env.GC_THREADS);
  const single = mode === 'single' || (mode === 'auto' && cores <= 2);
  return single ? ['--single-threaded-gc'] : [];
}

// As a script: prints the flags, for the start command's $(...).
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(serverNodeArgs().join(' '));
}
