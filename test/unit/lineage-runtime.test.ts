import { afterEach, describe, expect, it } from 'vitest';
import { lineageActors } from '../../actors/lineage/actor.js';
import {
  BREEDING_KIND,
  BREEDING_RECORDS_KIND,
  breedingKey,
  GENOME_KIND,
  genomeKey,
  LINEAGE_CATALOG_KIND,
  lineageTenantKey,
  type BreedingMessage,
  type CatalogMessage,
  type Derivation,
  type GenomeMessage,
  type VerifyView,
} from '../../actors/lineage/messages.js';
import { eventually, startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

/**
 * The lineage actors in the in-process runtime on real LMDB: the breed flow
 * through the outbox, its lifetime cap under concurrent breedings, and a
 * restart in the middle of breedings (the flows finish from their stored
 * state and outbox, each exactly once in effect).
 */
const TENANT = 'tenant-1';
let rt: TestRuntime | undefined;

afterEach(async () => {
  await rt?.destroy();
  rt = undefined;
});

const ask = <T = any>(kind: string, key: string, message: unknown) => rt!.runtime.ask<T>(kind, key, message);
const catalog = (message: CatalogMessage) => ask(LINEAGE_CATALOG_KIND, lineageTenantKey(TENANT), message);
const breedMessage = (parents: string[], offspring: string): BreedingMessage => ({
  op: 'breed', tenant: TENANT, parents, species_id: 'horse', requested_by: 'u1', seed: `seed-${offspring}`, offspring_entity_id: offspring,
});
const genome = (id: string) => ask<{ genome: { breeding_count: number } }>(GENOME_KIND, genomeKey(TENANT, id), { op: 'get' } satisfies GenomeMessage);

async function setup(max_lifetime_breedings: number) {
  rt = await startTestRuntime(lineageActors);
  await catalog({
    op: 'trait_create', trait_id: 'coat', by: 'u1',
    input: {
      name: 'Coat', kind: 'mendelian', expression: 'highest_dominance', hidden: false, conflicts_with: [], range: null,
      alleles: [{ id: 'B', label: 'B', dominance: 1, carrier_only_visible: false }, { id: 'b', label: 'b', dominance: 0, carrier_only_visible: true }],
      inheritance: { parent_weighting: 'equal', variance: { distribution: 'none', stddev: 0 } },
      mutation: { rate: 0.05, offset_min: -1, offset_max: 1 },
    },
  });
  await catalog({
    op: 'species_create', species_id: 'horse', by: 'u1',
    input: {
      name: 'Horse', parent_count: { min: 2, max: 2 }, traits: ['coat'], max_lifetime_breedings, preview_quantization: { bands: 4 },
      compatibility: { min_generation: 0, required_flags: [], self_compatible: false },
      lineage: { inbreeding: { compute: true, max_coefficient: 1, penalties_enabled: false }, track_generations: true },
    },
  });
  for (let i = 0; i < 12; i++) {
    await ask(GENOME_KIND, genomeKey(TENANT, `f${i}`), { op: 'found', tenant: TENANT, species_id: 'horse', owner: 'u1', seed: `f${i}`, input: { alleles: {}, numeric: {}, flags: [] } } satisfies GenomeMessage);
  }
}

describe('lineage actors in the runtime', () => {
  it('concurrent breedings of one parent stop exactly at its lifetime cap; the others are refused and compensated', async () => {
    await setup(5);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 11 }, (_, i) => ask(BREEDING_KIND, breedingKey(TENANT, `r${i}`), breedMessage(['f0', `f${i + 1}`], `kid${i}`))),
    );
    const made = outcomes.filter((outcome) => outcome.status === 'fulfilled');
    const refused = outcomes.filter((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
    expect(made).toHaveLength(5);
    expect(new Set(refused.map((outcome) => outcome.reason.code))).toEqual(new Set(['breeding_limit_reached']));
    await eventually(async () => {
      expect((await genome('f0')).genome.breeding_count).toBe(5);
      let partners = 0;
      for (let i = 1; i <= 11; i++) partners += (await genome(`f${i}`)).genome.breeding_count;
      expect(partners).toBe(5);
    });
    const listed = await ask(BREEDING_RECORDS_KIND, lineageTenantKey(TENANT), { op: 'list', query: { page: 1, page_size: 100, sort_order: 'asc' } });
    expect(listed.total).toBe(5);
  });

  it('a restart in the middle of breedings: every flow finishes once, from its stored state and outbox', async () => {
    await setup(0);
    const pending = Array.from({ length: 6 }, (_, i) =>
      ask(BREEDING_KIND, breedingKey(TENANT, `r${i}`), breedMessage([`f${2 * i}`, `f${2 * i + 1}`], `kid${i}`)).catch((error: { code?: string }) => error.code),
    );
    rt = await rt!.restart();
    // The asks may have been answered before the stop, or interrupted by it; the flows go on either way.
    for (const outcome of await Promise.all(pending)) expect(outcome === 'flow_interrupted' || typeof outcome === 'object').toBe(true);
    await eventually(async () => {
      const listed = await ask(BREEDING_RECORDS_KIND, lineageTenantKey(TENANT), { op: 'list', query: { page: 1, page_size: 100, sort_order: 'asc' } });
      expect(listed.total).toBe(6);
    }, 5000);
    for (let i = 0; i < 12; i++) expect((await genome(`f${i}`)).genome.breeding_count).toBe(1);
    // Each offspring exists once and re-derives.
    for (let i = 0; i < 6; i++) {
      const walk: Derivation[] = [await ask<Derivation>(GENOME_KIND, genomeKey(TENANT, `kid${i}`), { op: 'derivation' })];
      for (const parent of walk[0].parents) walk.push(await ask<Derivation>(GENOME_KIND, genomeKey(TENANT, parent), { op: 'derivation' }));
      const verdict = await ask<VerifyView>(LINEAGE_CATALOG_KIND, lineageTenantKey(TENANT), { op: 'verify', genomes: walk, root: `kid${i}` });
      expect(verdict).toEqual({ chain_verified: true, genomes_verified: 3, failures: [] });
    }
  });
});
