import fc from 'fast-check';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  BREEDING_KIND,
  BREEDING_RECORDS_KIND,
  breedingKey,
  GENOME_KIND,
  genomeKey,
  LINEAGE_CATALOG_KIND,
  lineageTenantKey,
  type BreedingRecord,
  type Derivation,
  type GenomeView,
  type SpeciesInput,
  type TraitInput,
  type VerifyView,
} from '../../actors/lineage/messages.js';
import type { GenomeState, Live } from '../../actors/lineage/genome-state.js';
import { LineageSim } from './lineage-driver.js';

/** The breed and founder flows, driven in memory (test/unit/lineage-driver.ts): replay, caps, compensation, provenance. */
const TENANT = 't1';
const catalogKey = lineageTenantKey(TENANT);
let sim: LineageSim;
let records = 0;

const colour: TraitInput = {
  name: 'Coat',
  kind: 'mendelian',
  expression: 'highest_dominance',
  alleles: [
    { id: 'B', label: 'black', dominance: 2, carrier_only_visible: false },
    { id: 'b', label: 'brown', dominance: 1, carrier_only_visible: true },
    { id: 'w', label: 'white', dominance: 0, carrier_only_visible: true },
  ],
  hidden: false,
  conflicts_with: [],
  inheritance: { parent_weighting: 'equal', variance: { distribution: 'none', stddev: 0 } },
  mutation: { rate: 0.2, offset_min: -1, offset_max: 1 },
  range: null,
};
const speed: TraitInput = {
  ...colour,
  name: 'Speed',
  kind: 'numeric',
  expression: 'blend',
  alleles: [],
  inheritance: { parent_weighting: 'random', variance: { distribution: 'normal', stddev: 3 } },
  mutation: { rate: 0.3, offset_min: -2, offset_max: 5 },
  range: { min: 0, max: 100, decimals: 2 },
};
const secret: TraitInput = { ...colour, name: 'Secret', hidden: true, expression: 'codominant', mutation: { rate: 0, offset_min: 0, offset_max: 0 } };

function species(overrides: Partial<SpeciesInput> = {}): SpeciesInput {
  return {
    name: 'Horse',
    parent_count: { min: 2, max: 2 },
    compatibility: { min_generation: 0, required_flags: [], self_compatible: false },
    lineage: { inbreeding: { compute: true, max_coefficient: 1, penalties_enabled: true }, track_generations: true },
    max_lifetime_breedings: 0,
    preview_quantization: { bands: 4 },
    traits: ['colour', 'speed', 'secret'],
    ...overrides,
  };
}

const catalog = (message: unknown) => sim.ask(LINEAGE_CATALOG_KIND, catalogKey, message);
const found = (entity_id: string, seed = `seed-${entity_id}`, species_id = 'horse', flags: string[] = []) =>
  sim.ask<GenomeView>(GENOME_KIND, genomeKey(TENANT, entity_id), { op: 'found', tenant: TENANT, species_id, owner: 'u1', seed, input: { alleles: {}, numeric: {}, flags } });
const breedMessage = (parents: string[], seed: string, offspring: string, species_id = 'horse') => ({
  op: 'breed', tenant: TENANT, parents, species_id, requested_by: 'u1', seed, offspring_entity_id: offspring,
});
const breed = (parents: string[], seed: string, offspring: string, species_id = 'horse') =>
  sim.ask<BreedingRecord>(BREEDING_KIND, breedingKey(TENANT, `br_${++records}`), breedMessage(parents, seed, offspring, species_id));
const breedCode = (parents: string[], seed: string, offspring: string, species_id = 'horse') =>
  sim.codeOf(BREEDING_KIND, breedingKey(TENANT, `br_${++records}`), breedMessage(parents, seed, offspring, species_id));
const live = (entity_id: string) => (sim.states.get(`${GENOME_KIND}|${genomeKey(TENANT, entity_id)}`) ?? null) as GenomeState;
const derivation = (entity_id: string) => sim.ask<Derivation>(GENOME_KIND, genomeKey(TENANT, entity_id), { op: 'derivation' });

/** The provenance walk the edge does, then the catalog's verdict. */
function provenance(entity_id: string): VerifyView {
  const walked = new Map<string, Derivation>();
  let frontier = [entity_id];
  while (frontier.length > 0) {
    const next: string[] = [];
    for (const id of frontier) {
      if (walked.has(id)) continue;
      const d = derivation(id);
      walked.set(id, d);
      next.push(...d.parents);
    }
    frontier = next;
  }
  return catalog({ op: 'verify', genomes: [...walked.values()], root: entity_id });
}

beforeEach(() => {
  sim = new LineageSim();
  catalog({ op: 'trait_create', trait_id: 'colour', input: colour, by: 'u1' });
  catalog({ op: 'trait_create', trait_id: 'speed', input: speed, by: 'u1' });
  catalog({ op: 'trait_create', trait_id: 'secret', input: secret, by: 'u1' });
  catalog({ op: 'species_create', species_id: 'horse', input: species(), by: 'u1' });
});

describe('founders', () => {
  it('draws what is not given from the seed, the same for the same seed', () => {
    const a = found('a', 'same');
    const b = found('b', 'same');
    expect(a.raw_alleles).toEqual(b.raw_alleles);
    expect(a.numeric).toEqual(b.numeric);
    expect(a.generation).toBe(0);
    expect(a.species_version).toBe(1);
    expect(a.anchor_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(a.anchor_hash).not.toBe(b.anchor_hash);
    expect(a.hidden_traits).toEqual(['secret']);
  });

  it('keeps given alleles and values; refuses unknown traits and alleles, and a second genome for the entity', () => {
    const given = sim.ask<GenomeView>(GENOME_KIND, genomeKey(TENANT, 'g'), {
      op: 'found', tenant: TENANT, species_id: 'horse', owner: 'u1', seed: 's', input: { alleles: { colour: { first: 'b', second: 'w' } }, numeric: { speed: 42.5 }, flags: ['fast'] },
    });
    expect(given.raw_alleles.colour).toEqual({ first: 'b', second: 'w' });
    expect(given.expressed.colour).toBe('b');
    expect(given.numeric.speed).toBe(42.5);
    expect(given.flags.filter((flag) => !flag.startsWith('carrier:secret:'))).toEqual(['carrier:colour:w', 'fast']);
    const bad = (input: unknown) => sim.codeOf(GENOME_KIND, genomeKey(TENANT, 'h'), { op: 'found', tenant: TENANT, species_id: 'horse', owner: 'u1', seed: 's', input });
    expect(bad({ alleles: { nope: { first: 'B', second: 'B' } }, numeric: {}, flags: [] })).toBe('BAD_REQUEST');
    expect(bad({ alleles: { colour: { first: 'B', second: 'Z' } }, numeric: {}, flags: [] })).toBe('BAD_REQUEST');
    expect(bad({ alleles: {}, numeric: { speed: 101 }, flags: [] })).toBe('BAD_REQUEST');
    expect(bad({ alleles: {}, numeric: {}, flags: ['carrier:x:y'] })).toBe('BAD_REQUEST');
    expect(live('h')).toBeNull();
    expect(sim.codeOf(GENOME_KIND, genomeKey(TENANT, 'h'), { op: 'found', tenant: TENANT, species_id: 'nope', owner: 'u1', seed: 's', input: { alleles: {}, numeric: {}, flags: [] } })).toBe('not_found');
    expect(live('h')).toBeNull();
    expect(sim.codeOf(GENOME_KIND, genomeKey(TENANT, 'g'), { op: 'found', tenant: TENANT, species_id: 'horse', owner: 'u1', seed: 's', input: { alleles: {}, numeric: {}, flags: [] } })).toBe('conflict');
  });
});

describe('breeding', () => {
  it('is deterministic: same parents, species version and seed give the same offspring', () => {
    found('a');
    found('b');
    const one = breed(['a', 'b'], 'seed-x', 'c1');
    const two = breed(['a', 'b'], 'seed-x', 'c2');
    const c1 = derivation('c1');
    const c2 = derivation('c2');
    expect(c1.raw_alleles).toEqual(c2.raw_alleles);
    expect(c1.numeric).toEqual(c2.numeric);
    expect(one.mutations).toEqual(two.mutations);
    expect(one.seed).toBe('seed-x');
    expect(one.offspring[0]).toMatchObject({ entity_id: 'c1', generation: 1, inbreeding_coefficient: 0, anchor_hash: c1.anchor_hash });
    expect(c1.parent_anchors).toEqual([derivation('a').anchor_hash, derivation('b').anchor_hash]);
    expect((live('a') as Live).breeding_count).toBe(2);
    expect((live('a') as Live).reservations).toEqual([]);
    const listed = sim.ask(BREEDING_RECORDS_KIND, catalogKey, { op: 'list', query: { page: 1, page_size: 10, sort_order: 'asc' } });
    expect(listed.total).toBe(2);
    expect(listed.items[0]).not.toHaveProperty('seed');
  });

  it('refuses with nothing changed: unknown species 404, wrong parent count 400, unknown parent 404, selfing 409', () => {
    found('a');
    found('b');
    expect(breedCode(['a', 'b'], 's', 'x', 'nope')).toBe('not_found');
    expect(breedCode(['a'], 's', 'x')).toBe('BAD_REQUEST');
    expect(breedCode(['a', 'zz'], 's', 'x')).toBe('not_found');
    expect(breedCode(['a', 'a'], 's', 'x')).toBe('breeding_incompatible');
    expect(live('x')).toBeNull();
    expect((live('a') as Live).breeding_count).toBe(0);
    expect((live('a') as Live).reservations).toEqual([]);
  });

  it('max_lifetime_breedings refuses with 409 and gives the other parent its breeding back', () => {
    catalog({ op: 'species_update', species_id: 'horse', patch: { max_lifetime_breedings: 1 } });
    found('a');
    found('b');
    found('c');
    breed(['a', 'b'], 's', 'x1');
    expect(breedCode(['c', 'a'], 's', 'x2')).toBe('breeding_limit_reached');
    expect((live('c') as Live).breeding_count).toBe(0);
    expect((live('a') as Live).breeding_count).toBe(1);
    expect(live('x2')).toBeNull();
  });

  it('max_coefficient refuses full siblings (0.25) with 409 inbreeding_limit_exceeded and releases both', () => {
    found('a');
    found('b');
    breed(['a', 'b'], 's1', 'x');
    breed(['a', 'b'], 's2', 'y');
    catalog({ op: 'species_update', species_id: 'horse', patch: { lineage: { inbreeding: { max_coefficient: 0.2 } } } });
    try {
      breed(['x', 'y'], 's3', 'z');
      expect.unreachable();
    } catch (error) {
      expect(error).toMatchObject({ code: 'inbreeding_limit_exceeded', details: { inbreeding_coefficient: 0.25, max_coefficient: 0.2 } });
    }
    expect((live('x') as Live).breeding_count).toBe(0);
    expect((live('y') as Live).breeding_count).toBe(0);
    catalog({ op: 'species_update', species_id: 'horse', patch: { lineage: { inbreeding: { max_coefficient: 0.25 } } } });
    expect(breed(['x', 'y'], 's3', 'z').offspring[0].inbreeding_coefficient).toBe(0.25);
    expect((live('z') as Live).derivation.species_version).toBe(3);
  });

  it('required flags, minimum generation and self-compatibility are checked in the parents\' turns', () => {
    catalog({ op: 'species_create', species_id: 'fern', input: species({ parent_count: { min: 1, max: 2 }, compatibility: { min_generation: 0, required_flags: ['mature'], self_compatible: true } }), by: 'u1' });
    found('f1', 's', 'fern', ['mature']);
    found('f2', 's2', 'fern');
    expect(breedCode(['f1', 'f2'], 's', 'o1', 'fern')).toBe('breeding_incompatible');
    expect((live('f1') as Live).breeding_count).toBe(0);
    const selfed = breed(['f1'], 's', 'o2', 'fern');
    expect(selfed.offspring[0].inbreeding_coefficient).toBe(0.5);
    catalog({ op: 'species_update', species_id: 'fern', patch: { compatibility: { min_generation: 1, required_flags: [] } } });
    expect(breedCode(['f1', 'f2'], 's', 'o3', 'fern')).toBe('breeding_incompatible');
    // A parent of another species.
    found('h1');
    expect(breedCode(['h1', 'f1'], 's', 'o4', 'fern')).toBe('breeding_incompatible');
  });

  it('an offspring id that already has a genome: 409 conflict, parents given their breedings back', () => {
    found('a');
    found('b');
    expect(breedCode(['a', 'b'], 's', 'a')).toBe('conflict');
    expect((live('a') as Live).breeding_count).toBe(0);
    expect((live('b') as Live).breeding_count).toBe(0);
  });

  it('concurrent breedings cannot pass the lifetime cap: the count is taken in the parent\'s turn', () => {
    catalog({ op: 'species_update', species_id: 'horse', patch: { max_lifetime_breedings: 1 } });
    for (const id of ['a', 'b', 'c']) found(id);
    sim.hold = true;
    const first = breedingKey(TENANT, 'r1');
    const second = breedingKey(TENANT, 'r2');
    sim.ask(BREEDING_KIND, first, breedMessage(['a', 'b'], 's', 'x'));
    sim.ask(BREEDING_KIND, second, breedMessage(['a', 'c'], 's', 'y'));
    sim.release();
    const made = [live('x'), live('y')].filter((state) => state !== null);
    expect(made).toHaveLength(1);
    expect((live('a') as Live).breeding_count).toBe(1);
    expect((live('b') as Live).breeding_count + (live('c') as Live).breeding_count).toBe(1);
  });
});

describe('provenance', () => {
  it('re-derives every genome back to the founders; a tampered genome fails', () => {
    found('a');
    found('b');
    breed(['a', 'b'], 's1', 'c');
    breed(['a', 'c'], 's2', 'd');
    expect(provenance('d')).toEqual({ chain_verified: true, genomes_verified: 4, failures: [] });
    const state = live('c') as Live;
    const colour = state.derivation.raw_alleles.colour;
    const other = colour.first === 'B' ? 'w' : 'B';
    sim.states.set(`${GENOME_KIND}|${genomeKey(TENANT, 'c')}`, { ...state, derivation: { ...state.derivation, raw_alleles: { ...state.derivation.raw_alleles, colour: { first: other, second: colour.second } } } });
    const verdict = provenance('d');
    expect(verdict.chain_verified).toBe(false);
    expect(verdict.failures.map((failure) => failure.entity_id)).toContain('c');
  });

  it('old species versions stay: a genome bred before a PUT and a trait change still verifies', () => {
    found('a');
    found('b');
    breed(['a', 'b'], 's1', 'c');
    catalog({ op: 'trait_replace', trait_id: 'speed', input: { ...speed, mutation: { rate: 1, offset_min: 10, offset_max: 20 } } });
    expect(catalog({ op: 'species_get', species_id: 'horse' }).version).toBe(2);
    catalog({ op: 'species_delete', species_id: 'horse' });
    expect(provenance('c').chain_verified).toBe(true);
  });

  it('property: over many seeds, every offspring of a random multi-generation herd re-derives', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(), fc.nat(), fc.string({ minLength: 1, maxLength: 12 })), { minLength: 1, maxLength: 8 }), (matings) => {
        sim = new LineageSim();
        catalog({ op: 'trait_create', trait_id: 'colour', input: colour, by: 'u1' });
        catalog({ op: 'trait_create', trait_id: 'speed', input: speed, by: 'u1' });
        catalog({ op: 'trait_create', trait_id: 'secret', input: secret, by: 'u1' });
        catalog({ op: 'species_create', species_id: 'horse', input: species(), by: 'u1' });
        const ids = ['f0', 'f1', 'f2'];
        for (const id of ids) found(id);
        matings.forEach(([x, y, seed], i) => {
          const sire = ids[x % ids.length];
          let dam = ids[y % ids.length];
          if (dam === sire) dam = ids[(y + 1) % ids.length];
          const id = `o${i}`;
          const record = breed([sire, dam], seed, id);
          // Replay: the same parents, version and seed bred again give the same genome.
          breed([sire, dam], seed, `${id}-again`);
          const first = derivation(id);
          const again = derivation(`${id}-again`);
          expect(again.raw_alleles).toEqual(first.raw_alleles);
          expect(again.numeric).toEqual(first.numeric);
          expect(record.offspring[0].anchor_hash).toBe(first.anchor_hash);
          ids.push(id);
        });
        const verdict = provenance(ids[ids.length - 1]);
        expect(verdict.failures).toEqual([]);
        expect(verdict.chain_verified).toBe(true);
      }),
      { numRuns: 60 },
    );
  });
});
