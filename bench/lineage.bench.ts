import { lineageActors } from '../actors/lineage/actor.js';
import { inbreedingCoefficient, offspringPedigree, type PedigreeParent } from '../actors/lineage/inbreeding.js';
import {
  BREEDING_KIND,
  breedingKey,
  GENOME_KIND,
  genomeKey,
  LINEAGE_CATALOG_KIND,
  lineagePolicy,
  lineageTenantKey,
  type BreedingMessage,
  type BreedingRecord,
  type CatalogMessage,
  type GenomeMessage,
} from '../actors/lineage/messages.js';
import { startBenchRuntime, type BenchRuntime } from './support/runtime.js';
import { runScenarios } from './support/scenarios.js';
import { percentile, seeded } from './support/stats.js';
import type { BenchRow } from './types.js';

/**
 * Lineage (issue 14). Target: breeding with a 10-generation pedigree, the
 * inbreeding coefficient computed in under 1 ms. Timed: what a breed does
 * for it, the offspring's window merged from the parents' windows
 * (offspringPedigree) and Wright's coefficient over it, in-process, on:
 * - a closed herd (16 founders, 10 generations of 16, random mating: every
 *   pair is related through many paths, the recursion's hard case);
 * - two full 10-generation trees (1,022 distinct ancestors each, 2,046 in
 *   the window, the widest window) sharing one founder at the top.
 * Beside it, for scale, a whole breed through the runtime on real LMDB
 * (fsync per commit): the flow's five steps, parents with 10-generation
 * pedigrees from the closed herd.
 */
const AREA = 'lineage';
const DEPTH = lineagePolicy.pedigree_depth_max;
const SAMPLES = 2000;
const BREEDS = Number(process.env.BENCH_LINEAGE_BREEDS ?? 300);

type Animal = PedigreeParent;

function born(herd: Map<string, Animal>, id: string, parents: string[]): Animal {
  const known = [...new Set(parents)].map((parent) => herd.get(parent)!);
  const pedigree = offspringPedigree(known, DEPTH);
  const animal: Animal = {
    entity_id: id,
    parents,
    generation: Math.max(...known.map((parent) => parent.generation)) + 1,
    inbreeding_coefficient: inbreedingCoefficient(parents, pedigree),
    pedigree,
  };
  herd.set(id, animal);
  return animal;
}

/** 16 founders, then 10 generations of 16, each from two distinct random parents of the previous generation. */
function closedHerd(): { herd: Map<string, Animal>; last: string[] } {
  const random = seeded(14);
  const herd = new Map<string, Animal>();
  let previous: string[] = [];
  for (let i = 0; i < 16; i++) {
    const id = `f${i}`;
    herd.set(id, { entity_id: id, parents: [], generation: 0, inbreeding_coefficient: 0, pedigree: {} });
    previous.push(id);
  }
  for (let g = 1; g <= DEPTH; g++) {
    const next: string[] = [];
    for (let i = 0; i < 16; i++) {
      const a = previous[Math.floor(random() * previous.length)];
      let b = previous[Math.floor(random() * previous.length)];
      if (b === a) b = previous[(previous.indexOf(a) + 1) % previous.length];
      next.push(born(herd, `g${g}_${i}`, [a, b]).entity_id);
    }
    previous = next;
  }
  return { herd, last: previous };
}

/** A full binary tree of DEPTH - 1 generations above `root` (every ancestor distinct), `shared` its top-left founder: an offspring of two such roots has a full 10-generation window. */
function fullTree(herd: Map<string, Animal>, root: string, shared: string): Animal {
  const build = (id: string, depth: number, leftmost: boolean): Animal => {
    if (depth === 0) {
      const founderId = leftmost ? shared : id;
      if (!herd.has(founderId)) herd.set(founderId, { entity_id: founderId, parents: [], generation: 0, inbreeding_coefficient: 0, pedigree: {} });
      return herd.get(founderId)!;
    }
    const sire = build(`${id}.s`, depth - 1, leftmost);
    const dam = build(`${id}.d`, depth - 1, false);
    return born(herd, id, [sire.entity_id, dam.entity_id]);
  };
  return build(root, DEPTH - 1, true);
}

interface Timed {
  p50: number;
  p99: number;
  wall_mean: number;
  cpu_mean: number;
}

/** Wall-time percentiles and the process's CPU time per run (the machine is shared: CPU beside wall tells how long a run waited for a core). */
function time(work: () => void): Timed {
  // Warm up (JIT), then start from a collected heap, so the figures are the steady state a node runs in.
  for (let i = 0; i < 200; i++) work();
  (globalThis as { gc?: () => void }).gc?.();
  const samples: number[] = [];
  const cpu_started = process.cpuUsage();
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now();
    work();
    samples.push(performance.now() - started);
  }
  const cpu = process.cpuUsage(cpu_started);
  samples.sort((a, b) => a - b);
  return {
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    wall_mean: samples.reduce((sum, ms) => sum + ms, 0) / samples.length,
    cpu_mean: (cpu.user + cpu.system) / 1000 / SAMPLES,
  };
}

/** The coefficient alone (over the merged window), and the window merge plus the coefficient (what a breed does). */
function timeCoefficient(parents: Animal[], label: string): { rows: BenchRow[]; value: number } {
  const ids = parents.map((parent) => parent.entity_id);
  const window = offspringPedigree(parents, DEPTH);
  const value = inbreedingCoefficient(ids, window);
  const alone = time(() => inbreedingCoefficient(ids, window));
  const merged = time(() => inbreedingCoefficient(ids, offspringPedigree(parents, DEPTH)));
  const row = (scenario: string, timed: Timed): BenchRow => ({
    area: AREA,
    scenario: `${scenario}, ${label}: p50`,
    value: Number(timed.p50.toFixed(4)),
    unit: 'ms',
    note: `target < 1 ms; p99 ${timed.p99.toFixed(3)} ms, wall mean ${timed.wall_mean.toFixed(4)} ms, CPU mean ${timed.cpu_mean.toFixed(4)} ms over ${SAMPLES} runs`,
  });
  return { value, rows: [row('coefficient', alone), row('window merge + coefficient', merged)] };
}

export async function run(): Promise<BenchRow[]> {
  let bench: BenchRuntime | undefined;
  try {
    return await runScenarios(AREA, [
      {
        name: 'inbreeding coefficient, closed herd (16 x 10 generations)',
        async run() {
          const { herd, last } = closedHerd();
          const parents = [herd.get(last[0])!, herd.get(last[1])!];
          const window = Object.keys(offspringPedigree(parents, DEPTH)).length;
          const timed = timeCoefficient(parents, `closed herd, 10 generations (${window} ancestors)`);
          if (!(timed.value > 0)) throw new Error(`F ${timed.value}: the herd should be inbred`);
          return timed.rows;
        },
      },
      {
        name: 'inbreeding coefficient, two full trees (10-generation window)',
        async run() {
          const herd = new Map<string, Animal>();
          const sire = fullTree(herd, 'S', 'common');
          const dam = fullTree(herd, 'D', 'common');
          const window = Object.keys(offspringPedigree([sire, dam], DEPTH)).length;
          const timed = timeCoefficient([sire, dam], `two full trees (${window} ancestors)`);
          // One shared founder 9 generations above each parent: F = (1/2)^(9+9+1).
          if (timed.value !== 2 ** -19) throw new Error(`F ${timed.value}, expected 2^-19`);
          return timed.rows;
        },
      },
      {
        name: `breed through the runtime, ${BREEDS} breedings of 10-generation parents`,
        async run() {
          bench = await startBenchRuntime(lineageActors);
          const runtime = bench.runtime;
          const tenant = 'bench';
          const catalog = (message: CatalogMessage) => runtime.ask(LINEAGE_CATALOG_KIND, lineageTenantKey(tenant), message);
          await catalog({
            op: 'trait_create',
            trait_id: 'coat',
            by: 'bench',
            input: {
              name: 'Coat', kind: 'mendelian', expression: 'highest_dominance', hidden: false, conflicts_with: [], range: null,
              alleles: [{ id: 'B', label: 'B', dominance: 1, carrier_only_visible: false }, { id: 'b', label: 'b', dominance: 0, carrier_only_visible: true }],
              inheritance: { parent_weighting: 'equal', variance: { distribution: 'none', stddev: 0 } },
              mutation: { rate: 0.01, offset_min: -1, offset_max: 1 },
            },
          });
          await catalog({
            op: 'species_create',
            species_id: 'horse',
            by: 'bench',
            input: {
              name: 'Horse', parent_count: { min: 2, max: 2 }, traits: ['coat'], max_lifetime_breedings: 0, preview_quantization: { bands: 4 },
              compatibility: { min_generation: 0, required_flags: [], self_compatible: false },
              lineage: { inbreeding: { compute: true, max_coefficient: 1, penalties_enabled: false }, track_generations: true },
            },
          });
          // Ten generations of a closed herd of 16, bred through the flow itself.
          let previous: string[] = [];
          for (let i = 0; i < 16; i++) {
            const id = `f${i}`;
            const message: GenomeMessage = { op: 'found', tenant, species_id: 'horse', owner: 'bench', seed: id, input: { alleles: {}, numeric: {}, flags: [] } };
            await runtime.ask(GENOME_KIND, genomeKey(tenant, id), message);
            previous.push(id);
          }
          const random = seeded(7);
          let records = 0;
          const breed = (parents: string[], offspring: string) => {
            const message: BreedingMessage = { op: 'breed', tenant, parents, species_id: 'horse', requested_by: 'bench', seed: offspring, offspring_entity_id: offspring };
            return runtime.ask<BreedingRecord>(BREEDING_KIND, breedingKey(tenant, `r${++records}`), message);
          };
          const pair = (pool: string[]) => {
            const a = pool[Math.floor(random() * pool.length)];
            let b = pool[Math.floor(random() * pool.length)];
            if (b === a) b = pool[(pool.indexOf(a) + 1) % pool.length];
            return [a, b];
          };
          for (let g = 1; g <= DEPTH; g++) {
            const made = await Promise.all(Array.from({ length: 16 }, (_, i) => breed(pair(previous), `g${g}_${i}`)));
            previous = made.map((record) => record.offspring[0].entity_id);
          }
          const latencies: number[] = [];
          const started = performance.now();
          for (let i = 0; i < BREEDS; i += 10) {
            await Promise.all(
              Array.from({ length: Math.min(10, BREEDS - i) }, async (_, j) => {
                const t0 = performance.now();
                await breed(pair(previous), `x${i + j}`);
                latencies.push(performance.now() - t0);
              }),
            );
          }
          const seconds = (performance.now() - started) / 1000;
          latencies.sort((a, b) => a - b);
          return [
            {
              area: AREA,
              scenario: 'breed (flow: rules, 2 reservations, create, index) through the runtime, 10 in flight',
              value: Math.round(BREEDS / seconds),
              unit: 'breeds/s',
              note: `p50 ${percentile(latencies, 50).toFixed(2)} ms, p99 ${percentile(latencies, 99).toFixed(2)} ms per breed; real LMDB with fsync; parents with 10-generation pedigrees`,
            },
          ];
        },
      },
    ]);
  } finally {
    await bench?.destroy();
  }
}
