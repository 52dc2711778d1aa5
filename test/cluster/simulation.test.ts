import { describe, expect, it } from 'vitest';
import type { SimFault } from './simulation/messages.js';
import { runSeed, type RunResult } from './simulation/run-seed.js';

/**
 * Seeded simulation of the production cluster code (cluster/cluster-node.ts
 * with its membership, leadership, replicator and router, and the actor
 * runtime) on simulated ports: a scheduler clock, a fake etcd, a lossy
 * network, a disk that fails and crashes; under crashes, pauses, link cuts,
 * failed commits and joins, with the safety invariants checked throughout
 * (see test/cluster/simulation/README.md).
 *
 * SIM_SEEDS=<n> runs n seeds (default 100), from SIM_FIRST (default 1);
 * SIM_SEED=<n> replays one seed.
 */
const replay = process.env.SIM_SEED !== undefined ? Number(process.env.SIM_SEED) : undefined;
const seedCount = Number(process.env.SIM_SEEDS ?? 100);
const firstSeed = Number(process.env.SIM_FIRST ?? 1);

/** Seeds that once found a defect (kept as regression cases; see README.md). */
const REGRESSION_SEEDS = [49, 892, 981];

/** Seeds that found a defect with etcd outages of up to 3 s (README.md, "Regression seeds"); lostAnswers: writes applied with their answer lost. */
const OUTAGE_REGRESSION_SEEDS: { seed: number; lostAnswers?: boolean }[] = [
  { seed: 84 },
  { seed: 270 },
  { seed: 360 },
  { seed: 115, lostAnswers: true },
  { seed: 169, lostAnswers: true },
];
const OUTAGE_MAX_MS = 3000;
/** Seeds run with stalling commits (RunOptions.diskStallMaxMs), and the longest stall. */
const STALL_SEEDS = Number(process.env.SIM_STALL_SEEDS ?? 25);
const STALL_MAX_MS = 4000;
/** Seeds that found a defect with stalling commits (README.md, "Regression seeds"). */
const STALL_REGRESSION_SEEDS = [4, 137];

function summary(results: RunResult[]): string {
  const sum = (f: (r: RunResult) => number) => results.reduce((s, r) => s + f(r), 0);
  return [
    `${results.length} seeds`,
    `leader changes ${sum((r) => r.stats.leaderChanges)} (min ${Math.min(...results.map((r) => r.stats.leaderChanges))} per seed)`,
    `acknowledged writes ${sum((r) => r.stats.acknowledged)}`,
    `reads ${sum((r) => r.stats.reads)}`,
    `crashes ${sum((r) => r.stats.crashes)}, store failures ${sum((r) => r.stats.storeFailures)}, pauses ${sum((r) => r.stats.pauses)}, cuts ${sum((r) => r.stats.cuts)}, stalls ${sum((r) => r.stats.stalls)}, etcd drops ${sum((r) => r.stats.etcdDrops)}`,
    `events ${sum((r) => r.stats.events)}`,
  ].join('; ');
}

async function firstFailure(fault: SimFault, seeds = 100): Promise<RunResult | undefined> {
  for (let seed = 1; seed <= seeds; seed++) {
    const result = await runSeed({ seed, fault });
    if (!result.ok) return result;
  }
  return undefined;
}

describe('cluster simulation (production code on simulated ports)', () => {
  it(replay !== undefined ? `replays SIM_SEED=${replay}` : `keeps every invariant over ${seedCount} seeds`, { timeout: 600_000 }, async () => {
    const seeds = replay !== undefined ? [replay] : Array.from({ length: seedCount }, (_, i) => firstSeed + i);
    const results: RunResult[] = [];
    for (const seed of seeds) {
      const result = await runSeed({ seed });
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

  it('with MIN_IN_SYNC_REPLICAS 2, acknowledges only writes held by 2 disks and refuses the others', { timeout: 120_000 }, async () => {
    const results: RunResult[] = [];
    for (let seed = 1; seed <= 12; seed++) {
      const result = await runSeed({ seed, minInSyncReplicas: 2 });
      if (!result.ok) throw new Error(result.error);
      results.push(result);
    }
    console.log(`MIN_IN_SYNC_REPLICAS 2: ${summary(results)}; refused ${results.reduce((s, r) => s + r.stats.refusedWrites, 0)}`);
    // Crashes leave leaders alone in their in-sync sets: some writes must be refused, and many still acknowledged.
    expect(results.reduce((s, r) => s + r.stats.refusedWrites, 0)).toBeGreaterThan(0);
    for (const r of results) expect(r.stats.acknowledged, `seed ${r.seed}`).toBeGreaterThan(50);
  });

  it('regression seeds keep every invariant', { timeout: 60_000 }, async () => {
    for (const seed of REGRESSION_SEEDS) {
      const result = await runSeed({ seed });
      expect(result.error, `seed ${seed}`).toBeUndefined();
    }
  });

  it('regression seeds with etcd outages keep every invariant', { timeout: 60_000 }, async () => {
    for (const { seed, lostAnswers } of OUTAGE_REGRESSION_SEEDS) {
      const result = await runSeed({ seed, etcdOutageMaxMs: OUTAGE_MAX_MS, etcdLostAnswers: lostAnswers });
      expect(result.error, `seed ${seed}${lostAnswers ? ' (lost answers)' : ''}`).toBeUndefined();
    }
  });

  it('with etcd outages of up to 3 s (writes applied with their answer lost), keeps every invariant', { timeout: 120_000 }, async () => {
    const results: RunResult[] = [];
    for (let seed = 1; seed <= 25; seed++) {
      const result = await runSeed({ seed, etcdOutageMaxMs: OUTAGE_MAX_MS, etcdLostAnswers: true });
      if (!result.ok) throw new Error(result.error);
      results.push(result);
    }
    console.log(`etcd outages: ${summary(results)}`);
    for (const r of results) expect(r.stats.acknowledged, `seed ${r.seed}`).toBeGreaterThan(50);
  });

  it('with commits stalling for up to 4 s (longer than a lease), keeps every invariant', { timeout: 120_000 }, async () => {
    const results: RunResult[] = [];
    const seeds = [...Array.from({ length: STALL_SEEDS }, (_, i) => i + 1), ...STALL_REGRESSION_SEEDS.filter((seed) => seed > STALL_SEEDS)];
    for (const seed of seeds) {
      const result = await runSeed({ seed, diskStallMaxMs: STALL_MAX_MS, groupCommits: true });
      if (!result.ok) throw new Error(result.error);
      results.push(result);
    }
    console.log(`disk stalls: ${summary(results)}; stalled commits ${results.reduce((s, r) => s + r.stats.diskStalls, 0)}`);
    for (const r of results) expect(r.stats.acknowledged, `seed ${r.seed}`).toBeGreaterThan(50);
    expect(results.reduce((s, r) => s + r.stats.diskStalls, 0)).toBeGreaterThan(seeds.length);
  });

  it('the same seed replays exactly', { timeout: 60_000 }, async () => {
    const a = await runSeed({ seed: 42 });
    const b = await runSeed({ seed: 42 });
    expect(b).toEqual(a);
  });

  it('fails when followers acknowledge entries they have not stored (SIM_SEED printed)', { timeout: 120_000 }, async () => {
    const failure = await firstFailure('followers_ack_unapplied');
    expect(failure, 'no seed of 100 caught the fault').toBeDefined();
    expect(failure!.error).toMatch(/^SIM_SEED=\d+: (acknowledged write lost|fence token went backwards|stale read|replicas diverged)/);
  });

  it('fails when a node\'s clock stops while it is paused (it trusts an expired lease)', { timeout: 120_000 }, async () => {
    const failure = await firstFailure('clock_stops_while_paused');
    expect(failure, 'no seed of 100 caught the fault').toBeDefined();
    expect(failure!.error).toMatch(/^SIM_SEED=\d+: (\S+ served a (read|write) on partition \d+ at epoch \d+ while etcd says|fence token went backwards|stale read|acknowledged write lost)/);
  });
});
