import { lockActor } from '../../actors/locks/actor.js';
import { lockActorKey, LOCK_KIND } from '../../actors/locks/messages.js';
import { ADD_ONE, COUNTER_KIND, counterActor } from './counter-actor.js';
import { startBenchRuntime } from './runtime.js';

/**
 * Child process of memory.bench.ts, started with --expose-gc: activates
 * `count` actors of one kind, measures the heap after full GCs, passivates
 * them all and measures again. Prints one JSON line on stdout.
 *
 * Key strings are built on the fly, so they count as part of the actor (the
 * runtime keeps them); the baseline is taken after the runtime started.
 */
export interface MemoryProbeResult {
  kind: 'counter' | 'lock';
  count: number;
  active: number;
  passivated: number;
  heap_base_bytes: number;
  heap_active_bytes: number;
  heap_passivated_bytes: number;
  pending_alarms: number;
  elapsed_ms: number;
}

const gc = (globalThis as { gc?: () => void }).gc;

async function settledHeap(): Promise<number> {
  if (!gc) throw new Error('run with node --expose-gc');
  for (let i = 0; i < 4; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  return process.memoryUsage().heapUsed;
}

async function main(): Promise<void> {
  const kind = process.argv[2] === 'lock' ? 'lock' : 'counter';
  const count = Math.min(Math.max(Number(process.argv[3] ?? 100_000), 1), 1_000_000);
  const started_ms = performance.now();
  // Every actor is asked once and must stay resident to be measured: the probation bound (runtime/probation.ts)
  // and the activation limit are raised to the count, so neither trims them.
  const bench = await startBenchRuntime([counterActor, lockActor], { limits: { activations_max: Math.max(count, 100_000), activations_probation_max: count } });
  const runtime = bench.runtime;
  try {
    // One message first, so code paths and LMDB are warm before the baseline.
    await runtime.ask(COUNTER_KIND, 'warm-up', ADD_ONE);
    runtime.passivateIdle(0);
    const heap_base_bytes = await settledHeap();

    const inFlight = 1000;
    for (let start = 0; start < count; start += inFlight) {
      const end = Math.min(count, start + inFlight);
      const replies: Promise<unknown>[] = [];
      for (let i = start; i < end; i++) {
        if (kind === 'counter') replies.push(runtime.ask(COUNTER_KIND, `counter-${i}`, ADD_ONE));
        else {
          // A held lock: a state with a holder (expiry is read from it: no alarm).
          const key = lockActorKey('usr_0123456789abcdefghij', 'bench', `key-${i}`);
          replies.push(runtime.ask(LOCK_KIND, key, { op: 'acquire', owner_id: `owner-${i}`, ttl_seconds: 3600 }));
        }
      }
      await Promise.all(replies);
    }
    const active = runtime.activeActorCount();
    const heap_active_bytes = await settledHeap();

    const passivated = runtime.passivateIdle(0);
    const heap_passivated_bytes = await settledHeap();

    const result: MemoryProbeResult = {
      kind,
      count,
      active,
      passivated,
      heap_base_bytes,
      heap_active_bytes,
      heap_passivated_bytes,
      pending_alarms: runtime.pendingAlarmCount(),
      elapsed_ms: Math.round(performance.now() - started_ms),
    };
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    await bench.destroy();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
