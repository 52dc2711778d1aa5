import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ActorRuntime, LmdbStore, SystemClock, type ActorDefinition, type Limits } from '../../runtime/index.js';

/** An in-process runtime as a node runs it: real LMDB (fsync on commit) in a temp dir, SystemClock. */
export interface BenchRuntime {
  runtime: ActorRuntime;
  dir: string;
  destroy(): Promise<void>;
}

export async function startBenchRuntime(
  definitions: ActorDefinition[],
  options: { partitionCount?: number; limits?: Partial<Limits> } = {},
): Promise<BenchRuntime> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-runtime-'));
  const store = new LmdbStore({ path: dir });
  const runtime = new ActorRuntime({ store, clock: new SystemClock(), partitionCount: options.partitionCount ?? 64, limits: options.limits });
  for (const definition of definitions) runtime.register(definition);
  await runtime.start();
  return {
    runtime,
    dir,
    async destroy() {
      await runtime.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
