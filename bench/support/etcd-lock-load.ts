import { runInChild, serveInChild, type ChildDone } from './child-run.js';
import { fileURLToPath } from 'node:url';
import { Etcd3, EtcdLockFailedError } from 'etcd3';
import { percentile } from './stats.js';

/**
 * The peer a user would pick instead of the project's locks: etcd's own lock
 * through the `etcd3` client (`client.lock(key).acquire()` then
 * `.release()`: a lease grant, a put-if-absent transaction with the lease,
 * a lease revoke). Runs in a child process of its own (`runEtcdLocksInChild`),
 * `concurrency` loops of acquire + release in parallel on one client, for
 * `duration_s`. Keys: fresh (a new key per cycle), warm (w0..w999 in turn;
 * an acquire refused because another loop holds the key is counted and the
 * loop goes on), hot (one key, one loop).
 */
export interface EtcdLockPlan {
  endpoints: string;
  mode: 'fresh' | 'warm' | 'hot';
  concurrency: number;
  duration_s: number;
  prefix: string;
  warmKeys?: number;
}

export interface EtcdLockResult {
  cycles_per_s: number;
  cycles: number;
  refused: number;
  cycle_p50_ms: number;
  cycle_p99_ms: number;
  duration_s: number;
  concurrency: number;
}

async function runPlan(plan: EtcdLockPlan): Promise<EtcdLockResult> {
  const client = new Etcd3({ hosts: plan.endpoints });
  const warmKeys = plan.warmKeys ?? 1000;
  const concurrency = plan.mode === 'hot' ? 1 : plan.concurrency;
  let n = 0;
  const key = () => (plan.mode === 'hot' ? `${plan.prefix}hot` : plan.mode === 'fresh' ? `${plan.prefix}f${n++}` : `${plan.prefix}w${n++ % warmKeys}`);
  const times: number[] = [];
  let refused = 0;
  try {
    // One untimed cycle: the connection and the client's code paths are warm.
    const first = client.lock(`${plan.prefix}warm-up`);
    await first.acquire();
    await first.release();
    const started = performance.now();
    const deadline = started + plan.duration_s * 1000;
    const loop = async () => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        const lock = client.lock(key());
        try {
          await lock.acquire();
        } catch (error) {
          if (error instanceof EtcdLockFailedError) {
            refused++;
            continue;
          }
          throw error;
        }
        await lock.release();
        times.push(performance.now() - t0);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, loop));
    const duration_s = (performance.now() - started) / 1000;
    times.sort((a, b) => a - b);
    const r3 = (x: number) => Math.round(x * 1000) / 1000;
    return {
      cycles_per_s: Math.round(times.length / duration_s),
      cycles: times.length,
      refused,
      cycle_p50_ms: r3(percentile(times, 50)),
      cycle_p99_ms: r3(percentile(times, 99)),
      duration_s: Math.round(duration_s * 10) / 10,
      concurrency,
    };
  } finally {
    client.close();
  }
}

export function runEtcdLocksInChild(plan: EtcdLockPlan, onStart?: (pid: number) => void, onDone?: (done: ChildDone) => void): Promise<EtcdLockResult> {
  return runInChild<EtcdLockPlan, EtcdLockResult>(fileURLToPath(import.meta.url), plan, (plan.duration_s + 60) * 1000, 'etcd lock load', onStart, onDone);
}

serveInChild<EtcdLockPlan, EtcdLockResult>(runPlan);
