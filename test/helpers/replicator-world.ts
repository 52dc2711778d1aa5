import { expect } from 'vitest';
import { ManualClock } from '../../runtime/index.js';
import { Replicator } from '../../cluster/replication/replicator.js';
import { HeldStore } from './held-store.js';

const silent = { info() {}, warn() {}, error() {}, debug() {} };

/**
 * A Replicator on a HeldStore (each local commit waits until the test releases
 * it) and a manual clock: node n1, which holds every partition's leadership at
 * epoch 1 and has no peers (nothing is sent; in-sync changes succeed).
 */
export function replicatorWith(commitDelayMs: number, deposed: (p: number) => void = () => {}) {
  const local = new HeldStore();
  const clock = Object.assign(new ManualClock(), { monotonicNow: () => clock.now() });
  const replicator = new Replicator({
    local,
    selfId: 'n1',
    heldEpoch: () => 1,
    streamTo: () => undefined,
    recordInSync: async () => true,
    deposed,
    logger: silent,
    clock,
    replicationTimeoutMs: 1000,
    commitDelayMs,
  });
  return { local, clock, replicator };
}

/**
 * replicatorWith, leading `partitions` at epoch 1: each election's fence
 * record (its first local commit) is released, and the commits list emptied.
 */
export async function leadingWith(commitDelayMs: number, partitions: number[] = [0], deposed?: (p: number) => void) {
  const world = replicatorWith(commitDelayMs, deposed);
  for (const p of partitions) {
    const before = world.local.commits.length;
    const won = world.replicator.becomeLeader(p, 1);
    for (let turn = 0; turn < 5 && world.local.commits.length === before; turn++) await Promise.resolve();
    await world.local.release(before);
    expect(await won).toBe(true);
  }
  world.local.commits.length = 0;
  return world;
}
