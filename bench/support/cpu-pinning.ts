import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';

/**
 * CPU affinity of a process and all its threads, through util-linux's
 * `taskset` (Linux). A comparison that pins the servers it compares to one
 * core and its load generator to the others takes the load generator and the
 * other side's batching out of the measure. Where taskset is missing or there
 * is one core, nothing is pinned and the caller says so in its notes.
 */
export function pinProcess(pid: number, cpus: string): boolean {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The machine's cores split for a pinned comparison: the servers on the last, everything else on the rest; null on one core. */
export function pinningPlan(): { servers: string; rest: string; all: string } | null {
  const cores = availableParallelism();
  if (cores < 2) return null;
  const last = cores - 1;
  return { servers: String(last), rest: last === 1 ? '0' : `0-${last - 1}`, all: `0-${last}` };
}
