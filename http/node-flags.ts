import { availableParallelism } from 'node:os';
import { pathToFileURL } from 'node:url';

/**
 * The V8 flags a node process starts with: `npm start` asks this module
 * (`node $(node dist/http/node-flags.js) dist/http/server.js`), and the
 * benches and process tests spawn the server with the same flags.
 *
 * GC_THREADS (read at start; docs/performance.md, "Garbage collection on
 * two cores"), GC_SEMI_SPACE_MB and GC_PRETENURING (below):
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

/** One of `choices` (`fallback` when unset or blank); anything else throws, naming the variable and its choices. */
function choiceFrom<T extends string>(name: string, raw: string | undefined, choices: readonly T[], fallback: T): T {
  const value = raw === undefined || raw.trim() === '' ? fallback : raw.trim();
  if (!(choices as readonly string[]).includes(value)) {
    throw new Error(`${name} must be ${choices.slice(0, -1).join(', ')} or ${choices.at(-1)} (got ${JSON.stringify(raw)})`);
  }
  return value as T;
}

export function gcThreadsFrom(raw: string | undefined): GcThreads {
  return choiceFrom('GC_THREADS', raw, ['auto', 'single', 'parallel'], 'auto');
}

/**
 * GC_SEMI_SPACE_MB (read at start; default 32; 0 leaves V8's default, 16 MiB on
 * 64-bit): `--max-semi-space-size`, the most each half of the young generation
 * may grow to. An object alive at a scavenge is copied; alive at a second one,
 * it moves to the old generation. A node that holds a queue (the leader of a stream of
 * forwarded messages, when it is the slower side) keeps every queued message's
 * objects alive across scavenges: with 16 MiB, scavenges came every 20-35 ms,
 * each copied about 10 MB of such messages, and the node spent 44-53% of its
 * time in GC for as long as it lived. With 32 MiB, scavenges come half as often,
 * and the queued messages are answered before the next one. Measured:
 * docs/performance.md, "A node stuck in its young generation". The cost is
 * memory: up to three times the value more resident, under load.
 */
export const DEFAULT_SEMI_SPACE_MB = 32;

export function semiSpaceMbFrom(raw: string | undefined): number {
  if (raw === undefined || raw.trim() === '') return DEFAULT_SEMI_SPACE_MB;
  const value = Number(raw.trim());
  if (!Number.isInteger(value) || value < 0 || value > 1024) throw new Error(`GC_SEMI_SPACE_MB must be an integer from 0 to 1024 (got ${JSON.stringify(raw)})`);
  return value;
}

/**
 * GC_PRETENURING (read at start; default `off`): `off` passes
 * `--no-allocation-site-pretenuring`, `on` leaves V8's default.
 *
 * With pretenuring, V8 watches each allocation site. When most of a site's
 * objects survive a scavenge, it allocates that site's objects straight in
 * the old generation. Under request load that decision misfires: the request
 * and response objects in flight at one scavenge look long-lived, but the
 * next requests' objects die in milliseconds. In the old generation they stay
 * until a full collection, and while they stay, every young object they
 * point to survives each scavenge and is promoted too. On a 3-node cluster
 * under the write-path load, one or two of the three nodes got into that
 * state in every run: 9-12 ms per scavenge against 5-7 ms, with 2.4-2.8 MB
 * promoted each time. Without pretenuring no node did, and the cluster ran
 * 6% more acquisitions a second, ahead in 9 of 11 paired runs; one node
 * showed no difference (docs/performance.md, "V8's pretenuring off").
 */
export type GcPretenuring = 'on' | 'off';

export function gcPretenuringFrom(raw: string | undefined): GcPretenuring {
  return choiceFrom('GC_PRETENURING', raw, ['on', 'off'], 'off');
}

export function serverNodeArgs(env: NodeJS.ProcessEnv = process.env, cores = availableParallelism()): string[] {
  const mode = gcThreadsFrom(env.GC_THREADS);
  const single = mode === 'single' || (mode === 'auto' && cores <= 2);
  const semiSpace = semiSpaceMbFrom(env.GC_SEMI_SPACE_MB);
  const pretenuring = gcPretenuringFrom(env.GC_PRETENURING);
  return [
    ...(single ? ['--single-threaded-gc'] : []),
    ...(semiSpace > 0 ? [`--max-semi-space-size=${semiSpace}`] : []),
    ...(pretenuring === 'off' ? ['--no-allocation-site-pretenuring'] : []),
  ];
}

// As a script: prints the flags, for the start command's $(...).
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(serverNodeArgs().join(' '));
}
