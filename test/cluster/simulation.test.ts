import { describe, expect, it } from 'vitest';
import type { SimBug } from './simulation/messages.js';
import { runSeed, type RunResult } from './simulation/run-seed.js';

/**
 * Seeded simulation of leadership and replication (issue 3): the pure rules
 * of cluster/election.ts, cluster/placement.ts and cluster/replication/*
 * under crashes, pauses, link cuts, failed commits and joins, with the
 * safety invariants checked throughout (see test/cluster/simulation/).
 *
 * SIM_SEEDS=<n> runs n seeds (default 300); SIM_SEED=<n> replays one seed.
 */
const replay = process.env.SIM_SEED !== undefined ? Number(process.env.SIM_SEED) : undefined;
const seedCount = Number(process.env.SIM_SEEDS ?? 300);

function summary(results: RunResult[]): string {
  const sum = (f: (r: RunResult) => number) => results.reduce((s, r) => s + f(r), 0);
  return [
    `${results.length} seeds`,
    `leader changes ${sum((r) => r.stats.leaderChanges)} (min ${Math.min(...results.map((r) => r.stats.leaderChanges))} per seed)`,
    `acknowledged writes ${sum((r) => r.stats.acknowledged)}`,
    `reads ${sum((r) => r.stats.reads)}`,
    `crashes ${sum((r) => r.stats.crashes)}, store failures ${sum((r) => r.stats.storeFailures)}, pauses ${sum((r) => r.stats.pauses)}, cuts ${sum((r) => r.stats.cuts)}, stalls ${sum((r) => r.stats.stalls)}`,
    `events ${sum((r) => r.stats.events)}`,
  ].join('; ');
}

describe('cluster simulation', () => {
  it(replay !== undefined ? `replays SIM_SEED=${replay}` : `keeps every invariant over ${seedCount} seeds`, () => {
    const seeds = replay !== undefined ? [replay] : Array.from({ length: seedCount }, (_, i) => i + 1);
    const results: RunResult[] = [];
    for (const seed of seeds) {
      const result = runSeed({ seed });
      if (!result.ok) throw new Error(result.error);
      results.push(result);
    }
    console.log(summary(results));
    // The runs must actually exercise failover: several leader changes and many acknowledged writes per seed.
    for (const r of results) {
      expect(r.stats.leaderChanges, `seed ${r.seed}`).toBeGreaterThanOrEqual(4);
      expect(r.stats.acknowledged, `seed ${r.seed}`).toBeGreaterThan(50);
    }
  });

  it('the same seed replays exactly', () => {
    const a = runSeed({ seed: 42 });
    const b = runSeed({ seed: 42 });
    expect(b).toEqual(a);
  });

  it('fails when leaders acknowledge writes without waiting for followers (SIM_SEED printed)', () => {
    const failure = firstFailure('ack_on_local_commit');
    expect(failure, 'no seed of 200 caught the broken rule').toBeDefined();
    expect(failure!.error).toMatch(/^SIM_SEED=\d+: (acknowledged write lost|fence token went backwards|stale read)/);
  });

  it('fails when leaders serve without checking their own lease deadline (SIGSTOP)', () => {
    const failure = firstFailure('serve_without_lease');
    expect(failure, 'no seed of 200 caught the broken rule').toBeDefined();
    expect(failure!.error).toMatch(/^SIM_SEED=\d+: (\S+ served a (read|write) on partition \d+ at epoch \d+ while etcd says|fence token went backwards|stale read)/);
  });

  // The two defects the simulation found in the first version of the I/O code (see run-seed.ts / sim-node.ts FIX notes):
  it('fails when a node drops a partition on lease doubt without deleting its key (leadership.ts tick)', () => {
    const failure = firstFailure('drop_without_release');
    expect(failure, 'no seed of 200 caught the broken rule').toBeDefined();
    expect(failure!.error).toMatch(/^SIM_SEED=\d+: liveness: /);
  });

  it('fails when a deposed leader still acknowledges entries (replicator.ts settle)', () => {
    const failure = firstFailure('ack_after_lease');
    expect(failure, 'no seed of 200 caught the broken rule').toBeDefined();
    expect(failure!.error).toMatch(/^SIM_SEED=\d+: fence token went backwards/);
  });

  // Rarer (2 seeds in the first 1000): found by a sweep; if the model's random stream changes, find them
  // again with a loop of runSeed({ seed, bug: 'serve_queued_after_loss' }) over seeds 1..2000.
  it('fails when actor batches queued before the leadership was lost still run (runtime closePartition)', () => {
    for (const seed of [892, 981]) {
      const broken = runSeed({ seed, bug: 'serve_queued_after_loss' });
      expect(broken.error, `seed ${seed}`).toMatch(/^SIM_SEED=\d+: (stale read|acknowledged write lost|fence token went backwards)/);
      expect(runSeed({ seed }).ok, `seed ${seed} with the fix`).toBe(true);
    }
  });
});

function firstFailure(bug: SimBug): RunResult | undefined {
  for (let seed = 1; seed <= 200; seed++) {
    const result = runSeed({ seed, bug });
    if (!result.ok) return result;
  }
  return undefined;
}
