import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ActorRuntime, LmdbStore, ManualClock, type ActorDefinition, type Limits } from '../../runtime/index.js';

/** An in-process runtime on real LMDB in a temp dir, with a manual clock. */
export interface TestRuntime {
  runtime: ActorRuntime;
  clock: ManualClock;
  dir: string;
  /** Stops this runtime and starts a new one on the same data (a restart). */
  restart(): Promise<TestRuntime>;
  destroy(): Promise<void>;
}

export async function startTestRuntime(
  definitions: ActorDefinition[],
  options: { dir?: string; clock?: ManualClock; limits?: Partial<Limits>; partitionCount?: number } = {},
): Promise<TestRuntime> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'runtime-test-'));
  const clock = options.clock ?? new ManualClock();
  const store = new LmdbStore({ path: dir });
  const runtime = new ActorRuntime({ store, clock, partitionCount: options.partitionCount ?? 4, limits: options.limits });
  for (const definition of definitions) runtime.register(definition);
  await runtime.start();
  const handle: TestRuntime = {
    runtime,
    clock,
    dir,
    async restart() {
      await runtime.stop();
      return startTestRuntime(definitions, { ...options, dir, clock });
    },
    async destroy() {
      await runtime.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return handle;
}

/** Lets queued microtasks and LMDB commits settle. */
export async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** Polls `check` until it stops throwing (real time, bounded): for effects that follow a commit. */
export async function eventually<T>(check: () => T | Promise<T>, timeout_ms = 2000): Promise<T> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}

/**
 * Waits (bounded, on real time: deliveries are real I/O) for `check` to give a truthy value,
 * firing the manual clock's due alarms and letting commits settle between tries.
 */
export async function untilWithClock<T>(
  clock: () => ManualClock,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  rounds = 1000,
): Promise<T> {
  for (let i = 0; i < rounds; i++) {
    const value = await check();
    if (value) return value;
    clock().advance(0);
    await settle(2);
    await new Promise((resolve) => setTimeout(resolve, 3));
  }
  throw new Error(`timed out waiting for ${what}`);
}
